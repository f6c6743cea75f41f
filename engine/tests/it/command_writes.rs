//! Downlink commands written to a pymodbus device by a running engine: every
//! data type and byte order written and read back, a device's refusal (not
//! retried), request ids, the MQTT downlink and its replies, and outside nodes
//! claiming and reporting over HTTP.

use std::time::Duration;

use crate::support::config::{Device, Gateway, Tag};
use crate::support::engine::{Engine, scratch_dir};
use crate::support::mqtt::{OPERATOR_KEY, Subscriber, write_operator_key};
use crate::support::peers::{Mosquitto, Peer, PyModbus, free_port};
use serde_json::{Value, json};

const ADMIN: &str = "admin-token";
const NODE: &str = "node-token";
/// The token of the second outside node, `iot-b`.
const NODE_B: &str = "node-token-b";

/// (key, dataType, byteOrder, registers, value to write, more keys of the tag;
/// numbers as JSON)
type Written = (
    &'static str,
    &'static str,
    &'static str,
    u16,
    &'static str,
    &'static [(&'static str, &'static str)],
);
const TAGS: &[Written] = &[
    ("u16", "UINT16", "ABCD", 1, "65000", &[]),
    ("i16", "INT16", "BADC", 1, "-300", &[]),
    ("u32_abcd", "UINT32", "ABCD", 2, "4000000000", &[]),
    ("i32_badc", "INT32", "BADC", 2, "-70000", &[]),
    ("i32_cdab", "INT32", "CDAB", 2, "-70000", &[]),
    ("u32_dcba", "UINT32", "DCBA", 2, "305419896", &[]),
    ("f32_abcd", "FLOAT32", "ABCD", 2, "12.5", &[]),
    ("f32_badc", "FLOAT32", "BADC", 2, "-0.75", &[]),
    ("f32_cdab", "FLOAT32", "CDAB", 2, "3.25", &[]),
    ("f32_dcba", "FLOAT32", "DCBA", 2, "1024.5", &[]),
    ("f64", "FLOAT64", "ABCD", 4, "1234.5678", &[]),
    ("i64_dcba", "INT64", "DCBA", 4, "-123456789012", &[]),
    ("bcd16", "BCD16", "ABCD", 1, "1234", &[]),
    ("scaled", "INT16", "ABCD", 1, "12.3", &[("factor", "0.1")]),
    (
        "offset",
        "UINT16",
        "ABCD",
        1,
        "-20",
        &[("factor", "0.5"), ("offset", "-50")],
    ),
];

/// A tag of the PLC, written and read back.
fn writable(key: &str, address: &str, data_type: &str, period_ms: u64) -> Tag {
    Tag::new(key, address, data_type, period_ms)
        .set("access", "RW")
        .set("readback", true)
}

fn config(modbus: u16, mqtt: u16, http: u16, execute_own: bool) -> (String, usize) {
    let mut plc = Device::modbus("plc", modbus)
        .set("deviceNum", "PLC1")
        .channel("readTimeoutMs", 500);
    let mut address = 40001u32;
    for (key, data_type, order, registers, _, extra) in TAGS {
        let tag = writable(key, &address.to_string(), data_type, 1000).set("byteOrder", *order);
        plc = plc.tag(extra.iter().fold(tag, |tag, (k, v)| tag.set(k, number(v))));
        address += u32::from(*registers);
    }
    let registers = (address - 40001) as usize;
    let plc = plc
        .tag(writable("coil", "00001", "BOOL", 1000))
        .tag(Tag::new("missing", "40900", "INT16", 0).set("access", "W"))
        .tag(
            Tag::new("limited", &address.to_string(), "UINT16", 1000)
                .set("access", "RW")
                .set("min", 0)
                .set("max", 100),
        )
        .tag(Tag::new("readonly", "40001", "UINT16", 1000))
        .tag(Tag::new("bit3", "40001.3", "BOOL", 0).set("access", "W"));
    let text = Gateway::new(&format!("writes-{http}"), mqtt)
        .http(http, ADMIN)
        .set(
            "http.nodeTokens",
            json!([
                { "nodeId": "iot-a", "token": NODE },
                { "nodeId": "iot-b", "token": NODE_B },
            ]),
        )
        .operator_key()
        .set("perDeviceTimeoutMs", 1000)
        .set("backoff", json!({ "baseMs": 100, "maxMs": 300 }))
        .set("commands.executeOwn", execute_own)
        .device(plc)
        .yaml();
    (text, registers + 1)
}

async fn call(
    http: u16,
    method: &str,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    Engine::request(http, method, path, Some(token), body.as_ref()).await
}

fn number(text: &str) -> Value {
    serde_json::from_str(text).expect("a number")
}

