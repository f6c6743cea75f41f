//! The downlink against real Mosquitto and a real Modbus peer (pymodbus): a
//! command published while the engine is stopped, or while its broker
//! connection is down, is executed exactly once after it is back; a message that
//! cannot become a command is answered, and not handed to the engine again.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::engine::{Engine, scratch_dir};
use support::mqtt::{Message, Subscriber};
use support::peers::{Mosquitto, Peer, PyModbus, free_port};
use support::proxy::{Carries, Mode, Proxy};

const SET: &str = "P/D/property/set";
const REPLY: &str = "P/D/property/set/reply";

/// A pymodbus device with one holding register (0), Mosquitto and a platform
/// client subscribed to everything.
struct Rig {
    device: Peer,
    broker: Peer,
    platform: Subscriber,
    http: u16,
    dir: PathBuf,
}

impl Rig {
    async fn start(name: &str) -> Self {
        let device = PyModbus::start(&json!({ "hr": { "0": [0] } }));
        let broker = Mosquitto::start();
        let platform = Subscriber::connect(broker.port()).await;
        Self {
            device,
            broker,
            platform,
            http: free_port(),
            dir: scratch_dir(name),
        }
    }

    /// A gateway with no `clientId` (made up and kept in the data directory),
    /// publishing to `broker_port`.
    fn config(&self, broker_port: u16) -> String {
        format!(
            "collector:
  workerThreads: 2
  mqtt: {{ brokerUrl: tcp://127.0.0.1:{broker_port} }}
  http: {{ listen: 127.0.0.1:{http} }}
  wal: {{ dir: ./data }}
devices:
  - deviceId: plc
    productId: P
    deviceNum: D
    channels:
      - channelId: main
        protocol: modbus-tcp
        host: 127.0.0.1
        port: {device}
        tags:
          - {{ key: sp, address: '40001', dataType: UINT16, periodMs: 200, access: RW, readback: true }}
",
            http = self.http,
            device = self.device.port(),
        )
    }

    fn engine(&self, broker_port: u16) -> Engine {
        Engine::start(&self.dir, &self.config(broker_port))
    }

    /// Waits until the engine reports its broker connection as `connected`.
    async fn until_connected(&self, connected: bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let health = Engine::http_get(self.http, "/health").await;
            let now = health
                .and_then(|h| serde_json::from_str::<Value>(&h).ok())
                .and_then(|h| h["broker"]["connected"].as_bool());
            if now == Some(connected) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the engine's broker connection is not {connected} within 20 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The replies seen so far for `request_id`, on any reply topic.
    fn replies(&self, request_id: &str) -> Vec<Message> {
        self.platform
            .messages()
            .into_iter()
            .filter(|m| m.topic.ends_with("/reply") && m.json()["requestId"] == request_id)
            .collect()
    }

    async fn until_reply(&self, request_id: &str) -> Value {
        let id = request_id.to_owned();
        self.platform
            .wait_until(Duration::from_secs(20), &format!("a reply to {id}"), |m| {
                m.iter()
                    .any(|m| m.topic.ends_with("/reply") && m.json()["requestId"] == id.as_str())
            })
            .await;
        self.replies(request_id)[0].json()
    }

    /// The values the device was written with, in order.
    fn writes(&self) -> Vec<Value> {
        PyModbus::writes(&self.device)
            .into_iter()
            .map(|w| w["values"].clone())
            .collect()
    }

    /// Waits for the engine's next report, so it has run a while.
    async fn until_next_report(&self) {
        let before = self.platform.on("P/D/property/post").len();
        self.platform
            .wait_until(Duration::from_secs(20), "another report", |m| {
                m.iter().filter(|m| m.topic == "P/D/property/post").count() > before
            })
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_published_while_the_engine_is_stopped_runs_once_after_it_starts() {
    let rig = Rig::start("downlink-stopped").await;
    let mut engine = rig.engine(rig.broker.port());
    rig.until_connected(true).await;
    rig.until_next_report().await;
    engine.kill();

    rig.platform
        .publish(
            SET,
            &json!({ "requestId": "while-away", "key": "sp", "value": 42 }),
        )
        .await;
    let client_id = std::fs::read_to_string(rig.dir.join("data/client-id")).expect("kept id");
    assert!(client_id.starts_with("sluice-"), "{client_id}");

    let mut engine = rig.engine(rig.broker.port());
    let reply = rig.until_reply("while-away").await;
    assert_eq!(rig.replies("while-away")[0].topic, REPLY);
    assert_eq!(
        (reply["status"].as_str(), reply["resultCode"].as_u64()),
        (Some("ACKED"), Some(0)),
        "{reply}"
    );
    assert_eq!(rig.writes(), [json!([42])], "the device was written once");
    assert_eq!(
        std::fs::read_to_string(rig.dir.join("data/client-id")).expect("kept id"),
        client_id,
        "the same client id across restarts"
    );

    // Acknowledged once stored: another restart gets nothing again.
    engine.kill();
    let _engine = rig.engine(rig.broker.port());
    rig.until_connected(true).await;
    rig.until_next_report().await;
    rig.until_next_report().await;
    assert_eq!(rig.writes(), [json!([42])], "{}", _engine.log());
    // The reply may come again from the WAL (published, killed before its
    // release was stored: at least once), never with another outcome.
    assert!(
        rig.replies("while-away")
            .iter()
            .all(|r| r.json()["status"] == "ACKED")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_published_while_the_broker_connection_is_down_runs_once_it_is_back() {
    let rig = Rig::start("downlink-outage").await;
    let line = Proxy::start(rig.broker.port(), Carries::Bytes).await;
    let engine = rig.engine(line.port());
    rig.until_connected(true).await;

    line.set(Mode::Cut);
    rig.until_connected(false).await;
    rig.platform
        .publish(
            SET,
            &json!({ "requestId": "in-outage", "key": "sp", "value": 7 }),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(rig.writes().is_empty(), "nothing reached the engine yet");

    line.set(Mode::Pass);
    let reply = rig.until_reply("in-outage").await;
    assert_eq!(reply["status"], "ACKED", "{reply}\n{}", engine.log());
    assert_eq!(rig.writes(), [json!([7])]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_is_no_command_is_answered_once_and_not_delivered_again() {
    let rig = Rig::start("downlink-refused").await;
    let mut engine = rig.engine(rig.broker.port());
    rig.until_connected(true).await;
    let refused = [
        (
            SET,
            json!({ "key": "sp", "value": 1 }),
            None,
            "`requestId` is required",
        ),
        (
            SET,
            json!({ "requestId": "no-tag", "key": "nope", "value": 1 }),
            Some("no-tag"),
            "no tag `nope`",
        ),
        (
            "P/ELSEWHERE/property/set",
            json!({ "requestId": "no-device", "key": "sp", "value": 1 }),
            Some("no-device"),
            "no device has productId `P` and deviceNum `ELSEWHERE`",
        ),
        (
            "P/D/function/invoke",
            json!({ "requestId": "incomplete" }),
            Some("incomplete"),
            "the payload must be",
        ),
    ];
    for (topic, payload, _, _) in &refused {
        rig.platform.publish(topic, payload).await;
    }
    let answers = rig
        .platform
        .wait_until(Duration::from_secs(20), "four refusals", |m| {
            m.iter()
                .filter(|m| m.json()["status"] == "REJECTED")
                .count()
                >= 4
        })
        .await;
    let rejected: Vec<Value> = answers
        .iter()
        .filter(|m| m.json()["status"] == "REJECTED")
        .map(Message::json)
        .collect();
    for (_, _, request_id, says) in &refused {
        let answer = rejected
            .iter()
            .find(|r| r["requestId"].as_str() == *request_id)
            .unwrap_or_else(|| panic!("no refusal for {request_id:?}: {rejected:?}"));
        assert_eq!(answer["resultCode"], 2, "{answer}");
        assert!(
            answer["message"].as_str().unwrap_or("").contains(says),
            "{answer}"
        );
    }
    let topics: Vec<&str> = answers
        .iter()
        .filter(|m| m.json()["status"] == "REJECTED")
        .map(|m| m.topic.as_str())
        .collect();
    assert!(
        topics.contains(&"P/ELSEWHERE/property/set/reply"),
        "{topics:?}"
    );
    assert!(topics.contains(&"P/D/function/invoke/reply"), "{topics:?}");

    // Each was acknowledged with its answer: a restart is not handed them again.
    engine.kill();
    let _engine = rig.engine(rig.broker.port());
    rig.until_connected(true).await;
    rig.until_next_report().await;
    rig.until_next_report().await;
    assert!(
        !_engine.log().contains("downlink refused"),
        "handed again: {}",
        _engine.log()
    );
    assert!(rig.writes().is_empty());
}
