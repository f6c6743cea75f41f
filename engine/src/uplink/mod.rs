//! The MQTT uplink (rumqttc): report and status publishing, the collector's own
//! status topic with a Last Will, and the connection's counters.
//!
//! Topics are `{prefix}/{productId}/{deviceNum}/{suffix}`, without a leading slash
//! when the prefix is empty. The collector itself publishes a retained status on
//! `{prefix}/collector/{clientId}/status/post`; the broker publishes the Last Will
//! (`{"status":"offline"}`, retained) there when the engine dies or loses its
//! connection for longer than the keep-alive.
//!
//! Publishing never blocks a poll round: a publish that finds the client's queue
//! full is dropped and counted.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rumqttc::{AsyncClient, Event, Incoming, LastWill, MqttOptions, QoS};
use serde_json::json;
use tokio::task::JoinHandle;

use crate::config::MqttConfig;

/// Requests the client queues while the connection is busy or down.
const QUEUE_CAPACITY: usize = 10_000;
/// QoS 1 publishes awaiting their PUBACK at once.
const INFLIGHT: u16 = 100;
/// Longest wait between reconnect attempts to the broker.
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(5);

/// `{prefix}/{product}/{device}/{suffix}`, or without the prefix when it is empty.
pub fn topic(prefix: &str, product: &str, device: &str, suffix: &str) -> String {
    let prefix = prefix.trim_end_matches('/');
    if prefix.is_empty() {
        format!("{product}/{device}/{suffix}")
    } else {
        format!("{prefix}/{product}/{device}/{suffix}")
    }
}

/// A status payload: `{"status":"online"|"offline","ts":...}`.
pub fn status_payload(online: bool, ts_ms: i64) -> Vec<u8> {
    json!({ "status": if online { "online" } else { "offline" }, "ts": ts_ms })
        .to_string()
        .into_bytes()
}

/// Counters of the uplink, for `/health` and `/metrics`.
#[derive(Debug, Default)]
pub struct UplinkStats {
    connected: AtomicBool,
    connects: AtomicU64,
    published: AtomicU64,
    acked: AtomicU64,
    dropped: AtomicU64,
    last_error: Mutex<String>,
    /// When each QoS 1 publish awaiting its PUBACK was queued, oldest first (a
    /// broker acknowledges QoS 1 publishes of one connection in order).
    pending: Mutex<VecDeque<Instant>>,
    latency_sum_us: AtomicU64,
    latency_count: AtomicU64,
}

impl UplinkStats {
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// Successful connections to the broker.
    pub fn connects(&self) -> u64 {
        self.connects.load(Ordering::Relaxed)
    }

