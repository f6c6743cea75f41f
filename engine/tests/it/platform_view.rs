//! What a platform reading the broker sees across stops, crashes and
//! restarts (STATE-7 of `docs/state.md`, WAL-10 of `docs/wal.md`), against
//! real Mosquitto: every device's retained status says `offline` after a
//! clean stop; after a SIGKILL the collector's own status goes `offline` by
//! its will and every device's status names that collector; a restart says
//! each state again before its first report; `seq` goes on without a gap
//! after a clean stop, and after a crash the first report announces what was
//! skipped, so that every number was either received or announced.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::config::{Device, Gateway, Tag};
use crate::support::engine::{Engine, scratch_dir};
use crate::support::mqtt::{Message, Subscriber};
use crate::support::peers::Mosquitto;

const CLIENT: &str = "gw-view";
const DEVICES: [&str; 3] = ["d1", "d2", "d3"];
const KEEP_ALIVE_SEC: u64 = 4;

fn gateway(mqtt: u16, modbus: u16) -> String {
    let mut gateway = Gateway::new(CLIENT, mqtt).set("mqtt.keepAliveSec", KEEP_ALIVE_SEC);
    for device in DEVICES {
        gateway = gateway
            .device(Device::modbus(device, modbus).tag(Tag::new("t", "40001", "UINT16", 100)));
    }
    gateway.yaml()
}

fn status_topic(device: &str) -> String {
    format!("P/{device}/status/post")
}

fn report_topic(device: &str) -> String {
    format!("P/{device}/property/post")
}

/// One device's report numbers, in arrival order, and the ranges its reports
/// announced as skipped.
type Numbers = (Vec<u64>, BTreeSet<(u64, u64)>);

/// [`Numbers`] per device.
fn numbers(messages: &[Message]) -> BTreeMap<String, Numbers> {
    let mut out: BTreeMap<String, Numbers> = BTreeMap::new();
    for device in DEVICES {
        let entry = out.entry(device.to_owned()).or_default();
        for message in messages.iter().filter(|m| m.topic == report_topic(device)) {
            let report = message.json();
            entry.0.push(report["seq"].as_u64().expect("seq"));
            if let Some(skipped) = report.get("skipped") {
                let range = (
                    skipped["from"].as_u64().expect("from"),
                    skipped["to"].as_u64().expect("to"),
                );
                entry.1.insert(range);
            }
        }
    }
    out
}

/// Index of the first message on `topic` from `from` on.
fn first_on(messages: &[Message], from: usize, topic: &str) -> Option<usize> {
    messages
        .iter()
        .enumerate()
        .skip(from)
        .find(|(_, m)| m.topic == topic)
        .map(|(i, _)| i)
}

/// The highest number each device reported in `messages`.
fn highest(messages: &[Message]) -> BTreeMap<String, u64> {
    numbers(messages)
        .into_iter()
        .map(|(device, (seen, _))| (device, seen.into_iter().max().unwrap_or(0)))
        .collect()
}

/// Waits until every device has `more` reports numbered above `above` (what
/// the log still held goes out again first, at least once: WAL-3).
async fn new_reports(
    subscriber: &Subscriber,
    above: &BTreeMap<String, u64>,
    more: usize,
    what: &str,
) -> Vec<Message> {
    subscriber
        .wait_until(Duration::from_secs(20), what, |messages| {
            DEVICES
                .iter()
                .all(|d| new_ones(messages, d, above).len() >= more)
        })
        .await
}

/// `device`'s reports numbered above `above`, in arrival order.
fn new_ones(messages: &[Message], device: &str, above: &BTreeMap<String, u64>) -> Vec<Value> {
    let floor = above.get(device).copied().unwrap_or(0);
    messages
        .iter()
        .filter(|m| m.topic == report_topic(device))
        .map(Message::json)
        .filter(|r| r["seq"].as_u64().is_some_and(|seq| seq > floor))
        .collect()
}

/// The first report of `device`'s new run (from message `from` on): its
/// restated status went out before any of its reports.
fn first_of_run(
    messages: &[Message],
    from: usize,
    device: &str,
    above: &BTreeMap<String, u64>,
) -> Value {
    let status = first_on(messages, from, &status_topic(device)).expect("restated");
    let report = first_on(messages, from, &report_topic(device)).expect("a report");
    assert!(
        status < report,
        "{device}: the status goes out before the first report"
    );
    new_ones(&messages[from..], device, above)
        .into_iter()
        .next()
        .expect("a report of the new run")
}

