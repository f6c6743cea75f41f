//! rumqttc's event loop, and the one place that reaches into it. The
//! publisher writes what it queued ([`super::outbound::Outbound`]) straight
//! through the event loop's connection and its MQTT state, in one flush per
//! turn of the publisher's loop, instead of one request-channel hand-off per publish.
//!
//! What this relies on, beyond rumqttc's documented API (`EventLoop::poll`):
//! the public fields `EventLoop::network` (the connection, `None` until the
//! CONNACK) and `EventLoop::state`: `MqttState::handle_outgoing_packet` numbers
//! a publish and queues an `Outgoing::Publish(pkid)` event in
//! `MqttState::events`, in the order written; `MqttState::inflight` counts the
//! QoS 1 publishes awaiting their PUBACK; `MqttState::collision` holds a
//! publish whose packet id is still taken. The tests below break when any of
//! that changes.

use std::time::Duration;

use rumqttc::{ConnectionError, Event, EventLoop, MqttOptions};

use super::outbound::Outbound;

/// One connection's event loop.
pub(super) struct Wire {
    eventloop: EventLoop,
    /// Publishes the broker may leave unacknowledged at once.
    window: u16,
    /// Why this connection cannot even be tried (its TLS files), said at
    /// the first poll as the connection's failure.
    unusable: Option<String>,
}

impl Wire {
    /// An event loop that connects on its first poll, with `capacity` requests
    /// in its own channel (unused: requests go through [`Wire::write`]).
    pub(super) fn new(options: MqttOptions, capacity: usize) -> Self {
        let window = options.inflight();
        Self {
            eventloop: EventLoop::new(options, capacity),
            window,
            unusable: None,
        }
    }

    /// A wire whose connection cannot be tried: its first poll fails with
    /// `problem`.
    pub(super) fn unusable(options: MqttOptions, problem: String) -> Self {
        Self {
            unusable: Some(problem),
            ..Self::new(options, 1)
        }
    }

    /// The next event: connects first, then reads the connection (and pings).
    ///
    /// # Errors
    /// The connection could not be made, or failed.
    pub(super) async fn poll(&mut self) -> Result<Event, ConnectionError> {
        if let Some(problem) = self.unusable.take() {
            return Err(ConnectionError::Io(std::io::Error::other(problem)));
        }
        self.eventloop.poll().await
    }

    /// An event the client queued while writing or reading (a publish it
    /// numbered, the other packets one read brought), to be handled before
    /// the next poll.
    pub(super) fn next_event(&mut self) -> Option<Event> {
        self.eventloop.state.events.pop_front()
    }

    /// Whether the client queued events [`Wire::next_event`] has not taken.
    pub(super) fn has_events(&self) -> bool {
        !self.eventloop.state.events.is_empty()
    }

    /// Whether the client holds a publish back until its packet id is free
    /// (it goes out on that id's PUBACK, behind anything written meanwhile).
    pub(super) fn holds_a_publish(&self) -> bool {
        self.eventloop.state.collision.is_some()
    }

    /// Writes what `outbound` holds to the connection, in order, and flushes
    /// once; nothing while the connection is not up yet. A QoS 1 publish that
    /// finds the broker's window full (or its packet id taken) stops the
    /// writing there: it and what follows wait for the next call.
    ///
    /// # Errors
    /// The connection failed, or did not take the bytes within the client's
    /// network timeout (as for the event loop's own writes).
    pub(super) async fn write(&mut self, outbound: &mut Outbound) -> Result<(), ConnectionError> {
        if outbound.is_empty() {
            return Ok(());
        }
        let limit = Duration::from_secs(self.eventloop.network_options().connection_timeout());
        let window = self.window;
        let Some(network) = self.eventloop.network.as_mut() else {
            return Ok(());
        };
        let state = &mut self.eventloop.state;
        let written = async {
            let mut wrote = false;
            loop {
                let window_open = state.inflight() < window && state.collision.is_none();
                let Some(request) = outbound.next(window_open) else {
                    break;
                };
                if let Some(packet) = state.handle_outgoing_packet(request)? {
                    network.write(packet).await?;
                    wrote = true;
                }
            }
            if wrote {
                network.flush().await?;
            }
            Ok::<(), ConnectionError>(())
        };
        match tokio::time::timeout(limit, written).await {
            Ok(result) => result,
            Err(_) => Err(ConnectionError::FlushTimeout),
        }
    }
}

