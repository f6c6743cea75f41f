//! The open doors of a running gateway, tried as an attacker on the plant
//! network would, against real Mosquitto and pymodbus: each finding of the
//! review replayed, and the outcome it must have now (see docs/security.md).
//!
//! - one oversized message never stops the uplink (the broker and a restart
//!   included); what the broker can never take is set aside, not retried;
//! - an anonymous, replayed, stale or foreign downlink writes nothing and
//!   reconfigures nothing; Sparkplug commands need a trusted broker;
//! - a tenant cannot create devices, widen what it may write, or reach a host
//!   outside its fence;
//! - every route of `/openapi.json` answers only whom it should; slow and idle
//!   clients are dropped and a flood of sockets leaves reloads working; a
//!   gateway without an admin token makes one.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::support::config::{Device, Gateway, Tag, Tenant};
use crate::support::engine::{Engine, scratch_dir};
use crate::support::mqtt::{Message, OPERATOR_KEY, Subscriber, signed};
use crate::support::peers::{Mosquitto, Peer, PyModbus, free_port};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ADMIN: &str = "security-admin";
const TENANT_1: &str = "tenant-one-token";
const TENANT_2: &str = "tenant-two-token";
const NODE: &str = "node-token";
const TENANT_1_KEY: &str = "tenant-one-signing-key-0123456789";
const TENANT_2_KEY: &str = "tenant-two-signing-key-0123456789";

/// Tenant 1's device (its own pymodbus), its topics.
const SET: &str = "P/plc/property/set";
const PUSH: &str = "P/plc/config/push";
const REPORTS: &str = "P/plc/property/post";

/// What a test adds to the rig's gateway.
#[derive(Debug, Clone)]
struct Setup {
    /// More keys of `collector`, by path (`mqtt.maxPacketKb`).
    collector: Vec<(&'static str, Value)>,
    /// More `devices` entries, before the rig's own.
    devices: Vec<Device>,
    /// The plc's pipeline.
    pipeline: Option<&'static str>,
}

const PLAIN: Setup = Setup {
    collector: Vec::new(),
    devices: Vec::new(),
    pipeline: None,
};

/// Two tenants, each with a pymodbus device of its own, Mosquitto, and a
/// platform subscribed to everything.
struct Rig {
    plc: Peer,
    other: Peer,
    broker: Peer,
    platform: Subscriber,
    http: u16,
    dir: PathBuf,
    file: PathBuf,
}

impl Rig {
    async fn start(name: &str) -> Self {
        Self::start_on(name, Mosquitto::start()).await
    }

    async fn start_on(name: &str, broker: Peer) -> Self {
        let plc = PyModbus::start(&json!({ "hr": { "0": [0, 21, 0, 0] } }));
        let other = PyModbus::start(&json!({ "hr": { "0": [0, 33] } }));
        let platform = Subscriber::connect(broker.port()).await;
        let dir = scratch_dir(name);
        for (file, key) in [
            ("operator.key", OPERATOR_KEY),
            ("tenant1.key", TENANT_1_KEY),
            ("tenant2.key", TENANT_2_KEY),
        ] {
            std::fs::write(dir.join(file), format!("{key}\n")).expect("key file");
        }
        let file = dir.join("devices.yaml");
        Self {
            plc,
            other,
            broker,
            platform,
            http: free_port(),
            dir,
            file,
        }
    }

    /// The gateway as `setup` says, with no `clientId` (the engine makes one up).
    fn config(&self, setup: &Setup) -> Gateway {
        let gateway = Gateway::without_client_id(self.broker.port())
            .http(self.http, ADMIN)
            .set(
                "http.nodeTokens",
                json!([{ "nodeId": "edge-1", "token": NODE }]),
            )
            .operator_key()
            .tenant(
                Tenant::new(1, "one")
                    .set("tokens", json!([TENANT_1]))
                    .set("downlinkKeyFile", "tenant1.key")
                    .set(
                        "fence",
                        json!([{ "host": "127.0.0.1", "ports": self.plc.port() }]),
                    ),
            )
            .tenant(
                Tenant::new(2, "two")
                    .set("tokens", json!([TENANT_2]))
                    .set("downlinkKeyFile", "tenant2.key"),
            );
        let gateway = setup
            .collector
            .iter()
            .fold(gateway, |gateway, (path, value)| {
                gateway.set(path, value.clone())
            });
        let mut plc = Device::modbus("plc", self.plc.port())
            .set("tenantId", 1)
            .channel("readTimeoutMs", 500)
            .tag(
                Tag::new("sp", "40001", "UINT16", 200)
                    .set("access", "RW")
                    .set("readback", true)
                    .set("min", 0)
                    .set("max", 100),
            )
            .tag(Tag::new("temp", "40002", "UINT16", 200));
        if let Some(pipeline) = setup.pipeline {
            plc = plc.set("pipeline", pipeline);
        }
        let other = Device::modbus("other", self.other.port())
            .set("tenantId", 2)
            .channel("readTimeoutMs", 500)
            .tag(Tag::new("level", "40002", "UINT16", 200));
        setup
            .devices
            .iter()
            .cloned()
            .fold(gateway, Gateway::device)
            .device(plc)
            .device(other)
    }