    /// Messages handed to the client.
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Relaxed)
    }

    /// PUBACKs received.
    pub fn acked(&self) -> u64 {
        self.acked.load(Ordering::Relaxed)
    }

    /// Messages dropped because the client's queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub fn last_error(&self) -> String {
        self.last_error
            .lock()
            .map(|e| e.clone())
            .unwrap_or_default()
    }

    /// Total seconds from queueing to PUBACK, and the number of PUBACKs timed.
    pub fn publish_latency(&self) -> (f64, u64) {
        (
            self.latency_sum_us.load(Ordering::Relaxed) as f64 / 1e6,
            self.latency_count.load(Ordering::Relaxed),
        )
    }

    /// QoS 1 publishes queued and not yet acknowledged.
    pub fn backlog(&self) -> usize {
        self.pending.lock().map(|p| p.len()).unwrap_or(0)
    }

    fn queued(&self) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.push_back(Instant::now());
        }
    }

    fn acknowledged(&self) {
        self.acked.fetch_add(1, Ordering::Relaxed);
        let queued = self.pending.lock().ok().and_then(|mut p| p.pop_front());
        if let Some(at) = queued {
            let us = u64::try_from(at.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.latency_sum_us.fetch_add(us, Ordering::Relaxed);
            self.latency_count.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A connected (or connecting) MQTT client.
#[derive(Debug, Clone)]
pub struct Uplink {
    client: AsyncClient,
    prefix: String,
    qos: QoS,
    status_topic: String,
    stats: Arc<UplinkStats>,
}

fn now_ms() -> i64 {
    crate::clock::now_ms()
}

impl Uplink {
    /// Connects in the background; the returned task drives the connection and
    /// reconnects until the uplink is dropped.
    pub fn start(config: &MqttConfig) -> (Self, JoinHandle<()>) {
        let status_topic = topic(
            &config.topic_prefix,
            "collector",
            &config.client_id,
            "status/post",
        );
        let mut options =
            MqttOptions::new(&config.client_id, &config.broker_host, config.broker_port);
        options
            .set_keep_alive(Duration::from_secs(u64::from(config.keep_alive_sec.max(1))))
            .set_clean_session(true)
            .set_inflight(INFLIGHT)
            .set_request_channel_capacity(QUEUE_CAPACITY)
            .set_last_will(LastWill::new(
                &status_topic,
                status_payload(false, 0),
                QoS::AtLeastOnce,
                true,
            ));
        if let Some(username) = &config.username {
            options.set_credentials(username, config.password.clone().unwrap_or_default());
        }
        let (client, mut eventloop) = AsyncClient::new(options, QUEUE_CAPACITY);
        let uplink = Self {
            client,
            prefix: config.topic_prefix.clone(),
            qos: if config.qos == 0 {
                QoS::AtMostOnce
            } else {
                QoS::AtLeastOnce
            },
            status_topic,
            stats: Arc::default(),
        };
        let driver = uplink.clone();
        let task = tokio::spawn(async move {
            let mut delay = Duration::from_millis(100);
            loop {
                match eventloop.poll().await {
                    Ok(Event::Incoming(Incoming::ConnAck(_))) => {
                        delay = Duration::from_millis(100);
                        driver.stats.connected.store(true, Ordering::Relaxed);
                        driver.stats.connects.fetch_add(1, Ordering::Relaxed);
                        // A clean session starts with nothing in flight.
                        if let Ok(mut pending) = driver.stats.pending.lock() {
                            pending.clear();
                        }
                        tracing::info!("connected to the MQTT broker");
                        let online = status_payload(true, now_ms());
                        driver.send(driver.status_topic.clone(), online, true);
                    }
                    Ok(Event::Incoming(Incoming::PubAck(_))) => driver.stats.acknowledged(),
                    Ok(_) => {}
                    Err(error) => {
                        if driver.stats.connected.swap(false, Ordering::Relaxed) {
                            tracing::warn!(%error, "lost the MQTT broker");
                        }
                        if let Ok(mut last) = driver.stats.last_error.lock() {
                            *last = error.to_string();
                        }
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(MAX_RECONNECT_DELAY);
                    }
                }
            }
        });
        (uplink, task)
    }

    pub fn stats(&self) -> &Arc<UplinkStats> {
        &self.stats
    }

    /// A device topic under this uplink's prefix.
    pub fn device_topic(&self, product: &str, device: &str, suffix: &str) -> String {
        topic(&self.prefix, product, device, suffix)
    }

    /// Queues a message at the configured QoS; false when it had to be dropped.
    pub fn publish(&self, topic: String, payload: Vec<u8>, retain: bool) -> bool {
        self.send(topic, payload, retain)
    }

    fn send(&self, topic: String, payload: Vec<u8>, retain: bool) -> bool {
        match self.client.try_publish(topic, self.qos, retain, payload) {
            Ok(()) => {
                self.stats.published.fetch_add(1, Ordering::Relaxed);
                if self.qos == QoS::AtLeastOnce {
                    self.stats.queued();
                }
                true
            }
            Err(error) => {
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, "MQTT publish dropped");
                false
            }
        }
    }

    /// Publishes the collector's offline status and disconnects cleanly (the broker
    /// then does not publish the Last Will).
    pub async fn shutdown(&self) {
        self.send(
            self.status_topic.clone(),
            status_payload(false, now_ms()),
            true,
        );
        if let Err(error) = self.client.disconnect().await {
            tracing::debug!(%error, "MQTT disconnect");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_have_no_leading_slash_without_a_prefix() {
        assert_eq!(
            topic("", "P1", "D1", "property/post"),
            "P1/D1/property/post"
        );
        assert_eq!(
            topic("plant/a/", "P1", "D1", "status/post"),
            "plant/a/P1/D1/status/post"
        );
    }
}
