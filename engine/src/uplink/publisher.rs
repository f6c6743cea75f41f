//! The publisher: the task that owns the MQTT connection. It connects, backs
//! off and reconnects; per connection it turns what happens (the client's
//! events, records pushed to the outbox, what the rest of the engine hands it,
//! a shutdown) into calls on the connection's state machine
//! ([`super::connection::Connection`]) and writes what that queued
//! ([`super::wire::Wire`]).
//!
//! Each connection gets a fresh event loop, so the client never retransmits
//! on its own: after a reconnect the connection starts again from the oldest
//! record in the log (WAL-3), which resends exactly what
//! was not acknowledged, in order, before newer records.

use std::collections::VecDeque;
use std::time::Duration;

use rumqttc::{ConnectionError, Event, Incoming, LastWill, MqttOptions, Outgoing, Publish, QoS};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::connection::{Carried, Connection, Ended, INFLIGHT, Route};
use super::message::{Downlink, DownlinkRoute, Input, NodeEvent};
use super::outbound::{NotQueued, Outbound};
use super::sparkplug::EdgeNode;
use super::statuses::Statuses;
use super::tls;
use super::wire::Wire;
use crate::clock::now_ms;
use crate::config::{BackoffConfig, MqttConfig, TlsConfig};
use crate::io::{Jitter, delay};
use crate::model::EntityState;
use crate::mqtt::{Topics, status};
use crate::sync::lock;

/// Requests queued for the connection at most.
const QUEUE_CAPACITY: usize = 1000;
/// How often acknowledged records are released in one batch.
const RELEASE_EVERY: Duration = Duration::from_millis(50);
/// Waits between attempts to reach the broker: from 100 ms, doubling up to
/// 5 s, give or take a fifth. Every attempt backs off, also after a
/// connection that came up and dropped at once (a broker that closes on a
/// packet it refuses would otherwise be hammered).
const RECONNECT: BackoffConfig = BackoffConfig {
    base_ms: 100,
    max_ms: 5000,
    jitter: 0.2,
};
/// How long a clean stop waits for its last words to be acknowledged.
const FAREWELL_WAIT: Duration = Duration::from_secs(5);
/// A connection up this long ends the backoff: its loss is a new outage.
const STABLE_AFTER: Duration = Duration::from_secs(30);
/// The largest packet the engine reads: the most MQTT allows. A downlink
/// message above the engine's own limits is read and refused with a reply;
/// a smaller read limit would end the connection on it, and the broker would
/// deliver it again on every connection.
const MAX_INCOMING_PACKET: usize = 268_435_455;

pub(super) struct Publisher {
    options: MqttOptions,
    /// `collector.mqtt.tls`, for a broker over TLS.
    tls: Option<TlsConfig>,
    status_topic: String,
    /// The largest packet the broker takes (`collector.mqtt.maxPacketKb`).
    max_packet: usize,
    route: Route,
    /// Where downlink messages go, and the filters subscribed for them.
    downlink: Option<(mpsc::UnboundedSender<Downlink>, Vec<String>)>,
    /// Whether the edge node takes an NCMD (from a trusted broker only).
    node_commands: bool,
    /// Whether this engine alone speaks for its devices (STATE-7).
    sole: bool,
}

/// What the publisher keeps across connections besides the connection's own
/// carry-over.
struct Between {
    /// What the rest of the engine hands the publisher.
    inputs: mpsc::UnboundedReceiver<Input>,
    /// Its own sender, for downlink messages to be acknowledged through.
    to_self: mpsc::UnboundedSender<Input>,
    /// The devices' and drivers' statuses: said, and waiting for a connection.
    statuses: Statuses,
    shutdown: watch::Receiver<bool>,
}

/// How a connection's loop ended.
enum Outcome {
    Dropped,
    ShutDown,
}

