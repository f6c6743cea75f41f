//! Editing the device configuration of a running engine: devices are added,
//! changed and removed without touching the other devices' connections or
//! rounds; a broken edit is refused with its position and changes nothing.

use std::path::Path;
use std::time::Duration;

use crate::support::config::{Device, Gateway, Tag, Tenant};
use crate::support::engine::{Engine, scratch_dir};
use crate::support::mqtt::{Subscriber, reports};
use crate::support::peers::{Mosquitto, free_port};
use serde_json::Value;
use sluice::sim::{SimHandle, Simulator};

const ADMIN: &str = "admin-token";

/// One device entry polling register 40001 of the simulator on `port` every
/// 100 ms, scaled by `factor`.
fn device(id: &str, port: u16, factor: u32) -> Device {
    Device::modbus(id, port).tag(scaled("40001", factor))
}

/// Tag `t` at `address`, read every 100 ms, scaled by `factor`.
fn scaled(address: &str, factor: u32) -> Tag {
    Tag::new("t", address, "UINT16", 100).set("factor", factor)
}

/// [`device`] with a read timeout of 1.5 s on its channel.
fn slow(id: &str, port: u16, factor: u32) -> Device {
    device(id, port, factor).channel("readTimeoutMs", 1500)
}

/// The `collector` section for an engine using `broker` and HTTP port `http`.
fn collector(broker: u16, http: u16) -> Gateway {
    Gateway::new(&format!("reload-{http}"), broker).http(http, ADMIN)
}

/// Waits (bounded) until `check` holds.
async fn until(what: &str, check: impl Fn() -> bool) {
    for _ in 0..300 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

fn topic(id: &str) -> String {
    format!("P/{id}/property/post")
}

/// Waits until device `id`'s latest report carries `value`.
async fn until_value(subscriber: &Subscriber, id: &str, value: f64) {
    let what = format!("{id} = {value}");
    subscriber.until_value(&topic(id), value, &what).await;
}

/// Sequence numbers without a gap or a repeat.
fn assert_unbroken(seen: &[(i64, f64)], what: &str) {
    let mut seqs: Vec<i64> = seen.iter().map(|(seq, _)| *seq).collect();
    seqs.sort_unstable();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "{what}: no seq lost or repeated: {seqs:?}"
    );
}

async fn health(http: u16) -> Value {
    Engine::health(http, ADMIN).await
}

/// Polls `/health` (bounded) until `done` holds.
async fn until_health(http: u16, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    Engine::until_health(http, ADMIN, (what, Duration::from_secs(5)), done).await
}

async fn serve(value: u16) -> (Simulator, SimHandle) {
    let (sim, handle) = crate::support::sim::simulator(10, Duration::ZERO).await;
    sim.set_holding(0, &[value]);
    (sim, handle)
}

