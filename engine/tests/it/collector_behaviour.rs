//! Collector behaviour with the built-in simulator as the device (in this test
//! process) and mosquitto as the broker: scheduling under a slow device, shared
//! connections, report modes, sequence numbers across a crash, the Last Will.

use std::time::Duration;

use crate::support::config::{Device, Gateway, Tag};
use crate::support::engine::{ADMIN_TOKEN, Engine, scratch_dir};
use crate::support::mqtt::Subscriber;
use crate::support::peers::{Mosquitto, free_port};
use crate::support::sim::{simulator, simulator_on};
use serde_json::Value;

fn collector(mqtt: u16, http: u16, mode: &str, keep_alive: u16) -> Gateway {
    Gateway::new(&format!("behaviour-{http}"), mqtt)
        .http(http, ADMIN_TOKEN)
        .set("perDeviceTimeoutMs", 2000)
        .set("reportMode", mode)
        .set("mqtt.keepAliveSec", keep_alive)
}

/// Device `id` at unit `unit` of the simulator on `port`, reading `tags`.
fn device(id: &str, port: u16, unit: u8, tags: impl IntoIterator<Item = Tag>) -> Device {
    Device::modbus(id, port)
        .channel("unitId", unit)
        .channel("readTimeoutMs", 1500)
        .tags(tags)
}

/// A tag of register `address`, read every `period_ms`.
fn uint16(key: &str, address: &str, period_ms: u64) -> Tag {
    Tag::new(key, address, "UINT16", period_ms)
}

