//! The uplink as the rest of the engine sees it.

use std::sync::Arc;

use rumqttc::QoS;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::connection::Route;
use super::message::{DownlinkRoute, Input, NodeEvent};
use super::publisher::Publisher;
use super::sparkplug::{BD_SEQ_FILE, Births, EdgeNode};
use super::stats::UplinkStats;
use super::statuses::Status;
use crate::config::{MqttConfig, UplinkPayload};
use crate::model::EntityState;
use crate::mqtt::Topics;
use crate::mqtt::sparkplug::SparkplugTopics;
use crate::wal::{Message, Outbox, Settled};

/// The uplink as the rest of the engine sees it: reports go through the outbox
/// (WAL), statuses and tracked messages straight to the publisher.
#[derive(Debug, Clone)]
pub struct Uplink {
    outbox: Arc<Outbox>,
    publisher: mpsc::UnboundedSender<Input>,
    topics: Topics,
    /// With `payload: sparkplug-b`: the edge node's topics.
    sparkplug: Option<SparkplugTopics>,
    stats: Arc<UplinkStats>,
    /// The engine's client id on the broker.
    client_id: Arc<str>,
}

/// Who the engine is on the broker: its client id and, with Sparkplug B, its
/// edge node id; and the data directory that keeps the Sparkplug bdSeq.
#[derive(Debug, Clone, Copy)]
pub struct UplinkIdentity<'a> {
    pub client_id: &'a str,
    pub edge_node_id: &'a str,
    pub data_dir: &'a std::path::Path,
    /// Whether no other engine speaks for its devices (the state is not
    /// shared): at a clean stop it says each of them offline (STATE-7).
    pub sole: bool,
}

impl Uplink {
    /// Starts the publisher in the background; it connects, reconnects, publishes
    /// the outbox's records and releases them on PUBACK until `shutdown`. With a
    /// `downlink` sender it also subscribes to the downlink topics (see
    /// [`Topics::downlink_filters`]) and hands every message it receives there;
    /// a Sparkplug edge node also hands its DCMD messages there.
    pub fn start(
        config: &MqttConfig,
        identity: UplinkIdentity<'_>,
        outbox: Arc<Outbox>,
        downlink: Option<DownlinkRoute>,
        shutdown: watch::Receiver<bool>,
    ) -> (Self, JoinHandle<()>) {
        let (publisher, inputs) = mpsc::unbounded_channel();
        let stats = Arc::<UplinkStats>::default();
        let sparkplug = match &config.payload {
            UplinkPayload::Json => None,
            UplinkPayload::SparkplugB(spb) => {
                Some(SparkplugTopics::new(&spb.group_id, identity.edge_node_id))
            }
        };
        let node = sparkplug
            .clone()
            .map(|topics| EdgeNode::new(topics, identity.data_dir.join(BD_SEQ_FILE)));
        let uplink = Self {
            outbox: Arc::clone(&outbox),
            publisher: publisher.clone(),
            topics: Topics::new(&config.topic_prefix),
            sparkplug,
            stats: Arc::clone(&stats),
            client_id: Arc::from(identity.client_id),
        };
        let route = Route {
            outbox,
            stats,
            qos: if config.qos == 0 {
                QoS::AtMostOnce
            } else {
                QoS::AtLeastOnce
            },
        };
        let speaker = (identity.client_id, identity.sole);
        let task = Publisher::new(config, speaker, route, downlink, node.is_some())
            .run(publisher, inputs, node, shutdown);
        let task = tokio::spawn(task);
        (uplink, task)
    }

    /// The engine's client id on the broker.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The edge node's topics with `payload: sparkplug-b`; `None` with JSON.
    pub fn sparkplug(&self) -> Option<&SparkplugTopics> {
        self.sparkplug.as_ref()
    }

    /// Tells the Sparkplug edge node who knows the devices; until then it
    /// publishes no births and no data.
    pub fn set_births(&self, births: Arc<dyn Births>) {
        // The publisher only stops at shutdown.
        let _ = self.publisher.send(Input::Node(NodeEvent::Births(births)));
    }

    /// A device's lease state changed: with Sparkplug B a DDEATH (offline) or
    /// a DBIRTH (back); nothing with JSON (the retained status says it).
    pub fn device_state(&self, device_id: &str, offline: bool) {
        if self.sparkplug.is_some() {
            let _ = self.publisher.send(Input::Node(NodeEvent::DeviceState {
                device_id: device_id.to_owned(),
                offline,
            }));
        }
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
        let _ = self.publisher.send(Input::Tracked(topic, payload, done));
        acked
    }

    /// Queues a report: published at once, and kept in the log until the broker
    /// acknowledges it (WAL-1).
    pub fn report(&self, message: Message) {
        self.outbox.push(message);
    }

    /// Queues a report like [`Uplink::report`]; what it returns resolves once the
    /// report is safe (acknowledged, or in the log), for a caller that may go on
    /// only then.
    pub fn report_settled(&self, message: Message) -> Settled {
        self.outbox.push_settled(message)
    }

    /// Publishes a device's or driver's retained status on `topic`, naming
    /// this collector (STATE-7); while disconnected only the latest per topic
    /// is kept, and sent on the next connection before any report.
    /// With Sparkplug B there are none: births and deaths say it.
    pub fn status(&self, topic: String, state: EntityState, ts_ms: i64) {
        if self.sparkplug.is_none() {
            // The publisher only stops at shutdown, when statuses no longer matter.
            let _ = self.publisher.send(Input::Status(Status {
                topic,
                state,
                ts_ms,
            }));
        }
    }
}