/// Writes `collector` with `devices` to `path`.
fn write_config(path: &Path, collector: &Gateway, devices: impl IntoIterator<Item = Device>) {
    let config = devices.into_iter().fold(collector.clone(), Gateway::device);
    std::fs::write(path, config.yaml()).expect("config");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_added_changed_and_removed_live_leave_the_others_untouched() {
    let (sim_a, handle_a) = serve(11).await;
    let (sim_b, handle_b) = serve(22).await;
    let (_sim_c, handle_c) = serve(33).await;
    let (a, b, c) = (
        handle_a.local_addr().port(),
        handle_b.local_addr().port(),
        handle_c.local_addr().port(),
    );
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect(broker.port()).await;
    let http = free_port();
    let collector = collector(broker.port(), http);
    let dir = scratch_dir("device-reload");
    let file = dir.join("devices.yaml");
    write_config(&file, &collector, [device("a", a, 1), device("b", b, 1)]);
    let _engine = Engine::start_with(&dir, &file);
    until_value(&subscriber, "a", 11.0).await;
    until_value(&subscriber, "b", 22.0).await;
    assert_eq!(sim_a.accepted_connections(), 1);

    // Edited on disk: b changes its scale, c is new; the watcher applies it.
    write_config(
        &file,
        &collector,
        [device("a", a, 1), device("b", b, 2), device("c", c, 1)],
    );
    until_value(&subscriber, "b", 44.0).await;
    until_value(&subscriber, "c", 33.0).await;
    // The reload is counted once it is in place; the new device may report first.
    let status = until_health(http, "the reload counted", |s| s["config"]["reloads"] == 1).await;
    assert_eq!(status["devices"]["total"], 3, "{status}");

    // Removed: b stops, goes offline, and its connection is closed.
    write_config(&file, &collector, [device("a", a, 1), device("c", c, 1)]);
    subscriber
        .wait_until(Duration::from_secs(15), "b offline", |m| {
            m.iter()
                .any(|m| m.topic == "P/b/status/post" && m.json()["status"] == "offline")
        })
        .await;
    until("b's connection closed once no device uses it", || {
        sim_b.open_connections() == 0
    })
    .await;
    // Its round in progress at the reload may still report; then nothing more.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let b_reports = reports(&subscriber.messages(), &topic("b")).len();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        reports(&subscriber.messages(), &topic("b")).len(),
        b_reports
    );

    // A broken edit: refused with its position, everything keeps running.
    let broken = Device::modbus("c", c).tag(scaled("49x", 1));
    write_config(&file, &collector, [device("a", a, 1), broken]);
    let (status, refused) = Engine::request(http, "POST", "/reload", Some(ADMIN), None).await;
    assert_eq!(status, 422, "{refused}");
    let message = refused["devices"]["error"].as_str().unwrap_or("");
    assert!(message.contains("devices.yaml:"), "{message}");
    let before = reports(&subscriber.messages(), &topic("c")).len();
    subscriber
        .wait_until(Duration::from_secs(5), "c still polled", |m| {
            reports(m, &topic("c")).len() >= before + 3
        })
        .await;
    assert!(health(http).await["config"]["lastError"].is_string());
    // The codec refused the address: the configuration's fault, so no call of
    // the codec failed and its driver stays online.
    let metrics = Engine::http_get(http, "/metrics", None)
        .await
        .expect("metrics");
    let pool_failures: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("sluice_component_pool_failures_total{"))
        .collect();
    assert!(!pool_failures.is_empty(), "{metrics}");
    assert!(
        pool_failures.iter().all(|l| l.ends_with(" 0")),
        "{pool_failures:?}"
    );

    // A device of a tenant the running engine does not know: tenants change at
    // the next start, so the edit is refused.
    let with_tenant = collector.clone().tenant(Tenant::new(7, "seven"));
    let of_tenant = device("c", c, 1).set("tenantId", 7);
    write_config(&file, &with_tenant, [device("a", a, 1), of_tenant]);
    let (status, refused) = Engine::request(http, "POST", "/reload", Some(ADMIN), None).await;
    assert_eq!(status, 422, "{refused}");
    let message = refused["devices"]["error"].as_str().unwrap_or("");
    assert!(message.contains("tenant 7 is new"), "{message}");

    // A collector change is reported as needing a restart; devices still apply.
    let slower = collector.clone().set("workerThreads", 3);
    write_config(&file, &slower, [device("a", a, 1), device("c", c, 3)]);
    // This time through `sluice reload`, which asks the running engine.
    let reload = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["reload", "--config"])
        .arg(&file)
        .output()
        .expect("sluice reload runs");
    let done: Value = serde_json::from_slice(&reload.stdout).expect("json answer");
    assert!(reload.status.success(), "{done}");
    assert_eq!(done["devices"]["restartNeeded"][0], "collector", "{done}");
    until_value(&subscriber, "c", 99.0).await;
    let status = health(http).await;
    assert!(status["config"]["lastError"].is_null(), "{status}");

    // Device a was never touched: one connection, every seq, no round skipped.
    assert_eq!(sim_a.accepted_connections(), 1);
    let seen = reports(&subscriber.messages(), &topic("a"));
    assert!(seen.len() > 20, "{seen:?}");
    assert_unbroken(&seen, "a");
    assert_unbroken(&reports(&subscriber.messages(), &topic("b")), "b");
    let metrics = Engine::http_get(http, "/metrics", None)
        .await
        .expect("metrics");
    assert!(
        metrics.contains("sluice_rounds_skipped_total{device=\"a\"} 0"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("device=\"b\""),
        "b is gone from the metrics"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_connection_follows_its_first_channel_and_a_new_identity_leaves_the_old_offline() {
    let (sim, handle) = serve(11).await;
    let port = handle.local_addr().port();
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect(broker.port()).await;
    let http = free_port();
    let collector = collector(broker.port(), http);
    let dir = scratch_dir("shared-reload");
    let file = dir.join("devices.yaml");
    write_config(
        &file,
        &collector,
        [device("x", port, 1), device("w", port, 1)],
    );
    let _engine = Engine::start_with(&dir, &file);
    until_value(&subscriber, "x", 11.0).await;
    until_value(&subscriber, "w", 11.0).await;
    assert_eq!(sim.accepted_connections(), 1, "one shared connection");

    // The second channel's timeout does not make the shared connection's
    // settings (the first channel's do): w is rebuilt on the same connection.
    write_config(
        &file,
        &collector,
        [device("x", port, 1), slow("w", port, 2)],
    );
    until_value(&subscriber, "w", 22.0).await;
    assert_eq!(sim.accepted_connections(), 1, "x's connection untouched");

    // The first channel's timeout does: one new connection replaces the old one
    // for both devices, never two side by side.
    write_config(&file, &collector, [slow("x", port, 3), slow("w", port, 2)]);
    until_value(&subscriber, "x", 33.0).await;
    until("the new connection alone", || {
        sim.accepted_connections() == 2 && sim.open_connections() == 1
    })
    .await;
    until_value(&subscriber, "w", 22.0).await;

    // w gets another MQTT identity: its old status topic is left offline.
    let renamed = slow("w", port, 2).set("deviceNum", "w2");
    write_config(&file, &collector, [slow("x", port, 3), renamed]);
    until_value(&subscriber, "w2", 22.0).await;
    subscriber
        .wait_until(Duration::from_secs(15), "w's old status offline", |m| {
            m.iter()
                .rev()
                .find(|m| m.topic == "P/w/status/post")
                .is_some_and(|m| m.json()["status"] == "offline")
        })
        .await;
}
