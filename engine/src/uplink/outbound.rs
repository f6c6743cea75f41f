//! What the publisher sends the broker, queued as it handles an event (every
//! record a fill takes from the outbox, a status, an acknowledgement) and
//! written to the connection in one go ([`super::wire::Wire::write`]). Through
//! the client's request channel each publish cost a channel hand-off, a turn
//! of the event loop, a timer and a write of its own.
//!
//! Requests are checked here, before they are queued: a topic no broker takes,
//! a packet above the broker's limit. A packet the client refuses to write
//! would end the connection, and the next one would offer it again.

use std::collections::VecDeque;

use bytes::Bytes;
use rumqttc::{
    Disconnect, PubAck, PubRec, Publish, QoS, Request, Subscribe, valid_filter, valid_topic,
};

/// Why a request was not queued.
#[derive(Debug, thiserror::Error)]
pub(super) enum NotQueued {
    /// The queue is full; the publish comes back to be offered again later.
    #[error("the queue for the connection is full")]
    Full(Publish),
    /// The queue is full, for a request other than a publish.
    #[error("{0} requests already wait for the connection")]
    NoRoom(usize),
    /// A topic a publish may not have (a wildcard, empty) or a filter no
    /// broker accepts; offering it again would not help.
    #[error("{0}")]
    Invalid(String),
    /// A packet bigger than the broker takes (`collector.mqtt.maxPacketKb`):
    /// offering it again would not help either.
    #[error(
        "a packet of {size} bytes is bigger than the broker takes ({max} bytes, `collector.mqtt.maxPacketKb`)"
    )]
    TooLarge { size: usize, max: usize },
}

/// Requests waiting to be written, in order.
pub(super) struct Outbound {
    requests: VecDeque<Request>,
    capacity: usize,
    /// The largest packet the broker takes, in bytes.
    max_packet: usize,
}

impl Outbound {
    pub(super) fn new(capacity: usize, max_packet: usize) -> Self {
        Self {
            requests: VecDeque::new(),
            capacity,
            max_packet,
        }
    }

    /// Queues a publish.
    pub(super) fn publish(
        &mut self,
        topic: String,
        qos: QoS,
        retain: bool,
        payload: impl Into<Bytes>,
    ) -> Result<(), NotQueued> {
        if !valid_topic(&topic) {
            return Err(NotQueued::Invalid(format!(
                "{topic:?} is no topic to publish on"
            )));
        }
        let payload = payload.into();
        self.fits(&topic, payload.len(), qos)?;
        let mut publish = Publish::from_bytes(topic, qos, payload);
        publish.retain = retain;
        if self.requests.len() >= self.capacity {
            return Err(NotQueued::Full(publish));
        }
        self.requests.push_back(Request::Publish(publish));
        Ok(())
    }

    /// Whether a publish of `payload_len` bytes on `topic` fits the broker's
    /// packet limit. Checked here, not by the client: a packet the client
    /// refuses to write ends the connection, and the next one would offer it
    /// again.
    ///
    /// # Errors
    /// [`NotQueued::TooLarge`] with the packet's size.
    pub(super) fn fits(&self, topic: &str, payload_len: usize, qos: QoS) -> Result<(), NotQueued> {
        let size = publish_size(topic.len(), payload_len, qos);
        if size > self.max_packet {
            return Err(NotQueued::TooLarge {
                size,
                max: self.max_packet,
            });
        }
        Ok(())
    }

    /// Queues the acknowledgement of a message that came in (none for QoS 0).
    pub(super) fn ack(&mut self, message: &Publish) -> Result<(), NotQueued> {
        let request = match message.qos {
            QoS::AtMostOnce => return Ok(()),
            QoS::AtLeastOnce => Request::PubAck(PubAck::new(message.pkid)),
            QoS::ExactlyOnce => Request::PubRec(PubRec::new(message.pkid)),
        };
        self.push(request)
    }

    /// Queues a subscription to `filter`.
    pub(super) fn subscribe(&mut self, filter: &str, qos: QoS) -> Result<(), NotQueued> {
        if !valid_filter(filter) {
            return Err(NotQueued::Invalid(format!(
                "{filter:?} is no filter to subscribe to"
            )));
        }
        self.push(Request::Subscribe(Subscribe::new(filter, qos)))
    }

    /// Queues the DISCONNECT that ends the connection cleanly.
    pub(super) fn disconnect(&mut self) -> Result<(), NotQueued> {
        self.push(Request::Disconnect(Disconnect))
    }