// On the embedded broker, which only the `demo` feature has.
#[cfg(all(test, feature = "demo"))]
mod tests {
    use std::net::{Ipv4Addr, TcpListener};

    use rumqttc::{Incoming, Outgoing, QoS};

    use super::*;
    use crate::broker::EmbeddedBroker;

    const WAIT: Duration = Duration::from_secs(10);

    /// A wire to an embedded broker, connected (the broker's listener starts on
    /// a thread of its own: refused connections are tried again).
    async fn connected(window: u16) -> (Wire, EmbeddedBroker) {
        let address = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .expect("a free port");
        let broker = EmbeddedBroker::start(address).expect("start the broker");
        let mut options = MqttOptions::new("wire", "127.0.0.1", address.port());
        options.set_inflight(window).set_manual_acks(true);
        for _ in 0..100 {
            let mut wire = Wire::new(options.clone(), 10);
            loop {
                match tokio::time::timeout(WAIT, wire.poll()).await {
                    Ok(Ok(Event::Incoming(Incoming::ConnAck(_)))) => return (wire, broker),
                    Ok(Ok(_)) => {}
                    Ok(Err(_)) => break,
                    Err(_) => panic!("no answer from the broker"),
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the embedded broker never listened");
    }

    /// The events the client queued, as `Outgoing::Publish` packet ids (other
    /// events left out).
    fn numbered(wire: &mut Wire) -> Vec<u16> {
        std::iter::from_fn(|| wire.next_event())
            .filter_map(|event| match event {
                Event::Outgoing(Outgoing::Publish(pkid)) => Some(pkid),
                _ => None,
            })
            .collect()
    }

    /// Polls until the PUBACK of `pkid` comes.
    async fn puback(wire: &mut Wire, pkid: u16) {
        loop {
            let event = tokio::time::timeout(WAIT, wire.poll())
                .await
                .expect("the broker answers")
                .expect("the connection holds");
            if matches!(event, Event::Incoming(Incoming::PubAck(ack)) if ack.pkid == pkid) {
                return;
            }
        }
    }

    #[tokio::test]
    async fn publishes_are_numbered_in_order_and_held_back_while_the_window_is_full() {
        let (mut wire, broker) = connected(2).await;
        let mut outbound = Outbound::new(10, 1 << 20);
        for n in 1..=3 {
            outbound
                .publish("wire/n".into(), QoS::AtLeastOnce, false, n.to_string())
                .expect("room");
        }
        outbound
            .publish("wire/n".into(), QoS::AtMostOnce, false, "0")
            .expect("room");
        wire.write(&mut outbound).await.expect("written");
        // Two fill the window; the third waits, and the QoS 0 one behind it.
        assert_eq!(numbered(&mut wire), [1, 2]);
        assert!(!outbound.is_empty());
        puback(&mut wire, 1).await;
        wire.write(&mut outbound).await.expect("written");
        // The first free packet id; the QoS 0 publish has none.
        assert_eq!(numbered(&mut wire), [1, 0]);
        assert!(outbound.is_empty());
        let received = tokio::task::spawn_blocking(move || {
            (0..4)
                .map(|_| broker.messages().recv_timeout(WAIT).expect("delivered"))
                .map(|(_, payload)| String::from_utf8(payload).expect("utf-8"))
                .collect::<Vec<_>>()
        })
        .await
        .expect("the reader ends");
        assert_eq!(received, ["1", "2", "3", "0"]);
    }

    #[tokio::test]
    async fn nothing_is_written_before_the_connection_is_up() {
        let mut options = MqttOptions::new("wire", "127.0.0.1", 9);
        options.set_inflight(2);
        let mut wire = Wire::new(options, 10);
        let mut outbound = Outbound::new(10, 1 << 20);
        outbound
            .publish("wire/n".into(), QoS::AtLeastOnce, false, "1")
            .expect("room");
        wire.write(&mut outbound).await.expect("nothing to fail");
        assert!(!outbound.is_empty());
        assert!(wire.next_event().is_none());
    }
}
