//! Sparkplug B on the uplink, read by an independent implementation (Eclipse
//! Tahu's JavaScript `sparkplug-payload`) against a running engine with a
//! pymodbus device and Mosquitto: births before data, aliases and datatypes
//! consistent, seq wrapping at 256, a DDEATH for a dead device, rebirth on an
//! NCMD, DCMD writes by name and by alias read back on the peer, NDEATH through
//! the will when the connection is cut, historical data after it, NDEATH on
//! SIGKILL with the bdSeq of the NBIRTH, which a restart carries on from, and
//! NDEATH on a clean stop.

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::config::{Device, Gateway, Tag};
use crate::support::engine::{Engine, scratch_dir};
use crate::support::mqtt::{Message, Subscriber};
use crate::support::peers::{Mosquitto, PyModbus, free_port, project_root};
use crate::support::proxy::{Carries, Mode, Proxy};
use serde_json::{Value, json};

const GROUP: &str = "plant";
const NODE: &str = "edge-1";

fn topic(kind: &str, device: Option<&str>) -> String {
    match device {
        Some(device) => format!("spBv1.0/{GROUP}/{kind}/{NODE}/{device}"),
        None => format!("spBv1.0/{GROUP}/{kind}/{NODE}"),
    }
}

fn config(modbus: u16, mqtt: u16, nobody: u16) -> String {
    let meter = Device::modbus("meter", modbus)
        .channel("readTimeoutMs", 300)
        .tag(Tag::new("temp", "40001", "INT16", 20))
        .tag(
            Tag::new("setpoint", "40002", "UINT16", 20)
                .set("access", "RW")
                .set("readback", true)
                .set("min", 0)
                .set("max", 500),
        )
        .tag(Tag::new("level", "40003", "UINT16", 20).set("factor", 0.1));
    let dead = Device::modbus("dead", nobody)
        .channel("readTimeoutMs", 200)
        .tag(Tag::new("door", "40001", "UINT16", 200));
    Gateway::new(&format!("sparkplug-{mqtt}"), mqtt)
        .set("perDeviceTimeoutMs", 500)
        .set("reportMode", "SINGLE")
        .set("mqtt.keepAliveSec", 2)
        .set("mqtt.payload", "sparkplug-b")
        .set(
            "mqtt.sparkplug",
            json!({ "groupId": GROUP, "edgeNodeId": NODE }),
        )
        .set("downlink.trustedBroker", true)
        .set("lease.scanIntervalMs", 200)
        .device(meter)
        .device(dead)
        .yaml()
}