struct Rig {
    _modbus: Peer,
    _broker: Peer,
    subscriber: Subscriber,
    _engine: Engine,
    http: u16,
}

async fn rig(name: &str, execute_own: bool) -> Rig {
    let http = free_port();
    let broker = Mosquitto::start();
    let (probe, registers) = config(0, 0, 0, execute_own);
    drop(probe);
    let modbus =
        PyModbus::start(&json!({ "hr": { "0": vec![0; registers] }, "co": { "0": [0, 0] } }));
    let subscriber = Subscriber::connect(broker.port()).await;
    let (text, _) = config(modbus.port(), broker.port(), http, execute_own);
    let dir = scratch_dir(name);
    write_operator_key(&dir);
    let engine = Engine::start(&dir, &text);
    Rig {
        _modbus: modbus,
        _broker: broker,
        subscriber,
        _engine: engine,
        http,
    }
}

async fn create(http: u16, body: Value) -> (u16, Value) {
    call(http, "POST", "/commands", ADMIN, Some(body)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_type_and_byte_order_is_written_and_read_back() {
    let rig = rig("writes", true).await;
    let http = rig.http;
    let mut ids = Vec::new();
    for (key, _, _, _, value, _) in TAGS {
        let body = json!({ "deviceId": "plc", "key": key, "value": number(value), "requestId": format!("w-{key}") });
        let (status, command) = create(http, body).await;
        assert_eq!(status, 201, "{key}: {command}");
        ids.push((*key, number(value), command["id"].as_u64().expect("id")));
    }
    let (_, coil) = create(
        http,
        json!({ "deviceId": "plc", "key": "coil", "value": true }),
    )
    .await;
    ids.push(("coil", json!(true), coil["id"].as_u64().expect("id")));
    for (key, value, id) in &ids {
        let command = Engine::final_command(http, *id).await;
        assert_eq!(
            (command["status"].as_str(), command["resultCode"].as_u64()),
            (Some("ACKED"), Some(0)),
            "{key}: {command}"
        );
        let write = &command["write"];
        assert_eq!(write["status"], "WRITTEN", "{key}: {write}");
        assert_eq!(write["attempts"], 1, "{key}");
        let after = &write["after"];
        let close = match (after.as_f64(), value.as_f64()) {
            (Some(a), Some(b)) => (a - b).abs() <= b.abs() * 1e-6 + 1e-9,
            _ => after == value,
        };
        assert!(close, "{key}: read back {after}, wrote {value}");
    }

    // The device refuses a write to an address it does not have: no retry.
    let (_, refused) = create(
        http,
        json!({ "deviceId": "plc", "key": "missing", "value": 5 }),
    )
    .await;
    let refused = Engine::final_command(http, refused["id"].as_u64().expect("id")).await;
    assert_eq!(refused["status"], "FAILED", "{refused}");
    assert_eq!(
        (refused["result"].as_str(), refused["resultCode"].as_u64()),
        (Some("ACKED"), Some(3))
    );
    assert_eq!(
        refused["rawResultCode"], 2,
        "Modbus exception 2, kept as given"
    );
    assert_eq!(
        (
            refused["write"]["status"].as_str(),
            refused["write"]["attempts"].as_u64()
        ),
        (Some("REFUSED"), Some(1))
    );

    // A value the codec cannot write: refused, named by the tag's key (the
    // engine adds it: codecs keep no keys).
    let (_, bit) = create(
        http,
        json!({ "deviceId": "plc", "key": "bit3", "value": true }),
    )
    .await;
    let bit = Engine::final_command(http, bit["id"].as_u64().expect("id")).await;
    assert_eq!(
        (bit["status"].as_str(), bit["write"]["status"].as_str()),
        (Some("FAILED"), Some("REFUSED")),
        "{bit}"
    );
    assert_eq!(
        bit["write"]["message"],
        "tag `bit3`: writing one bit of a register is not supported: write the whole register"
    );

    // Values the tag cannot take are refused before anything is sent.
    for (body, what) in [
        (
            json!({ "deviceId": "plc", "key": "limited", "value": 150 }),
            "above the maximum",
        ),
        (
            json!({ "deviceId": "plc", "key": "readonly", "value": 1 }),
            "read-only",
        ),
        (
            json!({ "deviceId": "plc", "key": "u16", "value": "abc" }),
            "write a number",
        ),
        (
            json!({ "deviceId": "plc", "key": "u16", "value": 70000 }),
            "does not fit",
        ),
        (
            json!({ "deviceId": "plc", "key": "scaled", "value": 12.34 }),
            "not on the scale",
        ),
        (
            json!({ "deviceId": "plc", "key": "nope", "value": 1 }),
            "no tag",
        ),
    ] {
        let (status, answer) = create(http, body).await;
        assert_eq!(status, 400, "{answer}");
        assert!(
            answer["error"].as_str().unwrap_or("").contains(what),
            "{what}: {answer}"
        );
    }
    let (status, _) = create(
        http,
        json!({ "deviceId": "ghost", "key": "u16", "value": 1 }),
    )
    .await;
    assert_eq!(status, 404);

    // A repeated request id is the same command: not written twice.
    let u16_id = ids[0].2;
    let history = Engine::final_command(http, u16_id).await["history"]
        .as_array()
        .map(Vec::len);
    let (status, again) = create(
        http,
        json!({ "deviceId": "plc", "key": "u16", "value": 1, "requestId": "w-u16" }),
    )
    .await;
    assert_eq!((status, again["id"].as_u64()), (200, Some(u16_id)));
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        Engine::final_command(http, u16_id).await["history"]
            .as_array()
            .map(Vec::len),
        history
    );

    // Polling reports the written values.
    rig.subscriber
        .wait_until(
            Duration::from_secs(10),
            "a report with the written values",
            |m| {
                m.iter().any(|m| {
                    m.topic == "P/PLC1/property/post"
                        && m.json()["values"].as_array().is_some_and(|values| {
                            values
                                .iter()
                                .any(|v| v["key"] == "f32_dcba" && v["value"] == 1024.5)
                        })
                })
            },
        )
        .await;

    // The MQTT downlink creates commands; the outcome comes back on the reply topic.
    rig.subscriber
        .publish_signed(
            "P/PLC1/property/set",
            &json!({ "requestId": "mq-1", "key": "u16", "value": 42 }),
            OPERATOR_KEY,
        )
        .await;
    rig.subscriber
        .publish_signed(
            "P/PLC1/function/invoke",
            &json!({ "requestId": "mq-2", "key": "nope", "value": 1 }),
            OPERATOR_KEY,
        )
        .await;
    // Every outcome is replied, HTTP commands' too: pick the two by request id.
    let for_request = |m: &crate::support::mqtt::Message, id: &str| {
        m.topic.ends_with("/reply") && m.json()["requestId"] == id
    };
    let replies = rig
        .subscriber
        .wait_until(Duration::from_secs(10), "both replies", |m| {
            ["mq-1", "mq-2"]
                .iter()
                .all(|id| m.iter().any(|m| for_request(m, id)))
        })
        .await;
    let reply = |id: &str| {
        let message = replies
            .iter()
            .find(|m| for_request(m, id))
            .expect("a reply");
        (message.topic.clone(), message.json())
    };
    let (topic, done) = reply("mq-1");
    assert_eq!(topic, "P/PLC1/property/set/reply");
    assert_eq!(
        (done["status"].as_str(), done["resultCode"].as_u64()),
        (Some("ACKED"), Some(0))
    );
    let (topic, rejected) = reply("mq-2");
    assert_eq!(topic, "P/PLC1/function/invoke/reply");
    assert_eq!(
        (rejected["status"].as_str(), rejected["resultCode"].as_u64()),
        (Some("REJECTED"), Some(2))
    );
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_nodes_claim_and_report_with_generation_and_node_guards() {
    let rig = rig("nodes", false).await;
    let http = rig.http;
    let (status, command) = create(
        http,
        json!({ "deviceId": "plc", "key": "u16", "value": 7, "realtime": false }),
    )
    .await;
    assert_eq!(status, 201, "{command}");
    let id = command["id"].as_u64().expect("id");
    let claim = json!({ "nodeId": "iot-a", "max": 5 });
    let (status, _) = Engine::request(http, "POST", "/commands/claim", None, Some(&claim)).await;
    assert_eq!(status, 401);
    assert_eq!(
        call(http, "POST", "/commands/claim", ADMIN, Some(claim.clone()))
            .await
            .0,
        401,
        "an admin is not a node"
    );
    let (status, claimed) = call(http, "POST", "/commands/claim", NODE, Some(claim)).await;
    assert_eq!(status, 200, "{claimed}");
    let claimed = &claimed["commands"][0];
    assert_eq!(
        (claimed["id"].as_u64(), claimed["claimGeneration"].as_u64()),
        (Some(id), Some(1))
    );
    assert_eq!(claimed["claimedNodeId"], "iot-a");

    let path = format!("/commands/{id}/receipt");
    let receipt = |node: &str, generation: Option<u64>, result: &str, code: Option<u64>| {
        let mut body = json!({ "nodeId": node, "result": result, "resultCode": code });
        if let Some(generation) = generation {
            body["claimGeneration"] = json!(generation);
        }
        body
    };
    // A node token acts for its own node only, whatever the body says.
    let (status, answer) = call(
        http,
        "POST",
        &path,
        NODE,
        Some(receipt("iot-b", Some(1), "SENT", None)),
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    let (status, answer) = call(
        http,
        "POST",
        &path,
        NODE_B,
        Some(receipt("iot-b", Some(1), "SENT", None)),
    )
    .await;
    assert_eq!(
        (status, answer["reason"].as_str()),
        (409, Some("NODE_MISMATCH"))
    );
    let (status, answer) = call(
        http,
        "POST",
        &path,
        NODE,
        Some(receipt("iot-a", None, "SENT", None)),
    )
    .await;
    assert_eq!(
        (status, answer["reason"].as_str()),
        (400, Some("CLAIM_GENERATION_REQUIRED"))
    );
    let (status, answer) = call(
        http,
        "POST",
        &path,
        NODE,
        Some(receipt("iot-a", Some(1), "SENT", None)),
    )
    .await;
    assert_eq!(
        (status, answer["command"]["status"].as_str()),
        (200, Some("SENT")),
        "{answer}"
    );
    let mut acked = receipt("iot-a", Some(1), "ACKED", Some(0));
    acked["rawResultCode"] = json!("00");
    acked["rawAck"] = json!("01 05 00 00 ff 00");
    let (status, answer) = call(http, "POST", &path, NODE, Some(acked)).await;
    assert_eq!(
        (status, answer["command"]["status"].as_str()),
        (200, Some("ACKED")),
        "{answer}"
    );
    assert_eq!(answer["command"]["rawAck"], "01 05 00 00 ff 00");
    let (status, answer) = call(
        http,
        "POST",
        &path,
        NODE,
        Some(receipt("iot-a", Some(1), "FAILED", Some(3))),
    )
    .await;
    assert_eq!(
        (status, answer["outcome"].as_str()),
        (200, Some("duplicated"))
    );

    // A final command cannot be cancelled; a pending one can, with a reply either way.
    let (status, refused) =
        call(http, "POST", &format!("/commands/{id}/cancel"), ADMIN, None).await;
    assert_eq!((status, refused["allowed"].clone()), (400, json!([])));
    let (_, pending) = create(http, json!({ "deviceId": "plc", "key": "u16", "value": 8 })).await;
    let pending = pending["id"].as_u64().expect("id");
    let (status, cancelled) = call(
        http,
        "POST",
        &format!("/commands/{pending}/cancel"),
        ADMIN,
        None,
    )
    .await;
    assert_eq!(
        (status, cancelled["status"].as_str()),
        (200, Some("CANCELLED"))
    );
    let replies = rig
        .subscriber
        .wait_until(Duration::from_secs(10), "two replies", |m| {
            m.iter()
                .filter(|m| m.topic == "P/PLC1/property/set/reply")
                .count()
                >= 2
        })
        .await;
    let statuses: Vec<String> = replies
        .iter()
        .filter(|m| m.topic == "P/PLC1/property/set/reply")
        .map(|m| m.json()["status"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(statuses, ["ACKED", "CANCELLED"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_reclaimed_during_its_slow_write_is_written_once() {
    // Every answer takes 700 ms: value before, write and read-back outlast a 1 s lease.
    let (_sim, device) = crate::support::sim::simulator(100, Duration::from_millis(700)).await;
    let broker = Mosquitto::start();
    let http = free_port();
    let text = Gateway::new(&format!("slow-{http}"), broker.port())
        .http(http, ADMIN)
        .set("perDeviceTimeoutMs", 3000)
        .set("commands.leaseSec", 1)
        .device(
            Device::modbus("slow", device.local_addr().port())
                .set("deviceNum", "S1")
                .channel("readTimeoutMs", 2000)
                .tag(writable("setpoint", "40001", "UINT16", 0)),
        )
        .yaml();
    let _engine = Engine::start(&scratch_dir("slow-write"), &text);
    let (status, command) = create(
        http,
        json!({ "deviceId": "slow", "key": "setpoint", "value": 321 }),
    )
    .await;
    assert_eq!(status, 201, "{command}");
    let command = Engine::final_command(http, command["id"].as_u64().expect("id")).await;
    assert_eq!(command["status"], "ACKED", "{command}");
    assert!(
        command["reclaimCount"].as_u64().expect("count") >= 1,
        "the lease ran out: {command}"
    );
    assert!(command["claimGeneration"].as_u64().expect("generation") >= 2);
    assert_eq!(
        command["write"]["attempts"], 1,
        "written once: {}",
        command["write"]
    );
    assert_eq!(command["write"]["after"], 321);
}
