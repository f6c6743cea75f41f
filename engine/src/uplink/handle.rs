//! The uplink as the rest of the engine sees it.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::message::{Downlink, Tracked};
use super::publisher::Publisher;
use super::stats::UplinkStats;
use crate::config::MqttConfig;
use crate::mqtt::Topics;
use crate::wal::{Message, Outbox, Settled};

/// The uplink as the rest of the engine sees it: reports go through the outbox
/// (WAL), statuses and tracked messages straight to the publisher.
#[derive(Debug, Clone)]
pub struct Uplink {
    outbox: Arc<Outbox>,
    statuses: mpsc::UnboundedSender<(String, Vec<u8>)>,
    tracked: mpsc::UnboundedSender<Tracked>,
    topics: Topics,
    stats: Arc<UplinkStats>,
}

impl Uplink {
    /// Starts the publisher in the background; it connects, reconnects, publishes
    /// the outbox's records and releases them on PUBACK until `shutdown`. With a
    /// `downlink` sender it also subscribes to the downlink topics (see
    /// [`Topics::downlink_filters`]) and hands every message it receives there.
    pub fn start(
        (config, client_id): (&MqttConfig, &str),
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
            topics: Topics::new(&config.topic_prefix),
            stats: Arc::clone(&stats),
        };
        let publisher = Publisher::new((config, client_id), outbox, stats, downlink);
        let task = tokio::spawn(publisher.run(status_rx, tracked_rx, shutdown));
        (uplink, task)
    }

    pub fn stats(&self) -> &Arc<UplinkStats> {
        &self.stats
    }

    pub fn outbox(&self) -> &Arc<Outbox> {
        &self.outbox
    }

    /// The topics under this uplink's prefix.
    pub fn topics(&self) -> &Topics {
        &self.topics
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

    /// Queues a report: it is published once durably in the log (invariant 1).
    pub fn report(&self, message: Message) {
        self.outbox.push(message);
    }

    /// Queues a report like [`Uplink::report`]; what it returns resolves once the
    /// report is in the log, for a caller that may go on only then.
    pub fn report_settled(&self, message: Message) -> Settled {
        self.outbox.push_settled(message)
    }

    /// Publishes a retained status; while disconnected only the latest per topic is
    /// kept, and sent on the next connection.
    pub fn status(&self, topic: String, payload: Vec<u8>) {
        // The publisher only stops at shutdown, when statuses no longer matter.
        let _ = self.statuses.send((topic, payload));
    }
}
