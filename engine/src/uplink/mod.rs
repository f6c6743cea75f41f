//! The MQTT uplink (rumqttc): report and status publishing, the collector's own
//! status topic with a Last Will, and the connection's counters.
//!
//! Topics are `{prefix}/{productId}/{deviceNum}/{suffix}`, without a leading slash
//! when the prefix is empty. The collector itself publishes a retained status on
//! `{prefix}/collector/{clientId}/status/post`; the broker publishes the Last Will
//! (`{"status":"offline"}`, retained) there when the engine dies or loses its
//! connection for longer than the keep-alive.
//!
//! Reports are never published straight from a poll round: they go through the
//! outbox (write-ahead log) and the publisher sends them from there, releasing each
//! on its PUBACK. Publishing never blocks a poll round.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::json;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

mod publisher;

use publisher::Publisher;

use crate::config::MqttConfig;
use crate::wal::{Message, Outbox};

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

    /// Messages handed to the client (replays included).
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Relaxed)
    }

    /// PUBACKs received.
    pub fn acked(&self) -> u64 {
        self.acked.load(Ordering::Relaxed)
    }

    /// Publishes the client refused (its queue was full); they stay in the log.
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

/// A message whose PUBACK someone waits for: topic, payload, whom to tell.
type Tracked = (String, Vec<u8>, oneshot::Sender<()>);

/// A message the broker delivered to the engine (a downlink command).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Downlink {
    pub topic: String,
    pub payload: Vec<u8>,
}

/// The downlink topics: `property/set` and `function/invoke` of every device.
pub fn downlink_filters(prefix: &str) -> [String; 2] {
    ["property/set", "function/invoke"].map(|suffix| topic(prefix, "+", "+", suffix))
}

/// The uplink as the rest of the engine sees it: reports go through the outbox
/// (WAL), statuses and tracked messages straight to the publisher.
#[derive(Debug, Clone)]
pub struct Uplink {
    outbox: Arc<Outbox>,
    statuses: mpsc::UnboundedSender<(String, Vec<u8>)>,
    tracked: mpsc::UnboundedSender<Tracked>,
    prefix: String,
    stats: Arc<UplinkStats>,
}

impl Uplink {
    /// Starts the publisher in the background; it connects, reconnects, publishes
    /// the outbox's records and releases them on PUBACK until `shutdown`. With a
    /// `downlink` sender it also subscribes to the downlink topics (see
    /// [`downlink_filters`]) and hands every message it receives there.
    pub fn start(
        config: &MqttConfig,
        outbox: Arc<Outbox>,
        downlink: Option<mpsc::UnboundedSender<Downlink>>,
        shutdown: watch::Receiver<bool>,
    ) -> (Self, JoinHandle<()>) {
        let (statuses, status_rx) = mpsc::unbounded_channel();
        let (tracked, tracked_rx) = mpsc::unbounded_channel();
        let stats = Arc::<UplinkStats>::default();
        let uplink = Self {
            outbox: Arc::clone(&outbox),
            statuses,
            tracked,
            prefix: config.topic_prefix.clone(),
            stats: Arc::clone(&stats),
        };
        let publisher = Publisher::new(config, outbox, stats, downlink);
        let task = tokio::spawn(publisher.run(status_rx, tracked_rx, shutdown));
        (uplink, task)
    }

    pub fn stats(&self) -> &Arc<UplinkStats> {
        &self.stats
    }

    pub fn outbox(&self) -> &Arc<Outbox> {
        &self.outbox
    }

    /// `suffix` under this uplink's prefix.
    pub fn topic(&self, suffix: &str) -> String {
        let prefix = self.prefix.trim_end_matches('/');
        if prefix.is_empty() {
            suffix.to_owned()
        } else {
            format!("{prefix}/{suffix}")
        }
    }

    /// Publishes with QoS 1 now (not through the outbox); the receiver resolves on
    /// the broker's PUBACK and fails when the message did not go out (no
    /// connection, a full queue, or the connection dropped before the PUBACK).
    pub fn publish_tracked(&self, topic: String, payload: Vec<u8>) -> oneshot::Receiver<()> {
        let (done, acked) = oneshot::channel();
        // A publisher that stopped drops `done`, which the receiver sees.
        let _ = self.tracked.send((topic, payload, done));
        acked
    }

    /// A device topic under this uplink's prefix.
    pub fn device_topic(&self, product: &str, device: &str, suffix: &str) -> String {
        topic(&self.prefix, product, device, suffix)
    }

    /// Queues a report: it is published once durably in the log (invariant 1).
    pub fn report(&self, message: Message) {
        self.outbox.push(message);
    }

    /// Publishes a retained status; while disconnected only the latest per topic is
    /// kept, and sent on the next connection.
    pub fn status(&self, topic: String, payload: Vec<u8>) {
        // The publisher only stops at shutdown, when statuses no longer matter.
        let _ = self.statuses.send((topic, payload));
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