impl Publisher {
    /// A publisher for `config`, as `client_id`; `sparkplug` when the payload
    /// is Sparkplug B (the session is clean then); `sole` when no other engine
    /// speaks for its devices.
    pub(super) fn new(
        config: &MqttConfig,
        (client_id, sole): (&str, bool),
        route: Route,
        downlink: Option<DownlinkRoute>,
        sparkplug: bool,
    ) -> Self {
        let topics = Topics::new(&config.topic_prefix);
        let status_topic = topics.collector_status(client_id);
        let mut options = MqttOptions::new(client_id, &config.broker_host, config.broker_port);
        let max_packet = config.max_packet_bytes();
        // CMD-S1: a persistent session, so the broker keeps the downlink
        // messages that come while the engine is away (but a Sparkplug edge node
        // starts clean, as the specification requires: see docs/sparkplug.md);
        // CMD-S2: they are acknowledged by hand, once handled.
        options
            .set_keep_alive(Duration::from_secs(u64::from(config.keep_alive_sec.max(1))))
            .set_clean_session(sparkplug)
            .set_manual_acks(true)
            .set_inflight(INFLIGHT)
            .set_request_channel_capacity(QUEUE_CAPACITY)
            .set_max_packet_size(MAX_INCOMING_PACKET, max_packet)
            .set_last_will(LastWill::new(
                &status_topic,
                status(EntityState::Offline, 0),
                QoS::AtLeastOnce,
                true,
            ));
        if let Some(username) = &config.username {
            options.set_credentials(username, config.password.clone().unwrap_or_default());
        }
        Self {
            options,
            tls: config.tls.clone(),
            status_topic,
            max_packet,
            route,
            node_commands: downlink.as_ref().is_some_and(|d| d.node_commands),
            downlink: downlink.map(|d| (d.to, topics.downlink_filters().to_vec())),
            sole,
        }
    }

    /// Runs until `shutdown`: `inputs` is the receiver of `to_self`'s channel,
    /// `node` the Sparkplug edge node (`payload: sparkplug-b`).
    pub(super) async fn run(
        self,
        to_self: mpsc::UnboundedSender<Input>,
        inputs: mpsc::UnboundedReceiver<Input>,
        node: Option<EdgeNode>,
        shutdown: watch::Receiver<bool>,
    ) {
        let mut between = Between {
            inputs,
            to_self,
            statuses: Statuses::new(self.options.client_id().as_str(), self.sole),
            shutdown,
        };
        let mut carried = Carried {
            node,
            ..Carried::default()
        };
        // Connection attempts in a row that never came up.
        let mut failed: u32 = 0;
        // Attempts since the last connection that stayed up.
        let mut attempts: u32 = 0;
        let mut jitter = Jitter::new(u64::try_from(now_ms()).unwrap_or(1));
        for number in 1.. {
            let mut options = self.options.clone();
            if let Some(node) = &mut carried.node {
                // SPB-1: every connection has the next bdSeq, in its will and NBIRTH.
                options.set_last_will(node.connecting());
            }
            let outbound = Outbound::new(QUEUE_CAPACITY, self.max_packet);
            let mut connection = Connection::new(number, outbound, self.route.clone(), carried);
            // The TLS files are read at every connect (a rotated certificate
            // is used from the next one).
            let made = match &self.tls {
                Some(tls) => tls::transport(tls).map(|(transport, expires)| {
                    options.set_transport(transport);
                    self.route.stats.set_client_certificate_expiry(expires);
                }),
                None => Ok(()),
            };
            let mut wire = match made {
                Ok(()) => Wire::new(options, QUEUE_CAPACITY),
                Err(problem) => Wire::unusable(options, problem),
            };
            let outcome = self.drive(&mut connection, &mut wire, &mut between).await;
            if let Outcome::ShutDown = outcome {
                self.goodbye(&mut connection, &mut wire, &mut between.statuses)
                    .await;
            }
            let dropped = matches!(outcome, Outcome::Dropped);
            let Ended {
                carried: next,
                release,
                came_up,
            } = connection.end(dropped, Instant::now());
            release.apply(&self.route.outbox).await;
            carried = next;
            if !dropped {
                return;
            }
            if came_up.is_some() {
                failed = 0;
            } else {
                failed = failed.saturating_add(1);
                self.unreachable(failed);
            }
            let stable = came_up.is_some_and(|at| at.elapsed() >= STABLE_AFTER);
            attempts = if stable {
                1
            } else {
                attempts.saturating_add(1)
            };
            tokio::select! {
                _ = tokio::time::sleep(delay(&RECONNECT, attempts, jitter.sample())) => {}
                _ = between.shutdown.changed() => return,
            }
        }
    }

