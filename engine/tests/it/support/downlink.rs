//! A gateway with one writable Modbus register on a real pymodbus device, real
//! Mosquitto and a platform client: for the tests of the downlink and of the
//! writes that execute it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::config::{Device, Gateway, Tag};
use super::engine::{Engine, scratch_dir};
use super::mqtt::{Message, OPERATOR_KEY, Subscriber, write_operator_key};
use super::peers::{Mosquitto, Peer, PyModbus, free_port};

/// The downlink topic of the rig's device, and its reply topic.
pub const SET: &str = "P/plc/property/set";
pub const REPLY: &str = "P/plc/property/set/reply";
/// The rig's admin token.
pub const ADMIN: &str = "admin-token";

/// Where the engine reaches the broker and the device: the peers themselves,
/// or proxies in front of them.
#[derive(Debug, Clone, Copy)]
pub struct Lines {
    pub broker: u16,
    pub device: u16,
}

/// A pymodbus device with one holding register (0), Mosquitto and a platform
/// client subscribed to everything.
pub struct Rig {
    pub device: Peer,
    pub broker: Peer,
    pub platform: Subscriber,
    pub http: u16,
    pub dir: PathBuf,
}

impl Rig {
    pub async fn start(name: &str) -> Self {
        let device = PyModbus::start(&json!({ "hr": { "0": [0] } }));
        let broker = Mosquitto::start();
        let platform = Subscriber::connect(broker.port()).await;
        let dir = scratch_dir(name);
        write_operator_key(&dir);
        Self {
            device,
            broker,
            platform,
            http: free_port(),
            dir,
        }
    }

    /// Sends a downlink message signed with the operator's key.
    pub async fn send(&self, topic: &str, payload: &Value) {
        self.platform
            .publish_signed(topic, payload, OPERATOR_KEY)
            .await;
    }

    /// The engine's lines straight to the peers.
    pub fn direct(&self) -> Lines {
        Lines {
            broker: self.broker.port(),
            device: self.device.port(),
        }
    }

    /// A gateway with no `clientId` (made up and kept in the data directory).
    fn config(&self, lines: Lines, (read_timeout_ms, write_attempts): (u32, u32)) -> String {
        let plc = Device::modbus("plc", lines.device)
            .channel("readTimeoutMs", read_timeout_ms)
            .tag(
                Tag::new("sp", "40001", "UINT16", 200)
                    .set("access", "RW")
                    .set("readback", true),
            );
        Gateway::without_client_id(lines.broker)
            .http(self.http, ADMIN)
            .operator_key()
            .set("commands.writeAttempts", write_attempts)
            .device(plc)
            .yaml()
    }

    /// An engine with a long read timeout: a stalled write keeps it waiting.
    pub fn engine(&self, lines: Lines) -> Engine {
        self.engine_with(lines, 30_000, 3)
    }

    /// An engine with the given read timeout and write attempts.
    pub fn engine_with(&self, lines: Lines, read_timeout_ms: u32, write_attempts: u32) -> Engine {
        let config = self.config(lines, (read_timeout_ms, write_attempts));
        Engine::start(&self.dir, &config)
    }

    /// Waits until the engine reports its broker connection as `connected`.
    pub async fn until_connected(&self, connected: bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let health = Engine::http_get(self.http, "/health", Some(ADMIN)).await;
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
    pub fn replies(&self, request_id: &str) -> Vec<Message> {
        self.platform
            .messages()
            .into_iter()
            .filter(|m| m.topic.ends_with("/reply") && m.json()["requestId"] == request_id)
            .collect()
    }

    pub async fn until_reply(&self, request_id: &str) -> Value {
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
    pub fn writes(&self) -> Vec<Value> {
        PyModbus::writes(&self.device)
            .into_iter()
            .map(|w| w["values"].clone())
            .collect()
    }

    /// Waits for the engine's next report, so it has run a while.
    pub async fn until_next_report(&self) {
        let before = self.platform.on("P/plc/property/post").len();
        self.platform
            .wait_until(Duration::from_secs(20), "another report", |m| {
                m.iter()
                    .filter(|m| m.topic == "P/plc/property/post")
                    .count()
                    > before
            })
            .await;
    }

    /// Command `id` as `GET /commands/{id}` shows it.
    pub async fn command(&self, id: u64) -> Value {
        let path = format!("/commands/{id}");
        let (status, command) = Engine::request(self.http, "GET", &path, Some(ADMIN), None).await;
        assert_eq!(status, 200, "{command}");
        command
    }

    /// Creates a command over HTTP; returns its id.
    pub async fn create(&self, request_id: &str, value: u16) -> u64 {
        let body =
            json!({ "deviceId": "plc", "key": "sp", "value": value, "requestId": request_id });
        let (status, created) =
            Engine::request(self.http, "POST", "/commands", Some(ADMIN), Some(&body)).await;
        assert_eq!(status, 201, "{created}");
        created["id"].as_u64().expect("id")
    }

    /// Waits until command `id` is in a final status; returns it.
    pub async fn until_final(&self, id: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let command = self.command(id).await;
            let status = command["status"].as_str().unwrap_or("");
            if ["ACKED", "FAILED", "CANCELLED", "TIMEOUT"].contains(&status) {
                return command;
            }
            assert!(
                Instant::now() < deadline,
                "not final within 20 s: {command}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
