//! Messages between the uplink's handle and its publisher.

use std::sync::Arc;

use rumqttc::Publish;
use tokio::sync::{mpsc, oneshot};

use super::sparkplug::Births;
use super::statuses::Status;

/// What the rest of the engine hands the publisher, in the order it was sent.
#[derive(Debug)]
pub(super) enum Input {
    /// A device's or driver's retained status.
    Status(Status),
    /// A message whose PUBACK someone waits for: topic, payload, whom to tell.
    Tracked(String, Vec<u8>, oneshot::Sender<()>),
    /// For the Sparkplug edge node only.
    Node(NodeEvent),
    /// A downlink message handled: acknowledge it on `connection`, the one it
    /// came in on.
    Ack { connection: u64, message: Publish },
}

/// What the Sparkplug edge node learns from the rest of the engine.
#[derive(Debug)]
pub(super) enum NodeEvent {
    /// Who knows the devices: births can go out.
    Births(Arc<dyn Births>),
    /// A device's lease went offline, or came back.
    DeviceState { device_id: String, offline: bool },
}

/// Where the downlink messages go, and whether the Sparkplug edge node takes
/// an NCMD (which has no room for a signature: only from a trusted broker).
#[derive(Debug, Clone)]
pub struct DownlinkRoute {
    pub to: mpsc::UnboundedSender<Downlink>,
    /// Take NCMD `Node Control/Rebirth` (`collector.downlink.trustedBroker`,
    /// or no signature required).
    pub node_commands: bool,
}

/// A message the broker delivered to the engine (a downlink command). The broker
/// keeps it until [`Downlink::acknowledge`] (CMD-S2 of `docs/commands.md`):
/// one dropped unacknowledged is delivered again after the next reconnect.
#[derive(Debug)]
pub struct Downlink {
    pub topic: String,
    pub payload: Vec<u8>,
    ack: Option<(mpsc::UnboundedSender<Input>, Input)>,
}

impl Downlink {
    pub(super) fn new(
        connection: u64,
        message: Publish,
        publisher: mpsc::UnboundedSender<Input>,
    ) -> Self {
        Self {
            topic: message.topic.clone(),
            payload: message.payload.to_vec(),
            ack: Some((
                publisher,
                Input::Ack {
                    connection,
                    message,
                },
            )),
        }
    }

    /// Tells the broker the message was taken care of, so it is not delivered
    /// again. Sent on the connection it came in on, or not at all (the broker
    /// delivers it again on the next one).
    pub fn acknowledge(self) {
        if let Some((publisher, ack)) = self.ack {
            // The publisher only stops at shutdown; then the broker keeps it.
            let _ = publisher.send(ack);
        }
    }
}