    /// Logs attempts in a row that never came up. A connection that was up logs
    /// its loss; these would otherwise go unnoticed at the default level. At the
    /// 1st, 2nd, 4th, 8th... failure in a row: bounded, and a broker that stays
    /// away is seen to.
    fn unreachable(&self, failed: u32) {
        if failed.is_power_of_two() {
            let (host, port) = self.options.broker_address();
            tracing::warn!(
                error = %lock(&self.route.stats.last_error),
                broker = %format!("{host}:{port}"),
                attempts = failed,
                "cannot reach the MQTT broker; retrying (reports wait in the outbox)"
            );
        }
    }

    /// Drives one connection until it drops or the engine shuts down.
    async fn drive(
        &self,
        connection: &mut Connection,
        wire: &mut Wire,
        between: &mut Between,
    ) -> Outcome {
        match self.connect(connection, wire, between).await {
            Some(Ok(event)) => self.on_event(connection, event, between),
            Some(Err(error)) => {
                self.lost(&error);
                return Outcome::Dropped;
            }
            None => return Outcome::ShutDown,
        }
        let mut pushed = self.route.outbox.subscribe();
        let mut release = tokio::time::interval(RELEASE_EVERY);
        let mut devices_changed = connection.node().and_then(|node| node.changes());
        loop {
            tokio::select! {
                event = wire.poll() => match event {
                    Ok(event) => self.on_event(connection, event, between),
                    Err(error) => {
                        self.lost(&error);
                        return Outcome::Dropped;
                    }
                },
                _ = pushed.changed() => connection.fill(),
                Some(input) = between.inputs.recv() => {
                    self.on_input(connection, input, &mut between.statuses);
                    if devices_changed.is_none() {
                        devices_changed = connection.node().and_then(|node| node.changes());
                    }
                }
                () = changed(&mut devices_changed) => {
                    if let Some(node) = connection.node() {
                        let births = node.rebirth_devices();
                        connection.queue_node(births);
                    }
                }
                _ = release.tick() => connection.take_release().apply(&self.route.outbox).await,
                changed = between.shutdown.changed() => {
                    if changed.is_err() || *between.shutdown.borrow() {
                        return Outcome::ShutDown;
                    }
                }
            }
            // The client queues events of its own as it goes (the rest of the
            // packets one read brought, a publish numbered for each one
            // written): all of them are handled here, in this turn, and what
            // they queued goes out in one write and one flush, not one each
            // (the PUBACKs of one read free the window for as many reports).
            loop {
                while let Some(event) = wire.next_event() {
                    self.on_event(connection, event, between);
                }
                if let Err(error) = wire.write(connection.outbound()).await {
                    self.lost(&error);
                    return Outcome::Dropped;
                }
                if !wire.has_events() {
                    break;
                }
            }
        }
    }

    /// Connects `wire`: its first event (the CONNACK), or why it failed; none
    /// on shutdown. The connect is polled to its end, never dropped half-way
    /// for another event: a socket closed after its CONNECT would leave the
    /// broker publishing the will (an `offline` status) while the engine runs.
    /// Statuses handed over meanwhile are kept for the connection.
    async fn connect(
        &self,
        connection: &mut Connection,
        wire: &mut Wire,
        between: &mut Between,
    ) -> Option<Result<Event, ConnectionError>> {
        let connect = wire.poll();
        tokio::pin!(connect);
        loop {
            tokio::select! {
                event = &mut connect => return Some(event),
                Some(input) = between.inputs.recv() => {
                    self.on_input(connection, input, &mut between.statuses);
                }
                changed = between.shutdown.changed() => {
                    if changed.is_err() || *between.shutdown.borrow() {
                        return None;
                    }
                }
            }
        }
    }