/// The retained statuses a platform connecting now would read, by topic.
async fn retained_now(port: u16) -> BTreeMap<String, Value> {
    let reader = Subscriber::connect(port).await;
    let wanted: Vec<String> = DEVICES
        .iter()
        .map(|d| status_topic(d))
        .chain([format!("collector/{CLIENT}/status/post")])
        .collect();
    let messages = reader
        .wait_until(Duration::from_secs(10), "the retained statuses", |m| {
            wanted
                .iter()
                .all(|t| m.iter().any(|x| x.retain && &x.topic == t))
        })
        .await;
    messages
        .into_iter()
        .filter(|m| m.retain && wanted.contains(&m.topic))
        .map(|m| (m.topic.clone(), m.json()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_stay_true_and_seq_gaps_are_announced_across_stops_and_crashes() {
    let (sim, handle) = crate::support::sim::simulator(10, Duration::ZERO).await;
    sim.set_holding(0, &[7]);
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect(broker.port()).await;
    let dir = scratch_dir("platform-view");
    let config = gateway(broker.port(), handle.local_addr().port());

    let mut engine = Engine::start(&dir, &config);
    let first = new_reports(&subscriber, &BTreeMap::new(), 5, "reports of the first run").await;
    for device in DEVICES {
        let said = first.iter().rev().find(|m| m.topic == status_topic(device));
        let said = said.expect("a status").json();
        assert_eq!(said["status"], "online", "{said}");
        assert_eq!(said["collector"], CLIENT, "statuses name their collector");
    }

    // A clean stop says every device offline before it disconnects.
    engine.terminate();
    let retained = retained_now(broker.port()).await;
    for device in DEVICES {
        let said = &retained[&status_topic(device)];
        assert_eq!(said["status"], "offline", "{device}: {said}");
        assert_eq!(said["collector"], CLIENT);
    }
    let own = &retained[&format!("collector/{CLIENT}/status/post")];
    assert_eq!(own["status"], "offline");
    assert!(engine.log().contains("sent the offline statuses"));

    // A restart says each state again before its first report, and numbers
    // on without a gap.
    let restart = subscriber.messages().len();
    let before = highest(&subscriber.messages());
    let mut engine = Engine::start(&dir, &config);
    let second = new_reports(&subscriber, &before, 5, "reports after the clean restart").await;
    for device in DEVICES {
        let first_after = first_of_run(&second, restart, device, &before);
        assert_eq!(
            first_after["seq"].as_u64(),
            Some(before[device] + 1),
            "{device}: a clean restart numbers on: {first_after}"
        );
        assert!(first_after.get("skipped").is_none(), "{first_after}");
    }

    // A crash: the broker says the collector is gone (its will) within one
    // and a half keep-alives, and every device's status names that collector.
    let killed = Instant::now();
    engine.kill();
    let will = subscriber
        .wait_until(Duration::from_secs(3 * KEEP_ALIVE_SEC), "the will", |m| {
            m.iter().skip(restart).any(|x| {
                x.topic == format!("collector/{CLIENT}/status/post")
                    && x.json()["status"] == "offline"
            })
        })
        .await;
    assert!(
        killed.elapsed() <= Duration::from_millis(1500 * KEEP_ALIVE_SEC),
        "the will came {:?} after the crash",
        killed.elapsed()
    );
    drop(will);
    let retained = retained_now(broker.port()).await;
    for device in DEVICES {
        assert_eq!(retained[&status_topic(device)]["collector"], CLIENT);
    }

    // After the crash, the first report of each device announces what the
    // crash skipped, and every number is either received or announced. (What
    // the log still held goes out again first, at least once: WAL-3.)
    let crash = subscriber.messages().len();
    let before = highest(&subscriber.messages());
    let _engine = Engine::start(&dir, &config);
    let third = new_reports(&subscriber, &before, 5, "reports after the crash").await;
    let all = numbers(&third);
    for device in DEVICES {
        let new = first_of_run(&third, crash, device, &before);
        assert!(new.get("skipped").is_some(), "{device}: {new}");
        let (seen, skipped) = &all[device];
        let seen: BTreeSet<u64> = seen.iter().copied().collect();
        let max = *seen.last().expect("numbers");
        let unexplained: Vec<u64> = (1..=max)
            .filter(|n| !seen.contains(n))
            .filter(|n| !skipped.iter().any(|(from, to)| from <= n && n <= to))
            .collect();
        assert!(
            unexplained.is_empty(),
            "{device}: numbers neither received nor announced: {unexplained:?} (announced {skipped:?})"
        );
    }
}