/// The value of a Prometheus sample line `name{labels} value`.
fn metric(metrics: &str, line_start: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no metric {line_start} in:\n{metrics}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_device_is_skipped_and_never_delays_the_others_which_share_a_connection() {
    let (_slow_sim, slow) = simulator(100, Duration::from_millis(300)).await;
    let (fast_sim, fast) = simulator(100, Duration::ZERO).await;
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect(broker.port()).await;
    let http = free_port();
    let tags = [uint16("a", "40001", 100), uint16("b", "40002", 150)];
    let slow = device("slow", slow.local_addr().port(), 1, tags);
    let mut config = collector(broker.port(), http, "BATCH", 5).device(slow);
    for (id, unit) in [("fast1", 1), ("fast2", 2)] {
        let tags = [uint16("a", "40001", 100)];
        config = config.device(device(id, fast.local_addr().port(), unit, tags));
    }
    let dir = scratch_dir("slow-device");
    let mut engine = Engine::start(&dir, &config.yaml());
    subscriber
        .wait_until(Duration::from_secs(15), "reports from every device", |m| {
            [
                "P/slow/property/post",
                "P/fast1/property/post",
                "P/fast2/property/post",
            ]
            .iter()
            .all(|t| m.iter().any(|m| m.topic == *t))
        })
        .await;
    let start = subscriber.on("P/fast1/property/post").len();
    tokio::time::sleep(Duration::from_secs(2)).await;
    engine.assert_running();
    // Two seconds at 100 ms, next round from completion: about 20 reports.
    let fast_reports = subscriber.on("P/fast1/property/post").len() - start;
    assert!(
        fast_reports >= 15,
        "the fast device kept its pace: {fast_reports} reports in 2 s"
    );
    let metrics = Engine::http_get(http, "/metrics", None)
        .await
        .expect("metrics");
    let skipped = metric(&metrics, "sluice_rounds_skipped_total{device=\"slow\"}");
    assert!(
        skipped > 0.0,
        "the slow device's 150 ms job finds it busy:\n{metrics}"
    );
    assert_eq!(
        metric(&metrics, "sluice_rounds_skipped_total{device=\"fast1\"}"),
        0.0
    );
    assert_eq!(
        metric(&metrics, "sluice_seq_reservations_total"),
        1.0,
        "the start reserved every device's first sequence numbers in one write"
    );
    assert_eq!(
        fast_sim.open_connections(),
        1,
        "two devices on one host:port share one connection"
    );
    let health: Value = serde_json::from_str(
        &Engine::http_get(http, "/health", Some(ADMIN_TOKEN))
            .await
            .expect("health"),
    )
    .expect("JSON");
    assert_eq!(health["devices"]["online"], 3, "{health}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_that_cannot_be_reached_is_warned_of_once_at_the_default_level() {
    let broker = Mosquitto::start();
    let http = free_port();
    let closed = free_port();
    let config = collector(broker.port(), http, "BATCH", 5)
        .set("backoff.baseMs", 50)
        .set("backoff.maxMs", 100)
        .device(device("meter", closed, 1, [uint16("a", "40001", 100)]));
    let dir = scratch_dir("unreachable");
    let mut engine = Engine::start_at_default_level(&dir, &config.yaml());
    let address = format!("127.0.0.1:{closed}");
    let warnings = |log: &str| -> Vec<String> {
        log.lines()
            .filter(|l| l.contains("WARN") && l.contains(&address))
            .map(str::to_owned)
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while warnings(&engine.log()).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no WARN naming {address} within 10 s:\n{}",
            engine.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Twenty more failed rounds (a connect every 100 ms at most): still one line.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let metrics = Engine::http_get(http, "/metrics", None).await;
        let failed = metrics.as_deref().map_or(0.0, |m| {
            metric(m, "sluice_rounds_failed_total{device=\"meter\"}")
        });
        if failed >= 20.0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{metrics:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    engine.assert_running();
    let log = engine.log();
    let told = warnings(&log);
    assert_eq!(told.len(), 1, "{log}");
    assert!(
        told[0].contains("meter") && told[0].contains("refused"),
        "the device and the cause: {}",
        told[0]
    );
    assert!(!log.contains("DEBUG"), "the default level: {log}");
    // The device was never reached: its state is unknown, with the cause and
    // how its connection is doing.
    let body = Engine::http_get(http, "/devices/meter/state", Some(ADMIN_TOKEN))
        .await
        .expect("the state answers");
    let state: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(state["state"], "unknown", "{state}");
    let last_error = state["lastError"].as_str().unwrap_or_default();
    assert!(
        last_error.contains("refused") && last_error.contains("channel"),
        "{state}"
    );
    let connections = state["connections"].as_array().expect("connections");
    assert_eq!(connections.len(), 1, "{state}");
    assert_ne!(connections[0]["state"], "ONLINE", "{state}");

    // The device comes up: one INFO, and its state has no error left.
    let (_sim, _handle) = simulator_on(closed, 100, Duration::ZERO).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let state = loop {
        let body = Engine::http_get(http, "/devices/meter/state", Some(ADMIN_TOKEN)).await;
        let state: serde_json::Value = body
            .and_then(|b| serde_json::from_str(&b).ok())
            .unwrap_or_default();
        if state["state"] == "online" && state["lastError"].is_null() {
            break state;
        }
        assert!(std::time::Instant::now() < deadline, "{state}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(state["connections"][0]["state"], "ONLINE", "{state}");
    let log = engine.log();
    let reached: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("INFO") && l.contains("reachable again"))
        .collect();
    assert_eq!(reached.len(), 1, "{log}");
    assert!(reached[0].contains(&address), "{}", reached[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_modes_sequence_numbers_across_a_crash_and_the_last_will() {
    let (sim, handle) = simulator(100, Duration::ZERO).await;
    sim.set_holding(0, &[10, 20, 30]);
    let port = handle.local_addr().port();
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect(broker.port()).await;
    let tags = [
        uint16("a", "40001", 100),
        uint16("b", "40002", 100),
        uint16("c", "40003", 100),
    ];
    let changes = device("changes", port, 1, tags);

    // ON_CHANGE: after the first report only the changed value is published.
    let dir = scratch_dir("on-change");
    let http = free_port();
    let config = collector(broker.port(), http, "ON_CHANGE", 1).device(changes.clone());
    let mut engine = Engine::start(&dir, &config.yaml());
    let topic = "P/changes/property/post";
    subscriber
        .wait_until(Duration::from_secs(15), "the first report", |m| {
            m.iter().any(|m| m.topic == topic)
        })
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        subscriber.on(topic).len(),
        1,
        "nothing changed, nothing published"
    );
    sim.set_holding(1, &[21]);
    let reports = subscriber
        .wait_until(Duration::from_secs(5), "the change", |m| {
            m.iter().filter(|m| m.topic == topic).count() >= 2
        })
        .await;
    let change = reports
        .iter()
        .rev()
        .find(|m| m.topic == topic)
        .expect("report")
        .json();
    assert_eq!(
        change["values"].as_array().expect("values").len(),
        1,
        "{change}"
    );
    assert_eq!(change["values"][0]["key"], "b");
    assert_eq!(change["values"][0]["value"], 21);

    // A crash (SIGKILL): the broker publishes the Last Will within the keep-alive,
    // and after a restart sequence numbers continue above every one published.
    let before: Vec<Value> = subscriber.on(topic).iter().map(|m| m.json()).collect();
    let before_kill = before
        .iter()
        .map(|r| r["seq"].as_u64().expect("seq"))
        .max()
        .expect("seqs");
    engine.kill();
    let will_topic = format!("collector/behaviour-{http}/status/post");
    subscriber
        .wait_until(Duration::from_secs(10), "the Last Will", |m| {
            m.iter()
                .any(|m| m.topic == will_topic && m.json()["status"] == "offline")
        })
        .await;
    let config = collector(broker.port(), http, "SINGLE", 1).device(changes);
    let _engine = Engine::start(&dir, &config.yaml());
    let seen = subscriber.on(topic).len();
    let reports = subscriber
        .wait_until(Duration::from_secs(15), "reports after the restart", |m| {
            m.iter().filter(|m| m.topic == topic).count() >= seen + 6
        })
        .await;
    // Records whose PUBACK was not yet released on disk may be published again
    // (at-least-once); they carry their old seq and payload, so consumers drop them.
    let after: Vec<Value> = reports
        .iter()
        .filter(|m| m.topic == topic)
        .skip(seen)
        .map(|m| m.json())
        .collect();
    let (replayed, new): (Vec<&Value>, Vec<&Value>) = after
        .iter()
        .partition(|r| r["seq"].as_u64().is_some_and(|s| s <= before_kill));
    for replay in &replayed {
        assert!(
            before.contains(replay),
            "a replay is an exact duplicate: {replay}"
        );
    }
    let seqs: Vec<u64> = new
        .iter()
        .map(|r| r["seq"].as_u64().expect("seq"))
        .collect();
    assert!(seqs.len() >= 5, "{after:?}");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    // SINGLE: one value per report.
    assert!(
        new.iter()
            .all(|r| r["values"].as_array().map(Vec::len) == Some(1)),
        "{new:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unanswered_heartbeats_take_an_idle_connection_offline() {
    let (sim, handle) = simulator(100, Duration::ZERO).await;
    let broker = Mosquitto::start();
    let http = free_port();
    // One slow-period tag: the first round connects, then the link is idle and
    // only heartbeats (every 200 ms, two failures allowed) talk to the device.
    let config = collector(broker.port(), http, "BATCH", 5)
        .set("heartbeatFailures", 2)
        .device(
            Device::modbus("quiet", handle.local_addr().port())
                .channel("readTimeoutMs", 300)
                .channel("heartbeatMs", 200)
                .tag(uint16("a", "40001", 60000)),
        );
    let dir = scratch_dir("heartbeat");
    let mut engine = Engine::start(&dir, &config.yaml());
    let connections =
        |health: &Value, state: &str| health["connections"][state].as_u64().unwrap_or(0);
    let mut health = Value::Null;
    for _ in 0..100 {
        health = serde_json::from_str(
            &Engine::http_get(http, "/health", Some(ADMIN_TOKEN))
                .await
                .expect("health"),
        )
        .expect("JSON");
        if connections(&health, "ONLINE") == 1 && sim.requests() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        connections(&health, "ONLINE"),
        1,
        "connected by the first round: {health}"
    );
    assert!(
        sim.requests() >= 3,
        "heartbeats reach the idle device: {} requests",
        sim.requests()
    );
    // The device stops answering (the socket stays open, as with a PLC that lost power).
    sim.set_response_delay(Duration::from_secs(30));
    let mut went_offline = false;
    for _ in 0..50 {
        health = serde_json::from_str(
            &Engine::http_get(http, "/health", Some(ADMIN_TOKEN))
                .await
                .expect("health"),
        )
        .expect("JSON");
        if connections(&health, "ONLINE") == 0 {
            went_offline = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    engine.assert_running();
    assert!(
        went_offline,
        "two unanswered heartbeats take the link down: {health}"
    );
    let metrics = Engine::http_get(http, "/metrics", None)
        .await
        .expect("metrics");
    assert!(
        metrics.contains("state=\"RECOVERING\"} 1") || metrics.contains("state=\"OFFLINE\"} 1"),
        "{metrics}"
    );
}

/// The registers of `value` (big-endian) in the order `order` lays them on
/// the wire: the seed's CDAB swaps the 32-bit halves, GHEFCDAB reverses them.
fn float64_registers(value: f64, order: &str) -> Vec<u16> {
    let be = value.to_be_bytes();
    let words: Vec<u16> = be
        .chunks(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]))
        .collect();
    match order {
        "CDAB" => vec![words[2], words[3], words[0], words[1]],
        "GHEFCDAB" => words.into_iter().rev().collect(),
        _ => words,
    }
}

/// `collector.rawValue`: each value goes out beside the value the device
/// holds, decoded before the pipeline scales it (seed 003's `rawValue`);
/// FLOAT64 values in the seed's CDAB and in GHEFCDAB read right through the
/// whole pipeline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_values_go_out_beside_the_scaled_ones() {
    let (sim, handle) = simulator(10, Duration::ZERO).await;
    let mut registers = vec![1234, 0xFFFF];
    registers.extend(float64_registers(1234.5678, "CDAB"));
    registers.extend(float64_registers(-2.5, "GHEFCDAB"));
    sim.set_holding(0, &registers);
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect(broker.port()).await;
    let http = free_port();
    let tags = [
        uint16("flow", "40001", 100).set("factor", 0.01),
        Tag::new("delta", "40002", "INT16", 100).set("offset", 100),
        Tag::new("f64_cdab", "40003", "FLOAT64", 100).set("byteOrder", "CDAB"),
        Tag::new("f64_ghef", "40007", "FLOAT64", 100).set("byteOrder", "GHEFCDAB"),
    ];
    let config = collector(broker.port(), http, "BATCH", 60)
        .set("rawValue", true)
        .device(device("meter", handle.local_addr().port(), 1, tags))
        .yaml();
    let engine = Engine::start(&scratch_dir("raw-values"), &config);
    let messages = subscriber
        .wait_until(Duration::from_secs(15), "a report", |m| {
            m.iter().any(|m| m.topic == "P/meter/property/post")
        })
        .await;
    let report = messages
        .iter()
        .find(|m| m.topic == "P/meter/property/post")
        .expect("report")
        .json();
    let values: Vec<(Value, Value)> = report["values"]
        .as_array()
        .expect("values")
        .iter()
        .map(|v| (v["value"].clone(), v["rawValue"].clone()))
        .collect();
    assert_eq!(
        values,
        [
            (serde_json::json!(12.34), serde_json::json!(1234)),
            (serde_json::json!(99.0), serde_json::json!(-1)),
            (serde_json::json!(1234.5678), serde_json::json!(1234.5678)),
            (serde_json::json!(-2.5), serde_json::json!(-2.5)),
        ],
        "{report}"
    );
    // The tag whose 64-bit CDAB read otherwise before is named at start.
    let log = engine.log();
    let warning = log
        .lines()
        .find(|l| l.contains("CDAB on a 64-bit value"))
        .expect("a warning");
    assert!(
        warning.contains("f64_cdab") && !warning.contains("f64_ghef"),
        "{warning}"
    );
}