    /// Handles one event of the connection.
    fn on_event(&self, connection: &mut Connection, event: Event, between: &mut Between) {
        match event {
            Event::Incoming(Incoming::ConnAck(_)) => {
                connection.up(Instant::now());
                self.route.stats.set_connected(true);
                self.route.stats.connects.inc();
                tracing::info!("connected to the MQTT broker");
                // Subscribe on every connection: a broker that lost the
                // session (or never had it) gets the subscriptions again.
                self.subscribe(connection);
                if let Some(node) = connection.node() {
                    let births = node.birth();
                    connection.queue_node(births);
                } else {
                    connection.queue_status(
                        self.status_topic.clone(),
                        status(EntityState::Online, now_ms()),
                    );
                    // STATE-7: statuses handed over before this connection
                    // (those of a start among them) go out before any record.
                    while let Ok(input) = between.inputs.try_recv() {
                        self.on_input(connection, input, &mut between.statuses);
                    }
                    for (topic, payload) in between.statuses.waited() {
                        connection.queue_status(topic, payload);
                    }
                }
                connection.fill();
            }
            Event::Outgoing(Outgoing::Publish(pkid)) => connection.published(pkid, Instant::now()),
            Event::Incoming(Incoming::Publish(message)) => {
                self.on_message(connection, message, &between.to_self);
            }
            Event::Incoming(Incoming::PubAck(ack)) => {
                self.route.stats.acknowledged();
                connection.puback(ack.pkid);
            }
            _ => {}
        }
    }

    /// A message the broker delivered: the edge node's command, or a downlink
    /// message handed on (acknowledged once handled, through `to_self`).
    fn on_message(
        &self,
        connection: &mut Connection,
        message: Publish,
        to_self: &mpsc::UnboundedSender<Input>,
    ) {
        let node_command = connection
            .node()
            .is_some_and(|node| node.topics().node_command() == message.topic);
        if node_command {
            if self.node_commands {
                if let Some(node) = connection.node() {
                    let births = node.node_command(&message.payload);
                    connection.queue_node(births);
                }
            } else {
                tracing::warn!(
                    "an NCMD refused: Sparkplug commands carry no signature, and the \
                     broker is not trusted with them (collector.downlink.trustedBroker)"
                );
            }
            if let Err(refused) = connection.outbound().ack(&message) {
                tracing::warn!(%refused, "cannot acknowledge an NCMD");
            }
        } else if let Some((downlink, _)) = &self.downlink {
            // The receiver lives as long as the engine.
            let _ = downlink.send(Downlink::new(connection.number(), message, to_self.clone()));
        } else if let Err(refused) = connection.outbound().ack(&message) {
            tracing::warn!(%refused, "cannot acknowledge a message nobody handles");
        }
    }

    /// What the rest of the engine handed the publisher.
    fn on_input(&self, connection: &mut Connection, input: Input, statuses: &mut Statuses) {
        match input {
            Input::Status(status) if connection.is_up() => {
                let (topic, payload) = statuses.say(status);
                connection.queue_status(topic, payload);
            }
            Input::Status(status) => statuses.keep(status),
            Input::Tracked(topic, payload, done) => connection.queue_tracked(topic, payload, done),
            Input::Node(event) => on_node_event(connection, event),
            Input::Ack {
                connection: number,
                message,
            } => {
                // CMD-S2: an acknowledgement of an earlier connection is
                // not sent; the broker delivers that message again.
                if number == connection.number()
                    && let Err(refused) = connection.outbound().ack(&message)
                {
                    tracing::warn!(%refused, topic = %message.topic, "cannot acknowledge a downlink message; the broker delivers it again");
                }
            }
        }
    }

    /// The connection failed: counted, and logged once per outage.
    fn lost(&self, error: &ConnectionError) {
        let cause = tls::cause(error);
        if self.route.stats.set_connected(false) {
            tracing::warn!(error = %cause, "lost the MQTT broker");
        }
        *lock(&self.route.stats.last_error) = cause;
    }

    /// Subscribes to the downlink, and the edge node to its commands.
    fn subscribe(&self, connection: &mut Connection) {
        let own = self
            .downlink
            .iter()
            .flat_map(|(_, filters)| filters.iter().cloned());
        let node = connection.node().map(|node| {
            let topics = node.topics();
            [topics.node_command(), topics.device_commands()]
        });
        let filters: Vec<String> = own.chain(node.into_iter().flatten()).collect();
        for filter in filters {
            if let Err(refused) = connection.outbound().subscribe(&filter, QoS::AtLeastOnce) {
                tracing::warn!(%refused, %filter, "cannot subscribe to the downlink");
            }
        }
    }