    fn push(&mut self, request: Request) -> Result<(), NotQueued> {
        if self.requests.len() >= self.capacity {
            return Err(NotQueued::NoRoom(self.requests.len()));
        }
        self.requests.push_back(request);
        Ok(())
    }

    /// The next request to write, in order: none when nothing is queued, or
    /// when the next is a QoS 1 publish and the broker's window is not open
    /// (it waits for a PUBACK to make room).
    pub(super) fn next(&mut self, window_open: bool) -> Option<Request> {
        let acknowledged =
            matches!(self.requests.front()?, Request::Publish(p) if p.qos != QoS::AtMostOnce);
        if acknowledged && !window_open {
            return None;
        }
        self.requests.pop_front()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }
}

/// The size of an MQTT 3.1.1 PUBLISH packet: the fixed header (a byte and the
/// remaining length, 1 to 4 bytes) and the rest (topic length, topic, packet
/// id unless QoS 0, payload).
fn publish_size(topic_len: usize, payload_len: usize, qos: QoS) -> usize {
    let packet_id = if qos == QoS::AtMostOnce { 0 } else { 2 };
    let remaining = 2 + topic_len + packet_id + payload_len;
    let length_bytes = match remaining {
        0..128 => 1,
        128..16_384 => 2,
        16_384..2_097_152 => 3,
        _ => 4,
    };
    1 + length_bytes + remaining
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_gives_the_publish_back_and_a_bad_topic_is_refused() {
        let mut outbound = Outbound::new(1, 1 << 20);
        outbound
            .publish("a/b".into(), QoS::AtLeastOnce, false, b"1".to_vec())
            .expect("room");
        match outbound.publish("a/c".into(), QoS::AtLeastOnce, true, b"2".to_vec()) {
            Err(NotQueued::Full(publish)) => {
                assert_eq!((publish.topic.as_str(), publish.retain), ("a/c", true));
                assert_eq!(&publish.payload[..], b"2");
            }
            other => panic!("{other:?}"),
        }
        let mut roomy = Outbound::new(10, 1 << 20);
        assert!(matches!(
            roomy.publish("a/#".into(), QoS::AtLeastOnce, false, Vec::new()),
            Err(NotQueued::Invalid(reason)) if reason == "\"a/#\" is no topic to publish on"
        ));
        assert!(matches!(
            roomy.subscribe("a/#/b", QoS::AtLeastOnce),
            Err(NotQueued::Invalid(_))
        ));
        roomy.subscribe("a/#", QoS::AtLeastOnce).expect("a filter");
        let mut small = Outbound::new(10, 100);
        small
            .publish("a/b".into(), QoS::AtLeastOnce, false, vec![0; 91])
            .expect("a 2-byte header, then 2 + 3 + 2 + 91 bytes: 100 in all");
        assert!(matches!(
            small.publish("a/b".into(), QoS::AtLeastOnce, false, vec![0; 92]),
            Err(NotQueued::TooLarge {
                size: 101,
                max: 100
            })
        ));
        assert!(matches!(
            outbound.ack(&Publish::new("t", QoS::AtLeastOnce, Vec::new())),
            Err(NotQueued::NoRoom(1))
        ));
    }

    #[test]
    fn the_size_checked_is_the_size_the_client_writes() {
        for payload in [0, 1, 100, 123, 124, 16_000, 16_400, 2_100_000] {
            for qos in [QoS::AtMostOnce, QoS::AtLeastOnce] {
                let mut publish = Publish::new("site/P1/D1/property/post", qos, vec![0; payload]);
                // As written: a QoS 1 publish has its packet id by then.
                publish.pkid = u16::from(qos != QoS::AtMostOnce);
                assert_eq!(
                    publish_size(publish.topic.len(), payload, qos),
                    publish.size(),
                    "{payload} bytes at {qos:?}"
                );
            }
        }
    }

    #[test]
    fn acknowledgements_follow_the_message_qos() {
        let mut outbound = Outbound::new(10, 1 << 20);
        let mut message = Publish::new("t", QoS::AtMostOnce, Vec::new());
        outbound.ack(&message).expect("nothing to send");
        assert!(outbound.requests.is_empty());
        message.qos = QoS::AtLeastOnce;
        message.pkid = 7;
        outbound.ack(&message).expect("a PUBACK");
        assert!(
            matches!(outbound.requests.pop_front(), Some(Request::PubAck(ack)) if ack.pkid == 7)
        );
    }
}