    fn engine(&self, setup: &Setup) -> Engine {
        std::fs::write(&self.file, self.config(setup).yaml()).expect("config");
        Engine::start_with(&self.dir, &self.file)
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> (u16, Value) {
        Engine::request(self.http, method, path, token, body).await
    }

    async fn health(&self) -> Value {
        let (status, health) = self.call("GET", "/health", Some(ADMIN), None).await;
        assert_eq!(status, 200, "{health}");
        health
    }

    /// Waits until `n` more reports of the plc arrived: the uplink carries on.
    async fn reports_go_on(&self, n: usize) {
        let before = self.platform.on(REPORTS).len();
        self.platform
            .wait_until(Duration::from_secs(20), "more reports", |m| {
                m.iter().filter(|m| m.topic == REPORTS).count() >= before + n
            })
            .await;
    }

    /// The reply to `request_id` (on any reply topic).
    async fn reply(&self, request_id: &str) -> Message {
        let id = request_id.to_owned();
        let found = self
            .platform
            .wait_until(Duration::from_secs(20), &format!("a reply to {id}"), |m| {
                m.iter().any(|m| is_reply_to(m, &id))
            })
            .await;
        found
            .into_iter()
            .find(|m| is_reply_to(m, request_id))
            .expect("a reply")
    }

    /// The refusals (REJECTED replies) seen so far on `topic`.
    fn refusals(&self, topic: &str) -> Vec<Value> {
        self.platform
            .on(topic)
            .iter()
            .map(Message::json)
            .filter(|r| r["status"] == "REJECTED")
            .collect()
    }

    /// Waits until `count` refusals were answered on `topic`; returns them.
    async fn until_refusals(&self, topic: &str, count: usize) -> Vec<Value> {
        let topic_owned = topic.to_owned();
        self.platform
            .wait_until(
                Duration::from_secs(20),
                &format!("{count} refusals on {topic}"),
                |m| {
                    m.iter()
                        .filter(|m| m.topic == topic_owned && m.json()["status"] == "REJECTED")
                        .count()
                        >= count
                },
            )
            .await;
        self.refusals(topic)
    }

    fn writes(&self) -> Vec<Value> {
        PyModbus::writes(&self.plc)
            .into_iter()
            .map(|w| w["values"].clone())
            .collect()
    }
}

fn is_reply_to(message: &Message, request_id: &str) -> bool {
    message.topic.ends_with("/reply")
        && serde_json::from_slice::<Value>(&message.payload)
            .is_ok_and(|reply| reply["requestId"] == request_id)
}

/// `payload` signed with `key` for `topic`, `ts` at `ts` (ms).
fn signed_at(topic: &str, payload: &Value, key: &str, ts: i64) -> Vec<u8> {
    let mut payload = payload.clone();
    payload["ts"] = json!(ts);
    signed(topic, &payload, key)
}

/// Sends raw bytes as an HTTP request and reads the answer until the server
/// closes; returns the status (0: closed without answering) and what it read.
async fn raw(http: u16, request: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", http))
        .await
        .expect("connect");
    stream.write_all(request).await.expect("write");
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_oversized_message_never_stops_the_uplink() {
    let rig = Rig::start("sec-poison").await;
    let mut engine = rig.engine(&PLAIN);
    rig.reports_go_on(2).await;
    let connects = rig.health().await["broker"]["connects"].clone();

    // The finding: 600 KB of `value`, unsigned; then signed by the operator;
    // then 2 MB, past the 1 MiB the client used to read; then through the API
    // a 1.5 MB requestId.
    let huge = "x".repeat(600_000);
    rig.platform
        .publish(
            SET,
            &json!({ "requestId": "poison-1", "key": "sp", "value": huge }),
        )
        .await;
    let body = json!({ "requestId": "poison-2", "key": "sp", "value": huge });
    rig.platform
        .publish_bytes(SET, signed(SET, &body, OPERATOR_KEY))
        .await;
    let giant = json!({ "requestId": "poison-3", "key": "sp", "value": "y".repeat(2_000_000) });
    rig.platform.publish(SET, &giant).await;
    let refusals = rig.until_refusals("P/plc/property/set/reply", 3).await;
    for refusal in &refusals {
        let size = refusal.to_string().len();
        assert!(size < 1024, "a refusal echoes little: {size} bytes");
        assert!(!refusal.to_string().contains("xxxxxxxxxx"), "{refusal}");
    }
    let by_id = |id: &str| {
        refusals
            .iter()
            .find(|r| r["requestId"] == id)
            .unwrap_or_else(|| panic!("no refusal of {id}: {refusals:?}"))
            .clone()
    };
    // Measured before anything else of them is looked at, signed or not.
    for id in ["poison-1", "poison-2", "poison-3"] {
        let refusal = by_id(id);
        let message = refusal["message"].as_str().unwrap_or("");
        assert!(
            message.contains("a command takes at most 16384"),
            "{refusal}"
        );
    }
    let (status, answer) = rig
        .call(
            "POST",
            "/commands",
            Some(ADMIN),
            Some(&json!({ "deviceId": "plc", "key": "sp", "value": 1, "requestId": "z".repeat(1_500_000) })),
        )
        .await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer.to_string().len() < 1024, "the answer echoes little");

    // Telemetry goes on, on the same connection: nothing was too big to read.
    rig.reports_go_on(3).await;
    let health = rig.health().await;
    assert_eq!(health["broker"]["connects"], connects, "{health}");
    assert_eq!(health["wal"]["deadLetters"], 0, "{health}");
    assert!(
        rig.writes().is_empty(),
        "nothing was written: {:?}",
        rig.writes()
    );

    // A restart: the broker holds nothing unacknowledged, the WAL no poison.
    // (A reply whose release the kill cut off may come again, byte for byte:
    // at least once; a message handled again would be answered anew.)
    engine.kill();
    let distinct = |replies: Vec<Value>| {
        let mut texts: Vec<String> = replies.iter().map(Value::to_string).collect();
        texts.sort_unstable();
        texts.dedup();
        texts
    };
    let before = distinct(rig.refusals("P/plc/property/set/reply"));
    let _engine = rig.engine(&PLAIN);
    rig.reports_go_on(3).await;
    assert_eq!(
        distinct(rig.refusals("P/plc/property/set/reply")),
        before,
        "nothing handed again"
    );
    assert!(
        !_engine.log().contains("Cannot send packet"),
        "{}",
        _engine.log()
    );
}

/// A device whose one report (at start, then every ten minutes) is about 4 KB.
fn big_device(port: u16) -> Device {
    let tags = (0..60).map(|i| {
        let address = (40001 + i % 4).to_string();
        Tag::new(&format!("tag_{i:02}"), &address, "UINT16", 600_000)
    });
    Device::modbus("big", port).tags(tags)
}

/// Waits until the engine holds a dead letter of device `device`; returns it.
async fn until_dead_letter(rig: &Rig, device: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, list) = rig.call("GET", "/dead-letters", Some(ADMIN), None).await;
        assert_eq!(status, 200, "{list}");
        if let Some(letter) = list["deadLetters"]
            .as_array()
            .and_then(|l| l.iter().find(|d| d["device"] == device))
        {
            return letter.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no dead letter of {device}: {list}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_broker_can_never_take_is_set_aside_and_the_rest_flows() {
    // The broker closes the connection on any packet above 2 KB.
    let rig = Rig::start_on("sec-dead", Mosquitto::start_with("max_packet_size 2048\n")).await;
    let big = big_device(rig.plc.port());

    // Told the limit, the engine never sends the big report: it is set aside
    // at once, and the plc's reports flow.
    let mut engine = rig.engine(&Setup {
        collector: vec![("mqtt.maxPacketKb", json!(2))],
        devices: vec![big.clone()],
        ..PLAIN
    });
    let letter = until_dead_letter(&rig, "big").await;
    assert!(
        letter["reason"]
            .as_str()
            .unwrap_or("")
            .contains("maxPacketKb"),
        "{letter}"
    );
    assert!(letter["bytes"].as_u64().unwrap_or(0) > 2048, "{letter}");
    rig.reports_go_on(3).await;
    let health = rig.health().await;
    assert_eq!(health["wal"]["deadLetters"], 1, "{health}");
    assert_eq!(health["broker"]["connects"], 1, "never dropped: {health}");
    let metrics = Engine::http_get(rig.http, "/metrics", None)
        .await
        .expect("metrics");
    assert!(metrics.contains("sluice_wal_dead_letters 1"), "{metrics}");
    // The operator removes it.
    let path = format!("/dead-letters/{}", letter["id"]);
    assert_eq!(rig.call("DELETE", &path, Some(ADMIN), None).await.0, 200);
    assert_eq!(rig.call("DELETE", &path, Some(ADMIN), None).await.0, 404);
    assert_eq!(rig.health().await["wal"]["deadLetters"], 0);
    engine.kill();

    // Not told: the broker closes on the big report, time after time; the
    // engine backs off, takes it for refused on the third close in a row and
    // sets it aside, and everything else flows on.
    let _engine = rig.engine(&Setup {
        devices: vec![big],
        ..PLAIN
    });
    let letter = until_dead_letter(&rig, "big").await;
    assert!(
        letter["reason"]
            .as_str()
            .unwrap_or("")
            .contains("closed the connection 3 times"),
        "{letter}"
    );
    rig.reports_go_on(3).await;
    let health = rig.health().await;
    assert_eq!(health["broker"]["connected"], true, "{health}");
    let (status, list) = rig.call("GET", "/dead-letters", Some(ADMIN), None).await;
    assert_eq!(status, 200);
    assert!(
        list["deadLetters"]
            .as_array()
            .is_some_and(|l| l.iter().all(|d| d["device"] == "big")),
        "only the big report: {list}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_replayed_stale_and_foreign_downlinks_write_and_change_nothing() {
    let rig = Rig::start("sec-downlink").await;
    let _engine = rig.engine(&PLAIN);
    rig.reports_go_on(2).await;

    // Anonymous: a write, a push making `temp` writable with a new write tag,
    // a push creating a device of tenant 1.
    rig.platform
        .publish(
            SET,
            &json!({ "requestId": "anon-1", "key": "sp", "value": 11 }),
        )
        .await;
    let widened = json!({
        "requestId": "anon-2",
        "channels": [{
            "channelId": "main", "protocol": "modbus-tcp", "host": "127.0.0.1", "port": rig.plc.port(),
            "tags": [
                { "key": "sp", "address": "40001", "dataType": "UINT16", "access": "RW" },
                { "key": "temp", "address": "40002", "dataType": "UINT16", "access": "RW" },
                { "key": "coil", "address": "40004", "dataType": "UINT16", "access": "W" }
            ]
        }]
    });
    rig.platform.publish(PUSH, &widened).await;
    let mut rogue = widened.clone();
    rogue["requestId"] = json!("anon-3");
    rogue["tenantId"] = json!(1);
    rig.platform.publish("P/rogue/config/push", &rogue).await;
    for id in ["anon-1", "anon-2", "anon-3"] {
        let reply = rig.reply(id).await.json();
        assert_eq!(reply["status"], "REJECTED", "{reply}");
        let said = reply.to_string();
        assert!(said.contains("unsigned"), "{said}");
    }

    // Signed by tenant 1: its own device's write goes through, once, however
    // often the captured message is sent again.
    let write = json!({ "requestId": "t1-write", "key": "sp", "value": 42 });
    let captured = signed(SET, &write, TENANT_1_KEY);
    for _ in 0..3 {
        rig.platform.publish_bytes(SET, captured.clone()).await;
    }
    let reply = rig.reply("t1-write").await.json();
    assert_eq!(reply["status"], "ACKED", "{reply}");
    // Stale, moved to another device, or signed by the other tenant: refused.
    let stale = signed_at(
        SET,
        &json!({ "requestId": "stale", "key": "sp", "value": 43 }),
        TENANT_1_KEY,
        sluice::clock::now_ms() - 600_000,
    );
    rig.platform.publish_bytes(SET, stale).await;
    let moved = signed(
        "P/plc/function/invoke",
        &json!({ "requestId": "moved", "key": "sp", "value": 44 }),
        TENANT_1_KEY,
    );
    rig.platform.publish_bytes(SET, moved).await;
    let foreign = signed(
        SET,
        &json!({ "requestId": "foreign", "key": "sp", "value": 45 }),
        TENANT_2_KEY,
    );
    rig.platform.publish_bytes(SET, foreign).await;
    for (id, says) in [
        ("stale", "away from the engine's clock"),
        ("moved", "matches no key"),
        ("foreign", "matches no key of the operator or of tenant 1"),
    ] {
        let reply = rig.reply(id).await.json();
        assert_eq!(reply["status"], "REJECTED", "{reply}");
        assert!(
            reply["message"].as_str().unwrap_or("").contains(says),
            "{reply}"
        );
    }
    rig.reports_go_on(2).await;
    assert_eq!(
        rig.writes(),
        [json!([42])],
        "written once, by the signed message only"
    );

    // Tenant 1's signed push may tune, not widen: making `temp` writable and
    // adding a tag are refused at their paths.
    let mut tenant_push = widened.clone();
    tenant_push["requestId"] = json!("t1-push");
    rig.platform
        .publish_bytes(PUSH, signed(PUSH, &tenant_push, TENANT_1_KEY))
        .await;
    let reply = rig.reply("t1-push").await.json();
    assert_eq!(reply["status"], "REJECTED", "{reply}");
    let paths: Vec<&str> = reply["problems"]
        .as_array()
        .map(|p| p.iter().filter_map(|p| p["path"].as_str()).collect())
        .unwrap_or_default();
    assert!(paths.contains(&"$.channels[0].tags[1].access"), "{reply}");
    assert!(paths.contains(&"$.channels[0].tags[2].key"), "{reply}");
    let (_, view) = rig.call("GET", "/devices/plc", Some(ADMIN), None).await;
    assert_eq!(view["channels"][0]["tags"][1]["access"], "R", "{view}");
    assert_eq!(view["configSource"]["from"], "file", "{view}");
    let (_, devices) = rig.call("GET", "/devices", Some(TENANT_1), None).await;
    assert!(!devices.to_string().contains("rogue"), "{devices}");

    // A push replayed after a newer one is not applied again.
    let tune = |id: &str, period: u64| {
        json!({
            "requestId": id,
            "channels": [{
                "channelId": "main", "protocol": "modbus-tcp", "host": "127.0.0.1", "port": rig.plc.port(),
                "readTimeoutMs": 500,
                "tags": [
                    { "key": "sp", "address": "40001", "dataType": "UINT16", "periodMs": period, "access": "RW", "readback": true, "min": 0, "max": 100 },
                    { "key": "temp", "address": "40002", "dataType": "UINT16", "periodMs": period }
                ]
            }]
        })
    };
    let first = signed(PUSH, &tune("tune-1", 300), TENANT_1_KEY);
    rig.platform.publish_bytes(PUSH, first.clone()).await;
    let reply = rig.reply("tune-1").await.json();
    assert_eq!(reply["status"], "APPLIED", "{reply}");
    rig.platform
        .publish_bytes(PUSH, signed(PUSH, &tune("tune-2", 400), TENANT_1_KEY))
        .await;
    assert_eq!(rig.reply("tune-2").await.json()["status"], "APPLIED");
    let before = rig.platform.on("P/plc/config/push/reply").len();
    rig.platform.publish_bytes(PUSH, first).await;
    rig.platform
        .wait_until(Duration::from_secs(20), "the replay answered", |m| {
            m.iter()
                .filter(|m| m.topic == "P/plc/config/push/reply")
                .count()
                > before
        })
        .await;
    let (_, view) = rig.call("GET", "/devices/plc", Some(ADMIN), None).await;
    assert_eq!(view["channels"][0]["tags"][0]["periodMs"], 400, "{view}");
    assert_eq!(view["configSource"]["requestId"], "tune-2", "{view}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sparkplug_commands_are_taken_only_from_a_trusted_broker() {
    let rig = Rig::start("sec-sparkplug").await;
    let engine = rig.engine(&Setup {
        collector: vec![
            ("mqtt.payload", json!("sparkplug-b")),
            (
                "mqtt.sparkplug",
                json!({ "groupId": "plant", "edgeNodeId": "gw" }),
            ),
        ],
        ..PLAIN
    });
    rig.platform
        .wait_until(Duration::from_secs(20), "the births", |m| {
            m.iter().any(|m| m.topic == "spBv1.0/plant/DBIRTH/gw/plc")
        })
        .await;
    rig.platform
        .publish_bytes("spBv1.0/plant/DCMD/gw/plc", b"any bytes".to_vec())
        .await;
    rig.platform
        .publish_bytes("spBv1.0/plant/NCMD/gw", b"any bytes".to_vec())
        .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(engine.log().contains("a DCMD refused") && engine.log().contains("an NCMD refused")) {
        assert!(Instant::now() < deadline, "{}", engine.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(rig.writes().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_creates_nothing_and_reaches_no_host_outside_its_fence() {
    let rig = Rig::start("sec-fence").await;
    let _engine = rig.engine(&PLAIN);
    rig.reports_go_on(1).await;
    // A port where nothing should ever connect.
    let trap = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("trap");
    let trap_port = trap.local_addr().expect("address").port();
    let device = |host_port: u16, tenant: u32| {
        json!({
            "tenantId": tenant,
            "channels": [{
                "channelId": "main", "protocol": "modbus-tcp", "host": "127.0.0.1", "port": host_port,
                "tags": [
                    { "key": "sp", "address": "40001", "dataType": "UINT16", "periodMs": 200, "access": "RW", "readback": true, "min": 0, "max": 100 },
                    { "key": "temp", "address": "40002", "dataType": "UINT16", "periodMs": 200 }
                ]
            }]
        })
    };
    // A push of `body` for device `id` with `token`: its status, and its
    // problems as text.
    let push = |id: &str, token: &'static str, body: Value| {
        let path = format!("/devices/{id}/config");
        let http = rig.http;
        async move {
            let (status, reply) =
                Engine::request(http, "PUT", &path, Some(token), Some(&body)).await;
            (status, reply["problems"].to_string())
        }
    };

    // The finding: a new device at the other tenant's PLC.
    let mut evil = device(rig.other.port(), 1);
    evil["productId"] = json!("P");
    evil["deviceNum"] = json!("evil");
    let (status, problems) = push("evil", TENANT_1, evil).await;
    assert_eq!(status, 422, "{problems}");
    assert!(
        problems.contains("only the operator creates a device"),
        "{problems}"
    );
    assert!(
        problems.contains("outside the fence of tenant 1"),
        "{problems}"
    );
    // Its own device moved to another port: outside its fence.
    let (status, problems) = push("plc", TENANT_1, device(trap_port, 1)).await;
    assert_eq!(status, 422, "{problems}");
    assert!(
        problems.contains(&format!("127.0.0.1:{trap_port}")),
        "{problems}"
    );
    // Tenant 2 has no fence: its devices stay where the operator put them.
    let (status, problems) = push("other", TENANT_2, device(trap_port, 2)).await;
    assert_eq!(status, 422, "{problems}");
    assert!(problems.contains("no fence"), "{problems}");
    // Not even the operator may put tenant 1's device outside its fence.
    let (status, problems) = push("plc", ADMIN, device(trap_port, 1)).await;
    assert_eq!(status, 422, "{problems}");
    assert!(problems.contains("outside the fence"), "{problems}");
    // Inside it, the tenant may tune its device.
    let (status, problems) = push("plc", TENANT_1, device(rig.plc.port(), 1)).await;
    assert_eq!(status, 200, "{problems}");

    let connected = tokio::time::timeout(Duration::from_secs(2), trap.accept()).await;
    assert!(
        connected.is_err(),
        "the engine connected where no tenant may reach"
    );
    let (_, roster) = rig.call("GET", "/devices", Some(ADMIN), None).await;
    assert!(!roster.to_string().contains("evil"), "{roster}");
}

/// `path` with its parameters filled in: tenant 1's device `plc`, and
/// numbers for everything else.
fn concrete(path: &str) -> String {
    path.replace("{id}", "plc")
        .replace("{name}", "scale")
        .replace("{version}", "9.9.9")
        .replace("{action}", "confirm")
        .replace("/alarms/plc", "/alarms/1")
        .replace("/commands/plc", "/commands/1")
        .replace("/dead-letters/plc", "/dead-letters/1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_only_whom_it_should() {
    let rig = Rig::start("sec-routes").await;
    let _engine = rig.engine(&Setup {
        collector: vec![
            ("http.metricsToken", json!("metrics-token")),
            ("http.allowedHosts", json!(["gw.plant.local"])),
        ],
        ..PLAIN
    });
    rig.reports_go_on(1).await;
    let (status, doc) = rig.call("GET", "/openapi.json", None, None).await;
    assert_eq!(status, 200, "{doc}");
    let paths = doc["paths"].as_object().expect("paths");
    let mut walked = 0;
    for (path, operations) in paths {
        let url = concrete(path);
        for (method, operation) in operations.as_object().expect("operations") {
            let method = method.to_uppercase();
            let class = operation["x-sluice-access"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path} is classified for nobody: {operation}"));
            let body = json!({});
            let answer = |token: Option<&'static str>| {
                let (method, url) = (method.clone(), url.clone());
                let http = rig.http;
                let body = body.clone();
                async move { Engine::request(http, &method, &url, token, Some(&body)).await }
            };
            // A stream let in never ends: its tenant's view is tested apart.
            let streams = path == "/console/stream";
            let (none, wrong) = (answer(None).await, answer(Some("nobody's")).await);
            let tenant_2 = if streams {
                (200, Value::Null)
            } else {
                answer(Some(TENANT_2)).await
            };
            let what = format!("{method} {path} ({class})");
            match class {
                "open" => {
                    for (status, body) in [&none, &wrong] {
                        assert!(*status < 400 || *status == 404, "{what}: {status} {body}");
                    }
                }
                "metrics" => {
                    assert_eq!(none.0, 401, "{what}");
                    assert_eq!(wrong.0, 401, "{what}");
                    assert_eq!(tenant_2.0, 401, "{what}");
                }
                "token" => {
                    assert_eq!(none.0, 401, "{what}: {}", none.1);
                    assert_eq!(wrong.0, 401, "{what}: {}", wrong.1);
                    // Another tenant's token reaches nothing of tenant 1's.
                    let said = tenant_2.1.to_string();
                    assert!(
                        !said.contains("\"deviceId\":\"plc\"") && !said.contains("\"id\":\"plc\""),
                        "{what}: {said}"
                    );
                }
                "admin" => {
                    assert_eq!(none.0, 401, "{what}");
                    assert_eq!(wrong.0, 401, "{what}");
                    assert_eq!(tenant_2.0, 403, "{what}: {}", tenant_2.1);
                }
                "node" => {
                    assert_eq!(none.0, 401, "{what}");
                    assert_eq!(wrong.0, 401, "{what}");
                    assert_eq!(tenant_2.0, 401, "{what}");
                }
                "reporter" => {
                    assert_eq!(none.0, 401, "{what}");
                    assert_eq!(wrong.0, 401, "{what}");
                    let (status, _) = Engine::request(
                        rig.http,
                        &method,
                        &url,
                        Some("metrics-token"),
                        Some(&body),
                    )
                    .await;
                    assert_eq!(status, 401, "{what}: the metrics token");
                    // A tenant is let in, and its empty body refused as such.
                    assert_eq!(tenant_2.0, 400, "{what}: {}", tenant_2.1);
                }
                other => panic!("{what}: an unknown class {other}"),
            }
            walked += 1;
        }
    }
    assert!(walked >= 35, "{walked} operations walked");

    // Tenant 1's rows are tenant 1's: tenant 2 gets 404 and an empty list.
    let deadline = Instant::now() + Duration::from_secs(20);
    while rig
        .call("GET", "/devices/plc/state", Some(ADMIN), None)
        .await
        .0
        != 200
    {
        assert!(Instant::now() < deadline, "the plc never reported");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        rig.call("GET", "/devices/plc/state", Some(TENANT_2), None)
            .await
            .0,
        404
    );
    assert_eq!(
        rig.call("GET", "/devices/plc/state", Some(TENANT_1), None)
            .await
            .0,
        200
    );
    let (_, states) = rig
        .call("GET", "/states?type=device", Some(TENANT_2), None)
        .await;
    assert!(
        states["states"]
            .as_array()
            .is_some_and(|s| s.iter().all(|r| r["tenantId"] == 2)),
        "{states}"
    );
    // /health is bare to anyone, whole to the admin; /metrics names no address.
    let (_, bare) = rig.call("GET", "/health", None, None).await;
    assert_eq!(bare, json!({ "engine": "running" }));
    let (_, bare) = rig.call("GET", "/health", Some(TENANT_1), None).await;
    assert_eq!(bare, json!({ "engine": "running" }));
    assert!(rig.health().await["broker"].is_object());
    let metrics = Engine::http_get(rig.http, "/metrics", Some("metrics-token"))
        .await
        .expect("metrics");
    assert!(metrics.contains("sluice_connection_state{"), "{metrics}");
    assert!(
        !metrics.contains("127.0.0.1"),
        "no address in /metrics: {metrics}"
    );
    assert!(metrics.contains("connection=\"plc/main\""), "{metrics}");

    // The body is read after the token is checked.
    let (status, _) = raw(
        rig.http,
        b"POST /commands HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{not json",
    )
    .await;
    assert_eq!(status, 401);
    // A name nobody listed (DNS rebinding) reaches nothing; a listed one does.
    for (host, expected) in [
        ("evil.example", 421),
        ("gw.plant.local:8080", 200),
        ("127.0.0.1", 200),
    ] {
        let request = format!("GET /health HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        let (status, answer) = raw(rig.http, request.as_bytes()).await;
        assert_eq!(status, expected, "{host}: {answer}");
    }

    // A component version, once uploaded, keeps its bytes.
    let wasm = PathBuf::from(env!("SLUICE_TEST_COMPONENTS")).join("shifted_scale.wasm");
    let bytes = std::fs::read(&wasm).expect("the test component");
    let put = |bytes: Vec<u8>| {
        let http = rig.http;
        async move { upload(http, "/components/scale/7.0.0?kind=stage", &bytes).await }
    };
    assert_eq!(put(bytes.clone()).await, 200);
    assert_eq!(put(bytes.clone()).await, 200, "the same bytes again");
    let mut other = bytes;
    other.extend_from_slice(b"\0\0");
    assert_eq!(put(other).await, 409);
}

/// `PUT`s raw bytes as the admin; returns the status.
async fn upload(http: u16, path: &str, bytes: &[u8]) -> u16 {
    let head = format!(
        "PUT {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: Bearer {ADMIN}\r\nContent-Type: application/wasm\r\nContent-Length: {}\r\n\r\n",
        bytes.len()
    );
    let mut request = head.into_bytes();
    request.extend_from_slice(bytes);
    raw(http, &request).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_idle_clients_are_dropped_and_a_flood_leaves_reloads_working() {
    let rig = Rig::start("sec-slow").await;
    let limits = vec![
        ("http.maxConnections", json!(16)),
        ("http.headerTimeoutMs", json!(500)),
        ("http.idleTimeoutMs", json!(1500)),
    ];
    let engine = rig.engine(&Setup {
        collector: limits.clone(),
        ..PLAIN
    });
    rig.reports_go_on(1).await;

    // Half a request's headers, then nothing: closed after the header deadline.
    let started = Instant::now();
    let (status, _) = raw(rig.http, b"GET /health HTTP/1.1\r\nHost: localhost\r\n").await;
    assert_eq!(status, 0, "no answer, the connection closed");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // Headers, then half a body: closed once it moves nothing for the idle deadline.
    let started = Instant::now();
    let (_, _) = raw(
        rig.http,
        format!("POST /commands HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {ADMIN}\r\nContent-Length: 100\r\n\r\n{{\"deviceId\"").as_bytes(),
    )
    .await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1000) && waited < Duration::from_secs(6),
        "{waited:?}"
    );

    // A flood of idle sockets: the engine keeps few of them open.
    let fds_before = engine.open_fds();
    let mut flood = Vec::new();
    for _ in 0..300 {
        if let Ok(socket) = TcpStream::connect(("127.0.0.1", rig.http)).await {
            flood.push(socket);
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let fds_during = engine.open_fds();
    assert!(
        fds_during < fds_before + 40,
        "{fds_before} descriptors before, {fds_during} during a flood of 300"
    );
    // A reload of the device configuration works meanwhile: a device added to
    // the file starts reporting.
    let added =
        Device::modbus("added", rig.other.port()).tag(Tag::new("level", "40002", "UINT16", 200));
    let text = rig
        .config(&Setup {
            collector: limits,
            devices: vec![added],
            ..PLAIN
        })
        .yaml();
    let partial = rig.dir.join("devices.yaml.new");
    std::fs::write(&partial, text).expect("config");
    std::fs::rename(&partial, &rig.file).expect("rename");
    rig.platform
        .wait_until(Duration::from_secs(20), "the added device's reports", |m| {
            m.iter().any(|m| m.topic == "P/added/property/post")
        })
        .await;
    drop(flood);
    // And the API answers again once the flood is gone.
    assert_eq!(rig.health().await["config"]["reloadFailures"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_without_an_admin_token_makes_one_for_its_operator_only() {
    let rig = Rig::start("sec-token").await;
    let text = rig.config(&PLAIN).unset("http.adminToken").yaml();
    std::fs::write(&rig.file, text).expect("config");
    let engine = Engine::start_with(&rig.dir, &rig.file);
    rig.reports_go_on(1).await;
    let file = rig.dir.join("data").join(sluice::gateway::ADMIN_TOKEN_FILE);
    let token = std::fs::read_to_string(&file).expect("the token is kept");
    let token = token.trim().to_owned();
    assert_eq!(token.len(), 64);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).expect("file").permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    assert!(
        engine.log().contains(&file.display().to_string()) || engine.log().contains("admin-token"),
        "the log says where"
    );
    // Maintenance is no longer open to anyone.
    let body = json!({ "state": "maintain" });
    let path = "/devices/plc/state";
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, state) = rig.call("GET", path, Some(&token), None).await;
        if status == 200 && state["state"] != "unknown" {
            break;
        }
        assert!(Instant::now() < deadline, "the plc never reported");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(rig.call("PUT", path, None, Some(&body)).await.0, 401);
    assert_eq!(
        rig.call("PUT", path, Some(TENANT_1), Some(&body)).await.0,
        403
    );
    let (status, row) = rig.call("PUT", path, Some(&token), Some(&body)).await;
    assert_eq!(
        (status, row["state"].as_str()),
        (200, Some("maintain")),
        "{row}"
    );
    // `sluice reload` finds the kept token by itself.
    let reload = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["reload", "--config"])
        .arg(&rig.file)
        .current_dir(&rig.dir)
        .output()
        .expect("sluice reload runs");
    assert!(
        reload.status.success(),
        "{}{}",
        String::from_utf8_lossy(&reload.stdout),
        String::from_utf8_lossy(&reload.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_stream_tells_a_tenant_of_its_own_alarms_only() {
    let rig = Rig::start("sec-stream").await;
    let pipelines = rig.dir.join("pipelines");
    std::fs::create_dir_all(&pipelines).expect("dir");
    std::fs::write(
        pipelines.join("guarded.yaml"),
        "name: guarded\nstages:\n  - use: swap_bytes\n  - use: decode\n  - use: scale\nalarms:\n  thresholds:\n    - { tag: sp, above: 90, clearAt: 80, ruleKey: SP_HIGH }\n",
    )
    .expect("pipeline");
    let text = rig
        .config(&Setup {
            pipeline: Some("guarded"),
            ..PLAIN
        })
        .yaml();
    let _engine = Engine::start_with_pipelines(&rig.dir, &text, &pipelines);
    rig.reports_go_on(1).await;
    let mut one = Stream::open(rig.http, TENANT_1).await;
    let mut two = Stream::open(rig.http, TENANT_2).await;
    // The first events carry what is known; then tenant 1's setpoint goes high.
    let first = Duration::from_millis(1200);
    tokio::join!(one.read_for(first), two.read_for(first));
    let (status, command) = rig
        .call(
            "POST",
            "/commands",
            Some(ADMIN),
            Some(&json!({ "deviceId": "plc", "key": "sp", "value": 95 })),
        )
        .await;
    assert_eq!(status, 201, "{command}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !one.text.contains("event: alarms") {
        assert!(
            Instant::now() < deadline,
            "tenant 1 saw no alarm change: {}",
            one.text
        );
        one.read_for(Duration::from_millis(500)).await;
    }
    // The console looks at alarms every second: a tenant told of another's
    // change would be told within that.
    two.read_for(Duration::from_millis(1500)).await;
    assert!(
        !two.text.contains("event: alarms"),
        "tenant 2 was told: {}",
        two.text
    );
    assert!(
        !two.text.contains("\"plc\""),
        "tenant 2 saw tenant 1's device: {}",
        two.text
    );
}

/// A console's event stream, read as raw text.
struct Stream {
    socket: TcpStream,
    text: String,
}

impl Stream {
    async fn open(http: u16, token: &str) -> Self {
        let mut socket = TcpStream::connect(("127.0.0.1", http))
            .await
            .expect("connect");
        let request = format!(
            "GET /console/stream HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\r\n"
        );
        socket.write_all(request.as_bytes()).await.expect("write");
        Self {
            socket,
            text: String::new(),
        }
    }

    /// Reads what arrives for `time`.
    async fn read_for(&mut self, time: Duration) {
        let until = tokio::time::Instant::now() + time;
        let mut buffer = [0u8; 8192];
        while let Ok(Ok(n)) = tokio::time::timeout_at(until, self.socket.read(&mut buffer)).await {
            if n == 0 {
                break;
            }
            self.text.push_str(&String::from_utf8_lossy(&buffer[..n]));
        }
    }
}

/// A gateway whose password, tokens and keys all come from files: no secret
/// is in its log, in any `GET` answer (every route of its OpenAPI document,
/// with the admin's token and a tenant's) or in `sluice check`'s output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_appears_in_the_log_the_answers_or_check() {
    let dir = scratch_dir("sec-secrets");
    let secrets = [
        ("mqtt.password", "password-0f5b9c1d2e"),
        ("admin.token", "admin-7a3e9b1c5d0f"),
        ("tenant.token", "tenant-4c8d2e6f0a1b"),
        ("metrics.token", "metrics-9e1f3a5b7c2d"),
        ("node.token", "node-2b4d6f8a0c1e"),
    ];
    for (file, secret) in secrets {
        std::fs::write(dir.join(file), format!("{secret}\n")).expect("secret file");
    }
    crate::support::mqtt::write_operator_key(&dir);
    let broker = Mosquitto::start();
    let (sim, handle) = crate::support::sim::simulator(10, Duration::ZERO).await;
    sim.set_holding(0, &[3]);
    let http = free_port();
    let file = |name: &str| json!({ "file": name });
    let config = Gateway::new("gw-secrets", broker.port())
        .set("mqtt.username", "gateway")
        .set("mqtt.passwordFile", "mqtt.password")
        .set("http.listen", format!("127.0.0.1:{http}"))
        .set("http.adminToken", file("admin.token"))
        .set("http.metricsToken", file("metrics.token"))
        .set(
            "http.nodeTokens",
            json!([{ "nodeId": "n1", "token": file("node.token") }]),
        )
        .operator_key()
        .tenant(Tenant::new(1, "plant").set("tokens", json!([file("tenant.token")])))
        .device(
            Device::modbus("plc", handle.local_addr().port())
                .set("tenantId", 1)
                .tag(Tag::new("t", "40001", "UINT16", 200)),
        )
        .yaml();
    let subscriber = Subscriber::connect(broker.port()).await;
    let engine = Engine::start(&dir, &config);
    subscriber
        .until_value("P/plc/property/post", 3.0, "reports")
        .await;
    let leaked = |what: &str, text: &str| {
        for (_, secret) in secrets {
            assert!(!text.contains(secret), "{what} shows a secret: {text}");
        }
    };
    let (status, doc) = Engine::request(http, "GET", "/openapi.json", None, None).await;
    assert_eq!(status, 200);
    let mut answered = 0;
    for (path, operations) in doc["paths"].as_object().expect("paths") {
        if operations.get("get").is_none() || path == "/console/stream" {
            continue;
        }
        for token in ["admin-7a3e9b1c5d0f", "tenant-4c8d2e6f0a1b"] {
            let head = format!(
                "GET {} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n\r\n",
                concrete(path)
            );
            let (_, text) = raw(http, head.as_bytes()).await;
            leaked(&format!("GET {path}"), &text);
            answered += 1;
        }
    }
    assert!(answered >= 30, "{answered} answers");
    for page in ["/", "/console"] {
        let head = format!("GET {page} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        leaked(page, &raw(http, head.as_bytes()).await.1);
    }
    let log = engine.log();
    assert!(!log.is_empty());
    leaked("the log", &log);
    drop(engine);
    // `sluice check`, of the file as it is and with mistakes beside the secrets.
    let config_path = dir.join("devices.yaml");
    let check = |path: &PathBuf| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("check")
            .arg(path)
            .current_dir(&dir)
            .output()
            .expect("sluice check runs");
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    leaked("check", &check(&config_path));
    let broken = dir.join("broken.yaml");
    let text = std::fs::read_to_string(&config_path).expect("config");
    std::fs::write(&broken, text.replace("UINT16", "UINT17") + "colour: red\n").expect("write");
    let said = check(&broken);
    assert!(said.contains("UINT17"), "{said}");
    leaked("check of a broken file", &said);
}