    /// Says its last words and disconnects cleanly, so the broker does not
    /// send the Last Will: with JSON, `offline` on the status of every device
    /// and driver it said otherwise (STATE-7), then on its own; with Sparkplug
    /// B the NDEATH. Waits up to [`FAREWELL_WAIT`] for what is in flight to be
    /// acknowledged.
    async fn goodbye(&self, connection: &mut Connection, wire: &mut Wire, statuses: &mut Statuses) {
        if !connection.is_up() {
            return;
        }
        let mut last: VecDeque<Publish> = VecDeque::new();
        let retained = |topic: String, payload: Vec<u8>| {
            let mut publish = Publish::new(topic, QoS::AtLeastOnce, payload);
            publish.retain = true;
            publish
        };
        let said = match connection.node() {
            Some(node) => {
                let death = node.death();
                last.push_back(Publish::new(death.topic, death.qos, death.payload));
                "sent the NDEATH before disconnecting"
            }
            None => {
                let now = now_ms();
                for (topic, payload) in statuses.farewell(now) {
                    last.push_back(retained(topic, payload));
                }
                let own = status(EntityState::Offline, now);
                last.push_back(retained(self.status_topic.clone(), own));
                "sent the offline statuses before disconnecting"
            }
        };
        let words = last.len();
        let deadline = Instant::now() + FAREWELL_WAIT;
        let mut disconnecting = false;
        loop {
            // As many last words as the queue takes; the disconnect after them.
            while let Some(publish) = last.pop_front() {
                let Publish {
                    topic,
                    qos,
                    retain,
                    payload,
                    ..
                } = publish;
                match connection.outbound().publish(topic, qos, retain, payload) {
                    Ok(()) => {}
                    Err(NotQueued::Full(publish)) => {
                        last.push_front(publish);
                        break;
                    }
                    Err(refused) => tracing::warn!(%refused, "a last word not said"),
                }
            }
            // Only once every last word is written: a DISCONNECT written
            // while one waits would leave it unsaid.
            let written = connection.outbound().is_empty() && !wire.holds_a_publish();
            if last.is_empty() && written && !disconnecting {
                tracing::info!(statuses = words, "{said}");
                let _ = connection.outbound().disconnect();
                disconnecting = true;
            }
            if wire.write(connection.outbound()).await.is_err() {
                return;
            }
            match tokio::time::timeout_at(deadline, wire.poll()).await {
                // A full window held the rest back; this PUBACK made room.
                Ok(Ok(Event::Incoming(Incoming::PubAck(ack)))) => connection.settle(ack.pkid),
                // The broker closes once it read the DISCONNECT. Closing first,
                // with its PUBACKs unread, would reset the connection, and the
                // broker could drop what it had not read yet and send the will.
                Ok(Err(_)) | Err(_) => break,
                Ok(Ok(_)) => {}
            }
        }
        if !last.is_empty() {
            tracing::warn!(
                unsaid = last.len(),
                "the broker did not take every last word in time"
            );
        }
    }
}

/// What the collector tells the edge node: its devices, a lease change.
fn on_node_event(connection: &mut Connection, event: NodeEvent) {
    let is_up = connection.is_up();
    let Some(node) = connection.node() else {
        return;
    };
    match event {
        NodeEvent::Births(births) => {
            node.set_births(births);
            if is_up && !node.is_born() {
                let births = node.birth();
                connection.queue_node(births);
                connection.fill();
            }
        }
        NodeEvent::DeviceState { device_id, offline } => {
            let messages = node.device_state(&device_id, offline);
            connection.queue_node(messages);
        }
    }
}

/// Resolves when `changes` (if any) sees a new value; pends forever without one
/// or once its sender is gone.
async fn changed(changes: &mut Option<watch::Receiver<u64>>) {
    if let Some(receiver) = changes
        && receiver.changed().await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

#[cfg(test)]
mod tests;
