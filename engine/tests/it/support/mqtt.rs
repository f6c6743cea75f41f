//! An MQTT subscriber for tests: collects every message on a broker.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rumqttc::{AsyncClient, Event, Incoming, MqttOptions, QoS};

/// One received message.
#[derive(Debug, Clone)]
pub struct Message {
    pub topic: String,
    pub payload: Vec<u8>,
    pub retain: bool,
}

impl Message {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.payload)
            .unwrap_or_else(|e| panic!("payload on {} is not JSON: {e}", self.topic))
    }
}

/// Subscribed to `#` on a broker; messages accumulate in the background.
pub struct Subscriber {
    client: AsyncClient,
    messages: Arc<Mutex<Vec<Message>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Subscriber {
    /// Connects to the broker on 127.0.0.1:`port` and subscribes to everything.
    pub async fn connect(port: u16) -> Self {
        Self::connect_with(port, true).await
    }

    /// Like [`Subscriber::connect`], with a persistent session: the broker keeps the
    /// subscription and queues messages while the subscriber (or the broker, if it
    /// saved its state) is away, so nothing published meanwhile is missed.
    pub async fn connect_persistent(port: u16) -> Self {
        Self::connect_with(port, false).await
    }

    async fn connect_with(port: u16, clean: bool) -> Self {
        let id = format!("test-sub-{}-{port}", std::process::id());
        let mut options = MqttOptions::new(id, "127.0.0.1", port);
        options.set_keep_alive(Duration::from_secs(5));
        options.set_clean_session(clean);
        // Large enough for the oversized messages the security tests send.
        options.set_max_packet_size(16 << 20, 16 << 20);
        let (client, mut eventloop) = AsyncClient::new(options, 1000);
        let publisher = client.clone();
        let messages = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&messages);
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let mut ready = Some(ready_tx);
        let task = tokio::spawn(async move {
            loop {
                match eventloop.poll().await {
                    Ok(Event::Incoming(Incoming::ConnAck(ack))) => {
                        if !ack.session_present {
                            let _ = client.try_subscribe("#", QoS::AtLeastOnce);
                        }
                    }
                    Ok(Event::Incoming(Incoming::SubAck(_))) => {
                        if let Some(ready) = ready.take() {
                            let _ = ready.send(());
                        }
                    }
                    Ok(Event::Incoming(Incoming::Publish(publish))) => {
                        sink.lock().expect("messages").push(Message {
                            topic: publish.topic.clone(),
                            payload: publish.payload.to_vec(),
                            retain: publish.retain,
                        });
                    }
                    Ok(_) => {}
                    Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(10), ready_rx)
            .await
            .expect("subscribed within 10 s")
            .expect("subscriber alive");
        Self {
            client: publisher,
            messages,
            task,
        }
    }

    /// Publishes `payload` on `topic` with QoS 1 (a platform sending a downlink).
    pub async fn publish(&self, topic: &str, payload: &serde_json::Value) {
        self.client
            .publish(topic, QoS::AtLeastOnce, false, payload.to_string())
            .await
            .expect("publish");
    }

    /// Publishes `payload` on `topic` signed with `key`, as a platform holding
    /// the key does (see [`signed`]).
    pub async fn publish_signed(&self, topic: &str, payload: &serde_json::Value, key: &str) {
        self.publish_bytes(topic, signed(topic, payload, key)).await;
    }

    /// Publishes raw `payload` on `topic` with QoS 1.
    pub async fn publish_bytes(&self, topic: &str, payload: Vec<u8>) {
        self.client
            .publish(topic, QoS::AtLeastOnce, false, payload)
            .await
            .expect("publish");
    }

    /// Every message received so far.
    pub fn messages(&self) -> Vec<Message> {
        self.messages.lock().expect("messages").clone()
    }

    /// Messages on `topic`.
    pub fn on(&self, topic: &str) -> Vec<Message> {
        self.messages()
            .into_iter()
            .filter(|m| m.topic == topic)
            .collect()
    }

    /// Waits (bounded) until the latest report on `topic` carries `value` first.
    pub async fn until_value(&self, topic: &str, value: f64, what: &str) -> Vec<Message> {
        self.wait_until(Duration::from_secs(15), what, |m| {
            reports(m, topic).last().is_some_and(|(_, v)| *v == value)
        })
        .await
    }

    /// Waits (bounded) until `check` holds for the messages received so far.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        what: &str,
        check: impl Fn(&[Message]) -> bool,
    ) -> Vec<Message> {
        let deadline = Instant::now() + timeout;
        loop {
            let messages = self.messages();
            if check(&messages) {
                return messages;
            }
            if Instant::now() > deadline {
                let topics: Vec<_> = messages.iter().map(|m| m.topic.as_str()).collect();
                panic!(
                    "timed out after {timeout:?} waiting for {what}; received {} messages on {topics:?}",
                    messages.len()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The operator's signing key of the tests' gateways: in `operator.key` beside
/// their configuration (see [`write_operator_key`]).
pub const OPERATOR_KEY: &str = "operator-key-of-the-tests-0123456789abcdef";

/// Writes [`OPERATOR_KEY`] to `dir/operator.key`.
pub fn write_operator_key(dir: &std::path::Path) {
    std::fs::write(dir.join("operator.key"), format!("{OPERATOR_KEY}\n")).expect("key file");
}

/// `payload` (a JSON object) with `ts` now unless it has one, signed with
/// `key` for `topic`: what `sluice sign` prints.
pub fn signed(topic: &str, payload: &serde_json::Value, key: &str) -> Vec<u8> {
    let mut payload = payload.clone();
    if payload.get("ts").is_none() {
        payload["ts"] = serde_json::json!(sluice::clock::now_ms());
    }
    sluice::mqtt::signature::sign(key.as_bytes(), topic, &payload.to_string())
        .expect("a JSON object")
        .into_bytes()
}

/// `(seq, first value)` of every property report on `topic`, in arrival order.
pub fn reports(messages: &[Message], topic: &str) -> Vec<(i64, f64)> {
    messages
        .iter()
        .filter(|m| m.topic == topic)
        .map(|m| {
            let json = m.json();
            (
                json["seq"].as_i64().expect("seq"),
                json["values"][0]["value"].as_f64().expect("value"),
            )
        })
        .collect()
}
