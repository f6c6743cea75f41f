//! Store and forward with real processes: the broker (mosquitto) goes away for tens
//! of seconds while polling goes on, the engine is killed with SIGKILL during the
//! outage and during the replay, the WAL quota runs out, the WAL file is damaged.
//! Every report durably appended must reach the platform, in order per device.
//! A crash may skip the rest of a device's block of sequence numbers (WAL-4 of
//! `docs/wal.md`), and nothing else.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::config::{Device, Gateway, Tag};
use crate::support::engine::{ADMIN_TOKEN, Engine, scratch_dir};
use crate::support::mqtt::{Message, Subscriber};
use crate::support::peers::{Certificates, Mosquitto, Peer, free_port};
use crate::support::sim::simulator;
use serde_json::Value;

const DEVICES: [&str; 3] = ["d1", "d2", "d3"];

/// The three simulated devices, `tags` registers each, read every `period` ms,
/// reported in batches.
fn config(mqtt: u16, http: u16, modbus: u16, tags: usize, period: u64) -> Gateway {
    let mut gateway = Gateway::new(&format!("saf-{http}"), mqtt)
        .http(http, ADMIN_TOKEN)
        .set("reportMode", "BATCH")
        .set("mqtt.keepAliveSec", 5);
    for (unit, id) in DEVICES.iter().enumerate() {
        let mut device = Device::modbus(id, modbus).channel("unitId", unit + 1);
        for t in 0..tags {
            let address = (40001 + t).to_string();
            device = device.tag(Tag::new(&format!("t{t}"), &address, "UINT16", period));
        }
        gateway = gateway.device(device);
    }
    gateway
}

/// Sequence numbers per device, in arrival order (duplicates included).
fn seqs(messages: &[Message]) -> BTreeMap<String, Vec<u64>> {
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for message in messages
        .iter()
        .filter(|m| m.topic.ends_with("/property/post"))
    {
        let report = message.json();
        let device = report["deviceNum"].as_str().expect("deviceNum").to_owned();
        out.entry(device)
            .or_default()
            .push(report["seq"].as_u64().expect("seq"));
    }
    out
}

/// The numbers of 1..=max that did not arrive, as runs (first, last).
fn gaps(seen: &BTreeSet<u64>) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    let max = seen.last().copied().unwrap_or(0);
    for missing in (1..=max).filter(|s| !seen.contains(s)) {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == missing => *last = missing,
            _ => runs.push((missing, missing)),
        }
    }
    runs
}

/// The ranges each device's reports announced as skipped (WAL-10).
fn announced(messages: &[Message]) -> BTreeMap<String, BTreeSet<(u64, u64)>> {
    let mut out: BTreeMap<String, BTreeSet<(u64, u64)>> = BTreeMap::new();
    for message in messages
        .iter()
        .filter(|m| m.topic.ends_with("/property/post"))
    {
        let report = message.json();
        if let Some(skipped) = report.get("skipped") {
            let device = report["deviceNum"].as_str().expect("deviceNum").to_owned();
            let from = skipped["from"].as_u64().expect("from");
            let to = skipped["to"].as_u64().expect("to");
            out.entry(device).or_default().insert((from, to));
        }
    }
    out
}

/// What `restarts` crashes may leave out of a device's numbers: what the first
/// report after each announced, and nothing else.
fn only_announced_gaps(
    seen: &BTreeSet<u64>,
    skipped: Option<&BTreeSet<(u64, u64)>>,
    restarts: usize,
) -> bool {
    let skipped = skipped.cloned().unwrap_or_default();
    skipped.len() <= restarts
        && gaps(seen).iter().all(|(first, last)| {
            (*first..=*last).all(|n| skipped.iter().any(|(from, to)| *from <= n && n <= *to))
        })
}