/// Runs Tahu's codec (`tests/peers/sparkplug_codec.js`) over `lines`.
fn tahu(mode: &str, lines: &[String]) -> Vec<String> {
    let root = project_root();
    let mut child = Command::new("node")
        .arg(root.join("tests/peers/sparkplug_codec.js"))
        .arg(mode)
        .env("NODE_PATH", root.join(".peers/node/node_modules"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs (scripts/setup-peers.sh installs it)");
    let mut stdin = child.stdin.take().expect("stdin");
    for line in lines {
        writeln!(stdin, "{line}").expect("write to node");
    }
    drop(stdin);
    let output = child.wait_with_output().expect("node finishes");
    assert!(
        output.status.success(),
        "Tahu's codec failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("utf-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

/// A message of the edge node, decoded by Tahu.
#[derive(Debug, Clone)]
struct Decoded {
    topic: String,
    kind: String,
    device: Option<String>,
    payload: Value,
}

impl Decoded {
    fn seq(&self) -> Option<u64> {
        self.payload["seq"].as_u64()
    }

    fn metric(&self, name: &str) -> &Value {
        self.metrics()
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("no metric `{name}` in {}", self.payload))
    }

    fn metrics(&self) -> &[Value] {
        self.payload["metrics"]
            .as_array()
            .map_or(&[], Vec::as_slice)
    }
}

/// The node's messages among `messages` (its own and what the broker sends
/// for it), decoded, in arrival order; commands to it left out.
fn decoded(messages: &[Message]) -> Vec<Decoded> {
    let ours: Vec<&Message> = messages
        .iter()
        .filter(|m| m.topic.starts_with(&format!("spBv1.0/{GROUP}/")))
        .filter(|m| !m.topic.contains("CMD/"))
        .collect();
    let lines: Vec<String> = ours.iter().map(|m| hex(&m.payload)).collect();
    tahu("decode", &lines)
        .into_iter()
        .zip(ours)
        .map(|(json, message)| {
            let parts: Vec<&str> = message.topic.split('/').collect();
            Decoded {
                topic: message.topic.clone(),
                kind: parts[2].to_owned(),
                device: parts.get(4).map(|d| (*d).to_owned()),
                payload: serde_json::from_str(&json).expect("Tahu's JSON"),
            }
        })
        .collect()
}

/// Checks one session, from its NBIRTH on: seq one counter over the node's
/// messages, wrapping at 256; every DDATA after its device's DBIRTH, by aliases
/// the DBIRTH named, with the same datatypes. Returns the session's bdSeq and
/// the last DBIRTH's metrics of each device by name.
fn check_session(session: &[Decoded]) -> (u64, HashMap<String, HashMap<String, Value>>) {
    let birth = &session[0];
    assert_eq!(birth.kind, "NBIRTH", "a session starts with NBIRTH");
    assert_eq!(birth.seq(), Some(0), "NBIRTH has seq 0");
    let bd_seq = birth.metric("bdSeq")["value"].as_u64().expect("bdSeq");
    assert_eq!(birth.metric("bdSeq")["type"], "Int64");
    assert_eq!(birth.metric("Node Control/Rebirth")["value"], false);
    let mut expected = 0u64;
    let mut births: HashMap<String, HashMap<String, Value>> = HashMap::new();
    let mut aliases: HashMap<String, HashMap<u64, String>> = HashMap::new();
    for message in session.iter().filter(|m| m.kind != "NDEATH") {
        assert_eq!(
            message.seq(),
            Some(expected),
            "seq of {} after {expected}",
            message.topic
        );
        expected = (expected + 1) % 256;
        let device = message.device.clone().unwrap_or_default();
        match message.kind.as_str() {
            "DBIRTH" => {
                let metrics = births.entry(device.clone()).or_default();
                let named = aliases.entry(device).or_default();
                for metric in message.metrics() {
                    let name = metric["name"].as_str().expect("a DBIRTH metric's name");
                    let alias = metric["alias"].as_u64().expect("a DBIRTH metric's alias");
                    metrics.insert(name.to_owned(), metric.clone());
                    named.insert(alias, name.to_owned());
                }
            }
            "DDATA" => {
                let named = aliases
                    .get(&device)
                    .unwrap_or_else(|| panic!("DDATA of `{device}` before its DBIRTH"));
                for metric in message.metrics() {
                    let alias = metric["alias"].as_u64().expect("a DDATA metric's alias");
                    let name = named
                        .get(&alias)
                        .unwrap_or_else(|| panic!("alias {alias} not in `{device}`'s DBIRTH"));
                    assert_eq!(
                        metric["type"], births[&device][name]["type"],
                        "datatype of {name}"
                    );
                }
            }
            "DDEATH" | "NBIRTH" => {}
            other => panic!("unexpected message type {other}"),
        }
    }
    (bd_seq, births)
}

/// The node's sessions: each NBIRTH and what followed it up to the next
/// NBIRTH or NDEATH.
fn sessions(all: &[Decoded]) -> Vec<Vec<Decoded>> {
    let mut sessions: Vec<Vec<Decoded>> = Vec::new();
    let mut open = false;
    for message in all {
        match message.kind.as_str() {
            "NBIRTH" => {
                sessions.push(vec![message.clone()]);
                open = true;
            }
            "NDEATH" => open = false,
            _ if open => sessions
                .last_mut()
                .expect("a session")
                .push(message.clone()),
            _ => {}
        }
    }
    sessions
}

/// The `n`th session (from 0).
fn session(all: &[Decoded], n: usize) -> Vec<Decoded> {
    sessions(all)
        .into_iter()
        .nth(n)
        .unwrap_or_else(|| panic!("no NBIRTH #{n}"))
}

fn historical(message: &Decoded) -> bool {
    message.kind == "DDATA" && message.metrics()[0]["isHistorical"] == true
}

fn live(message: &Decoded) -> bool {
    message.kind == "DDATA" && message.metrics()[0].get("isHistorical").is_none()
}

fn count(messages: &[Message], kind: &str) -> usize {
    let prefix = format!("spBv1.0/{GROUP}/{kind}/{NODE}");
    messages
        .iter()
        .filter(|m| m.topic.starts_with(&prefix))
        .count()
}

/// A host's command, encoded by Tahu.
fn encoded(payload: &Value) -> Vec<u8> {
    unhex(&tahu("encode", &[payload.to_string()])[0])
}

fn written(modbus: &crate::support::peers::Peer, value: u16) -> bool {
    PyModbus::writes(modbus)
        .iter()
        .any(|w| w["address"] == 1 && w["values"] == json!([value]))
}

async fn until(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Does `act`, then waits for the next NDEATH and returns it, decoded.
async fn next_death(host: &Subscriber, what: &str, act: impl FnOnce()) -> Decoded {
    let deaths = count(&host.messages(), "NDEATH");
    act();
    let messages = host
        .wait_until(Duration::from_secs(10), what, |m| {
            count(m, "NDEATH") > deaths
        })
        .await;
    decoded(&messages)
        .into_iter()
        .rfind(|m| m.kind == "NDEATH")
        .expect("NDEATH")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sparkplug_b_sessions_read_by_an_independent_implementation() {
    let modbus = PyModbus::start(&json!({ "hr": { "0": [65531, 100, 250] } }));
    let broker = Mosquitto::start();
    let proxy = Proxy::start(broker.port(), Carries::Bytes).await;
    let host = Subscriber::connect(broker.port()).await;
    let dir = scratch_dir("sparkplug");
    let mut engine = Engine::start(&dir, &config(modbus.port(), proxy.port(), free_port()));

    // Births, then data; seq wraps; the dead device has its DDEATH.
    let messages = host
        .wait_until(
            Duration::from_secs(20),
            "300 data messages and a DDEATH",
            |m| count(m, "DDATA") >= 300 && count(m, "DDEATH") >= 1,
        )
        .await;
    let all = decoded(&messages);
    let first = session(&all, 0);
    let (bd_seq, births) = check_session(&first);
    assert!(
        first
            .windows(2)
            .any(|w| w[0].seq() == Some(255) && w[1].seq() == Some(0)),
        "seq wraps from 255 to 0"
    );
    let meter = &births["meter"];
    assert_eq!(meter["temp"]["type"], "Int16");
    assert_eq!(meter["setpoint"]["type"], "UInt16");
    assert_eq!(meter["level"]["type"], "Double");
    let dead = first
        .iter()
        .position(|m| m.kind == "DDEATH" && m.device.as_deref() == Some("dead"))
        .expect("a DDEATH of the dead device");
    let dead_birth = first[..dead]
        .iter()
        .find(|m| m.kind == "DBIRTH" && m.device.as_deref() == Some("dead"))
        .expect("its DBIRTH came first");
    let door = dead_birth.metric("door");
    assert_eq!(door["value"], Value::Null, "never read: {door}");
    assert_eq!(
        door["properties"]["Quality"],
        json!({ "type": "Int32", "value": 0 }),
        "a BAD value's quality: {door}"
    );
    let values: HashMap<String, Value> = first
        .iter()
        .filter(|m| m.kind == "DDATA" && m.device.as_deref() == Some("meter"))
        .flat_map(|m| m.metrics().to_vec())
        .map(|metric| {
            let alias = metric["alias"].as_u64().expect("alias");
            let name = meter
                .iter()
                .find(|(_, b)| b["alias"].as_u64() == Some(alias))
                .map(|(name, _)| name.clone())
                .expect("a known alias");
            (name, metric["value"].clone())
        })
        .collect();
    assert_eq!(values["temp"], json!(-5), "a negative INT16");
    assert_eq!(values["setpoint"], json!(100));
    assert_eq!(values["level"].as_f64(), Some(25.0), "scaled, a Double");

    // Rebirth on request: NBIRTH again with seq 0 and the same bdSeq.
    let rebirth = encoded(&json!({
        "timestamp": 1,
        "metrics": [{ "name": "Node Control/Rebirth", "type": "Boolean", "value": true }]
    }));
    host.publish_bytes(&topic("NCMD", None), rebirth).await;
    let messages = host
        .wait_until(
            Duration::from_secs(10),
            "a second NBIRTH and a DBIRTH",
            |m| count(m, "NBIRTH") >= 2 && count(m, "DBIRTH") >= 4,
        )
        .await;
    let reborn = session(&decoded(&messages), 1);
    let (again, _) = check_session(&reborn);
    assert_eq!(again, bd_seq, "a rebirth keeps its bdSeq");

    // DCMD writes, by name and by alias, go to the device.
    let by_name = encoded(&json!({
        "timestamp": 1_000,
        "metrics": [{ "name": "setpoint", "type": "UInt16", "value": 321 }]
    }));
    host.publish_bytes(&topic("DCMD", Some("meter")), by_name)
        .await;
    until("the write by name", || written(&modbus, 321)).await;
    let alias = meter["setpoint"]["alias"].as_u64().expect("alias");
    let by_alias = encoded(&json!({
        "timestamp": 2_000,
        "metrics": [{ "alias": alias, "type": "UInt16", "value": 222 }]
    }));
    host.publish_bytes(&topic("DCMD", Some("meter")), by_alias)
        .await;
    until("the write by alias", || written(&modbus, 222)).await;
    let refused = encoded(&json!({
        "timestamp": 3_000,
        "metrics": [{ "name": "setpoint", "type": "UInt16", "value": 9_999 }]
    }));
    host.publish_bytes(&topic("DCMD", Some("meter")), refused)
        .await;
    until("the refusal logged", || {
        engine.log().contains("a DCMD metric refused")
    })
    .await;
    assert!(
        !written(&modbus, 9_999),
        "a value beyond the tag's range is refused"
    );

    // The connection cut: the broker publishes the will; data made meanwhile
    // comes after the next births, marked historical.
    let will = next_death(&host, "the NDEATH will", || proxy.set(Mode::Cut)).await;
    assert_eq!(will.metric("bdSeq")["value"].as_u64(), Some(bd_seq));
    assert_eq!(will.seq(), None, "NDEATH has no seq");
    tokio::time::sleep(Duration::from_millis(800)).await;
    proxy.set(Mode::Pass);
    let messages = host
        .wait_until(Duration::from_secs(20), "data after the outage", |m| {
            sessions(&decoded(m))
                .get(2)
                .is_some_and(|after| after.iter().any(historical) && after.iter().any(live))
        })
        .await;
    let after = session(&decoded(&messages), 2);
    let (next, _) = check_session(&after);
    assert_ne!(next, bd_seq, "a new connection has a new bdSeq");
    let last_historical = after.iter().rposition(historical).expect("historical data");
    let first_live = after.iter().position(live).expect("live data");
    assert!(last_historical < first_live, "the backlog goes out first");

    // SIGKILL: the will carries the bdSeq of the last NBIRTH; a restart goes on
    // from it.
    let will = next_death(&host, "the NDEATH after SIGKILL", || engine.kill()).await;
    assert_eq!(will.metric("bdSeq")["value"].as_u64(), Some(next));
    let mut engine = Engine::start(&dir, &config(modbus.port(), proxy.port(), free_port()));
    let messages = host
        .wait_until(
            Duration::from_secs(15),
            "the NBIRTH after the restart",
            |m| count(m, "NBIRTH") >= 4,
        )
        .await;
    let restarted = session(&decoded(&messages), 3);
    let last = (next + 1) % 256;
    assert_eq!(
        restarted[0].metric("bdSeq")["value"].as_u64(),
        Some(last),
        "the restart carries bdSeq on"
    );

    // A clean stop publishes the NDEATH itself (the DISCONNECT voids the will).
    let pid = engine.pid().to_string();
    let death = next_death(&host, "the NDEATH of a clean stop", || {
        let stopped = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        assert!(stopped.success());
    })
    .await;
    assert_eq!(death.metric("bdSeq")["value"].as_u64(), Some(last));
    assert!(
        engine.log().contains("sent the NDEATH"),
        "the engine published it, not the broker"
    );
    engine.kill();
}