/// Every device's numbers, duplicates dropped, are 1..=max with none missing but
/// what `restarts` crashes announced skipped, and first arrivals are in increasing
/// order.
fn assert_complete_and_ordered(messages: &[Message], restarts: usize) -> BTreeMap<String, u64> {
    let mut highest = BTreeMap::new();
    let skipped = announced(messages);
    for (device, arrived) in seqs(messages) {
        let mut seen = BTreeSet::new();
        let firsts: Vec<u64> = arrived
            .iter()
            .copied()
            .filter(|s| seen.insert(*s))
            .collect();
        assert!(
            firsts.windows(2).all(|w| w[0] < w[1]),
            "{device}: reordered: {firsts:?}"
        );
        let max = *seen.last().expect("reports");
        assert!(
            only_announced_gaps(&seen, skipped.get(&device), restarts),
            "{device}: missing {:?} of 1..={max} after {restarts} crashes (announced {:?})",
            gaps(&seen),
            skipped.get(&device)
        );
        highest.insert(device, max);
    }
    highest
}

/// Waits until every device has reported at least `at_least` reports and the
/// stream is complete up to its highest number, but for what `restarts`
/// crashes skipped and announced.
async fn wait_complete(
    subscriber: &Subscriber,
    (at_least, restarts): (u64, usize),
    timeout: Duration,
) -> BTreeMap<String, u64> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let messages = subscriber.messages();
        let per_device = seqs(&messages);
        let skipped = announced(&messages);
        let caught_up = DEVICES.iter().all(|d| {
            per_device.get(*d).is_some_and(|s| {
                let set: BTreeSet<u64> = s.iter().copied().collect();
                set.len() as u64 >= at_least && only_announced_gaps(&set, skipped.get(*d), restarts)
            })
        });
        if caught_up {
            return assert_complete_and_ordered(&messages, restarts);
        }
        if std::time::Instant::now() > deadline {
            let summary: Vec<_> = per_device
                .iter()
                .map(|(d, s)| (d.clone(), s.len(), s.iter().max().copied()))
                .collect();
            panic!("not complete after {timeout:?}: {summary:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn health(http: u16) -> Value {
    Engine::health(http, ADMIN_TOKEN).await
}

/// Waits (bounded) until the WAL of the engine on `http` holds `done` records.
async fn until_wal(http: u16, what: &str, done: impl Fn(u64) -> bool) -> Value {
    Engine::until_health(http, ADMIN_TOKEN, (what, Duration::from_secs(30)), |h| {
        h["wal"]["records"].as_u64().is_some_and(&done)
    })
    .await
}

fn device_messages(subscriber: &Subscriber) -> u64 {
    seqs(&subscriber.messages())
        .values()
        .map(|s| s.len() as u64)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_outage_loses_nothing() {
    outage_loses_nothing(false).await;
}

/// The same over mutual TLS: the broker's TLS listener stopped and started again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_outage_over_tls_loses_nothing() {
    outage_loses_nothing(true).await;
}

async fn outage_loses_nothing(tls: bool) {
    let (_sim, modbus) = simulator(200, Duration::ZERO).await;
    let certs = tls.then(|| Certificates::make("outage-certs"));
    let (mut broker, tls_port) = match &certs {
        Some(certs) => Mosquitto::start_tls(certs, "trusted", true),
        None => (Mosquitto::start(), 0),
    };
    let subscriber = Subscriber::connect_persistent(broker.port()).await;
    let http = free_port();
    let dir = scratch_dir("outage");
    let mut gateway = config(broker.port(), http, modbus.local_addr().port(), 4, 100);
    if let Some(certs) = &certs {
        gateway = gateway
            .set("mqtt.brokerUrl", format!("mqtts://127.0.0.1:{tls_port}"))
            .set(
                "mqtt.tls",
                serde_json::json!({
                    "caFile": certs.path("ca.pem"),
                    "certFile": certs.path("client.pem"),
                    "keyFile": certs.path("client.key"),
                }),
            );
    }
    let mut engine = Engine::start(&dir, &gateway.yaml());
    let before = wait_complete(&subscriber, (5, 0), Duration::from_secs(20)).await;

    // Out until some seconds of reports wait in the WAL (40 a second).
    broker.stop();
    let during = until_wal(http, "a backlog in the WAL", |records| records > 100).await;
    engine.assert_running();
    assert_eq!(during["broker"]["connected"], false, "{during}");
    broker.restart();

    // Everything polled during the outage arrives: each device gets far beyond
    // where it was, with nothing missing.
    let target = before.values().max().copied().unwrap_or(0) + 60;
    wait_complete(&subscriber, (target, 0), Duration::from_secs(60)).await;
    let after = health(http).await;
    assert_eq!(after["wal"]["droppedOldest"], 0, "{after}");
    assert_eq!(after["wal"]["droppedNewest"], 0, "{after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_the_outage_and_during_the_replay_loses_nothing() {
    let (_sim, modbus) = simulator(200, Duration::ZERO).await;
    let mut broker = Mosquitto::start();
    let subscriber = Subscriber::connect_persistent(broker.port()).await;
    let http = free_port();
    let dir = scratch_dir("kill");
    let text = config(broker.port(), http, modbus.local_addr().port(), 4, 100).yaml();
    let mut engine = Engine::start(&dir, &text);
    wait_complete(&subscriber, (3, 0), Duration::from_secs(20)).await;

    broker.stop();
    let killed_at = until_wal(http, "a backlog before the kill", |records| records >= 40).await;
    engine.kill();
    let mut engine = Engine::start(&dir, &text);
    // The restarted engine keeps the backlog and adds to it.
    let kept = killed_at["wal"]["records"].as_u64().unwrap_or(0);
    until_wal(http, "a backlog after the restart", |records| {
        records >= kept + 40
    })
    .await;
    engine.assert_running();
    broker.restart();

    // Kill again as soon as the replay is under way.
    let replaying = device_messages(&subscriber);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while device_messages(&subscriber) < replaying + 20 {
        assert!(
            std::time::Instant::now() < deadline,
            "the replay never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    engine.kill();
    let _engine = Engine::start(&dir, &text);
    wait_complete(&subscriber, (90, 2), Duration::from_secs(60)).await;
}

async fn fill_quota(policy: &str) -> (BTreeMap<String, Vec<u64>>, Value, Peer) {
    let (_sim, modbus) = simulator(200, Duration::ZERO).await;
    let mut broker = Mosquitto::start();
    let subscriber = Subscriber::connect_persistent(broker.port()).await;
    let http = free_port();
    let dir = scratch_dir("quota");
    // 100 tags per report (~6 KB): the 1 MB quota holds about 170 reports.
    let config = config(broker.port(), http, modbus.local_addr().port(), 100, 50)
        .set("wal.totalQuotaMb", 1)
        .set("wal.maxFileSizeMb", 1)
        .set("wal.overflowPolicy", policy);
    let mut engine = Engine::start(&dir, &config.yaml());
    wait_complete(&subscriber, (2, 0), Duration::from_secs(20)).await;
    broker.stop();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let full = loop {
        let state = health(http).await;
        let dropped = state["wal"]["droppedOldest"].as_u64().unwrap_or(0)
            + state["wal"]["droppedNewest"].as_u64().unwrap_or(0);
        if dropped > 30 {
            break state;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the quota never filled: {state}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        full["wal"]["bytes"].as_u64().expect("bytes") <= 1 << 20,
        "the quota holds: {full}"
    );
    let metrics = Engine::http_get(http, "/metrics", None)
        .await
        .expect("metrics");
    assert!(metrics.contains("sluice_wal_dropped_"), "{metrics}");
    broker.restart();
    until_wal(http, "the backlog replayed", |records| records == 0).await;
    engine.assert_running();
    // A device's reports go out in order: once one made after the replay has
    // reached the subscriber, so has the device's whole backlog.
    let replayed_at = sluice::clock::now_ms();
    let devices: Vec<String> = seqs(&subscriber.messages()).into_keys().collect();
    subscriber
        .wait_until(
            Duration::from_secs(20),
            "a fresh report of every device",
            |m| {
                devices.iter().all(|device| {
                    m.iter().any(|m| {
                        m.topic.ends_with("/property/post") && {
                            let report = m.json();
                            report["deviceNum"] == device.as_str()
                                && report["timestamp"]
                                    .as_i64()
                                    .is_some_and(|t| t > replayed_at)
                        }
                    })
                })
            },
        )
        .await;
    (seqs(&subscriber.messages()), full, broker)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_quota_drop_newest_keeps_the_oldest_reports() {
    let (per_device, state, _broker) = fill_quota("DROP_NEWEST").await;
    assert!(
        state["wal"]["droppedNewest"].as_u64().expect("count") > 0,
        "{state}"
    );
    assert_eq!(state["wal"]["droppedOldest"], 0);
    for (device, seqs) in per_device {
        let set: BTreeSet<u64> = seqs.into_iter().collect();
        // The first reports of the outage are kept: the gap comes after them.
        let first_gap = (1..).find(|s| !set.contains(s)).expect("a gap");
        assert!(
            first_gap > 20,
            "{device}: the oldest reports were kept, gap at {first_gap}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_quota_drop_oldest_keeps_the_newest_reports() {
    let (per_device, state, _broker) = fill_quota("DROP_OLDEST").await;
    assert!(
        state["wal"]["droppedOldest"].as_u64().expect("count") > 0,
        "{state}"
    );
    assert_eq!(state["wal"]["droppedNewest"], 0);
    for (device, seqs) in per_device {
        let set: BTreeSet<u64> = seqs.iter().copied().collect();
        let max = *set.last().expect("reports");
        // The newest reports are all there; the gap is early in the outage.
        let missing: Vec<u64> = (1..=max).filter(|s| !set.contains(s)).collect();
        assert!(!missing.is_empty(), "{device}: something was dropped");
        assert!(
            missing.iter().all(|s| *s < max - 20),
            "{device}: newest kept, missing {missing:?} of {max}"
        );
    }
}

fn database(dir: &Path) -> PathBuf {
    dir.join("data").join("sluice.redb")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_wal_file_is_detected_and_never_crashes_the_engine() {
    let (_sim, modbus) = simulator(200, Duration::ZERO).await;
    let mut broker = Mosquitto::start();
    let http = free_port();
    let dir = scratch_dir("damaged");
    let text = config(broker.port(), http, modbus.local_addr().port(), 4, 100).yaml();
    let mut engine = Engine::start(&dir, &text);
    // Build a backlog while the broker is away, then stop the engine (a loaded
    // machine may take seconds to start it, so wait for records, not a time).
    broker.stop();
    let path = database(&dir);
    let backlog = |path: &Path| std::fs::metadata(path).is_ok_and(|m| m.len() > 8192);
    for _ in 0..300 {
        if backlog(&path) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    engine.kill();
    let mut bytes = std::fs::read(&path).expect("database file");
    assert!(
        bytes.len() > 8192,
        "a WAL with records: {} bytes",
        bytes.len()
    );
    // Scribble over everything past the first page: whatever the file's
    // layout, the tables and the WAL's records are in what is scribbled over.
    for (i, byte) in bytes[4096..].iter_mut().enumerate() {
        *byte = (i as u8).wrapping_mul(31) ^ 0x5A;
    }
    std::fs::write(&path, &bytes).expect("damage the file");
    broker.restart();
    let subscriber = Subscriber::connect(broker.port()).await;
    let mut engine = Engine::start(&dir, &text);
    // The engine comes up (the damaged file set aside, or its damaged records
    // skipped), keeps polling and publishing, and says what happened.
    subscriber
        .wait_until(Duration::from_secs(30), "reports after the damage", |m| {
            m.iter()
                .filter(|m| m.topic.ends_with("/property/post"))
                .count()
                >= 10
        })
        .await;
    engine.assert_running();
    let log = engine.log();
    assert!(
        log.contains("damaged") || log.contains("set aside"),
        "the damage is reported in the log:\n{log}"
    );
}
