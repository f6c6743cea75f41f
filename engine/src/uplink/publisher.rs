//! The publisher: owns the MQTT connection, publishes the outbox's records in log
//! order as they are pushed, maps each PUBACK back to its record and releases it.
//!
//! Each connection gets a fresh event loop, so the client never
//! retransmits on its own: after a reconnect the publisher starts again from the
//! oldest record in the log (invariant 3 of `docs/wal.md`), which resends exactly
//! what was not acknowledged, in order, before newer records.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use rumqttc::{Event, EventLoop, Incoming, LastWill, MqttOptions, Outgoing, QoS};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::message::{Ack, Downlink, DownlinkRoute, NodeEvent, Tracked};
use super::outbound::{Outbound, Refused};
use super::refusals::{REFUSED_AFTER, Refusals};
use super::session::{Inflight, Pending, Queued, Session};
use super::sparkplug::{EdgeNode, Outgoing as NodeMessage};
use super::stats::UplinkStats;
use crate::clock::now_ms;
use crate::config::{BackoffConfig, MqttConfig};
use crate::io::{Jitter, delay};
use crate::model::EntityState;
use crate::mqtt::{Topics, status};
use crate::sync::lock;
use crate::wal::{Outbox, Record};

/// Publishes awaiting their PUBACK at once.
const INFLIGHT: u16 = 100;
/// The most a Sparkplug payload grows when the edge node sets its seq (a
/// protobuf varint field).
const SPARKPLUG_SEQ_FIELD: usize = 11;
/// Room kept in the window for statuses.
const REPORT_WINDOW: usize = INFLIGHT as usize - 10;
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
/// A connection up this long ends the backoff: its loss is a new outage.
const STABLE_AFTER: Duration = Duration::from_secs(30);
/// The largest packet the engine reads: the most MQTT allows. A downlink
/// message above the engine's own limits is read and refused with a reply;
/// a smaller read limit would end the connection on it, and the broker would
/// deliver it again on every connection.
const MAX_INCOMING_PACKET: usize = 268_435_455;

pub(super) struct Publisher {
    options: MqttOptions,
    qos: QoS,
    status_topic: String,
    /// The largest packet the broker takes (`collector.mqtt.maxPacketKb`).
    max_packet: usize,
    outbox: Arc<Outbox>,
    stats: Arc<UplinkStats>,
    /// Where downlink messages go, and the filters subscribed for them.
    downlink: Option<(mpsc::UnboundedSender<Downlink>, Vec<String>)>,
    /// Whether the edge node takes an NCMD (from a trusted broker only).
    node_commands: bool,
}

/// What comes to the publisher besides the outbox: statuses, tracked messages,
/// and the acknowledgements of downlink messages from those who handled them.
struct Inbox {
    statuses: mpsc::UnboundedReceiver<(String, Vec<u8>)>,
    /// For the Sparkplug edge node only.
    node_events: mpsc::UnboundedReceiver<NodeEvent>,
    tracked: mpsc::UnboundedReceiver<Tracked>,
    acks: mpsc::UnboundedReceiver<Ack>,
    ack_sender: mpsc::UnboundedSender<Ack>,
}

impl Publisher {
    pub(super) fn new(
        (config, client_id): (&MqttConfig, &str),
        outbox: Arc<Outbox>,
        stats: Arc<UplinkStats>,
        downlink: Option<DownlinkRoute>,
        sparkplug: bool,
    ) -> Self {
        let topics = Topics::new(&config.topic_prefix);
        let status_topic = topics.collector_status(client_id);
        let mut options = MqttOptions::new(client_id, &config.broker_host, config.broker_port);
        let max_packet = config.max_packet_bytes();
        // Invariant S1: a persistent session, so the broker keeps the downlink
        // messages that come while the engine is away (but a Sparkplug edge node
        // starts clean, as the specification requires: see docs/sparkplug.md);
        // S2: they are acknowledged by hand, once handled.
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
            qos: if config.qos == 0 {
                QoS::AtMostOnce
            } else {
                QoS::AtLeastOnce
            },
            status_topic,
            max_packet,
            outbox,
            stats,
            node_commands: downlink.as_ref().is_some_and(|d| d.node_commands),
            downlink: downlink.map(|d| (d.to, topics.downlink_filters().to_vec())),
        }
    }

    pub(super) async fn run(
        self,
        (statuses, node_events): (
            mpsc::UnboundedReceiver<(String, Vec<u8>)>,
            mpsc::UnboundedReceiver<NodeEvent>,
        ),
        tracked: mpsc::UnboundedReceiver<Tracked>,
        mut node: Option<EdgeNode>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        // Latest status per topic, sent on (re)connect.
        let mut latest: HashMap<String, Vec<u8>> = HashMap::new();
        let (ack_sender, acks) = mpsc::unbounded_channel();
        let mut inbox = Inbox {
            statuses,
            node_events,
            tracked,
            acks,
            ack_sender,
        };
        let mut number = 0;
        // Connection attempts in a row that never came up.
        let mut failed: u32 = 0;
        // Attempts since the last connection that stayed up.
        let mut attempts: u32 = 0;
        let mut jitter = Jitter::new(u64::try_from(now_ms()).unwrap_or(1));
        let mut refusals = Refusals::default();
        loop {
            number += 1;
            let mut options = self.options.clone();
            if let Some(node) = &mut node {
                // P1: every connection has the next bdSeq, in its will and NBIRTH.
                options.set_last_will(node.connecting());
            }
            let eventloop = EventLoop::new(options, QUEUE_CAPACITY);
            let mut session = Session {
                outbound: Outbound::new(QUEUE_CAPACITY, INFLIGHT, self.max_packet),
                number,
                connected: false,
                connected_at: None,
                cursor: None,
                held_back: false,
                queued: VecDeque::new(),
                inflight: HashMap::new(),
                acked: Vec::new(),
                set_aside: Vec::new(),
                refusals: std::mem::take(&mut refusals),
                node: node.take(),
                pending: VecDeque::new(),
            };
            let stop = self
                .connection(
                    &mut session,
                    eventloop,
                    &mut inbox,
                    &mut latest,
                    &mut shutdown,
                )
                .await;
            if !stop {
                self.refused(&mut session);
            }
            self.release(&mut session).await;
            node = session.node.take();
            refusals = std::mem::take(&mut session.refusals);
            if stop {
                return;
            }
            if session.connected {
                failed = 0;
            } else {
                failed = failed.saturating_add(1);
                // A connection that was up logs its loss; attempts that never came
                // up would otherwise go unnoticed at the default level. Logged at
                // the 1st, 2nd, 4th, 8th... failure in a row: bounded, and a broker
                // that stays away is seen to.
                if failed.is_power_of_two() {
                    let (host, port) = self.options.broker_address();
                    tracing::warn!(
                        error = %lock(&self.stats.last_error),
                        broker = %format!("{host}:{port}"),
                        attempts = failed,
                        "cannot reach the MQTT broker; retrying (reports wait in the outbox)"
                    );
                }
            }
            let stable = session
                .connected_at
                .is_some_and(|at| at.elapsed() >= STABLE_AFTER);
            attempts = if stable {
                1
            } else {
                attempts.saturating_add(1)
            };
            tokio::select! {
                _ = tokio::time::sleep(delay(&RECONNECT, attempts, jitter.sample())) => {}
                _ = shutdown.changed() => return,
            }
        }
    }

    /// A connection dropped: the record it dropped on, if the broker refused it
    /// time after time, is set aside (invariant 9 of `docs/wal.md`).
    fn refused(&self, session: &mut Session) {
        let oldest = session.oldest_inflight();
        let Some(id) = session.refusals.connection_lost(oldest, Instant::now()) else {
            return;
        };
        match self.outbox.read_after(id.checked_sub(1), 1) {
            Ok(mut records) if records.first().is_some_and(|r| r.id == id) => {
                let reason = format!(
                    "the broker closed the connection {REFUSED_AFTER} times in a row right after this message was sent, before acknowledging it: it refuses the message (too big for its packet limit, or not allowed)"
                );
                session.set_aside.push((records.remove(0), reason));
            }
            Ok(_) => {}
            Err(error) => tracing::error!(%error, "cannot read the WAL"),
        }
    }

    /// Drives one connection until it fails (false) or shutdown (true).
    async fn connection(
        &self,
        session: &mut Session,
        mut eventloop: EventLoop,
        inbox: &mut Inbox,
        latest: &mut HashMap<String, Vec<u8>>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> bool {
        let mut pushed = self.outbox.subscribe();
        let mut release = tokio::time::interval(RELEASE_EVERY);
        let mut devices_changed = session.node.as_ref().and_then(EdgeNode::changes);
        loop {
            tokio::select! {
                event = eventloop.poll() => match event {
                    Ok(event) => self.on_event(session, event, inbox, latest),
                    Err(error) => {
                        self.lost(&error);
                        return false;
                    }
                },
                _ = pushed.changed() => self.fill(session),
                Some((topic, payload)) = inbox.statuses.recv() => {
                    if session.connected {
                        self.send_status(session, topic, payload);
                    } else {
                        latest.insert(topic, payload);
                    }
                }
                Some(event) = inbox.node_events.recv() => {
                    self.on_node_event(session, event);
                    if devices_changed.is_none() {
                        devices_changed = session.node.as_ref().and_then(EdgeNode::changes);
                    }
                }
                () = changed(&mut devices_changed) => {
                    if let Some(node) = &mut session.node {
                        let births = node.rebirth_devices();
                        self.send_node(session, births);
                    }
                }
                Some((topic, payload, done)) = inbox.tracked.recv() => {
                    self.send_tracked(session, topic, payload, done);
                }
                Some((number, message)) = inbox.acks.recv() => {
                    // Invariant S2: an acknowledgement of an earlier connection is
                    // not sent; the broker delivers that message again.
                    if number == session.number
                        && let Err(refused) = session.outbound.ack(&message)
                    {
                        tracing::warn!(%refused, topic = %message.topic, "cannot acknowledge a downlink message; the broker delivers it again");
                    }
                }
                _ = release.tick() => self.release(session).await,
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        self.goodbye(session, eventloop).await;
                        return true;
                    }
                }
            }
            // What the event queued goes out in one write. The client queues
            // events of its own as it goes (a publish numbered for each one
            // written, the rest of the packets one read brought): handled here,
            // in this turn, not one turn of the loop above each.
            loop {
                if let Err(error) = session.outbound.write(&mut eventloop).await {
                    self.lost(&error);
                    return false;
                }
                let Some(event) = eventloop.state.events.pop_front() else {
                    break;
                };
                self.on_event(session, event, inbox, latest);
            }
        }
    }

    /// Handles one event of the connection.
    fn on_event(
        &self,
        session: &mut Session,
        event: Event,
        inbox: &Inbox,
        latest: &mut HashMap<String, Vec<u8>>,
    ) {
        match event {
            Event::Incoming(Incoming::ConnAck(_)) => {
                session.connected = true;
                session.connected_at = Some(Instant::now());
                self.stats.set_connected(true);
                self.stats.connects.inc();
                tracing::info!("connected to the MQTT broker");
                // Subscribe on every connection: a broker that lost the
                // session (or never had it) gets the subscriptions again.
                self.subscribe(session);
                if let Some(node) = &mut session.node {
                    let births = node.birth();
                    self.send_node(session, births);
                } else {
                    self.send_status(
                        session,
                        self.status_topic.clone(),
                        status(EntityState::Online, now_ms()),
                    );
                    for (topic, payload) in latest.drain() {
                        self.send_status(session, topic, payload);
                    }
                }
                // Invariant 3: every connection starts from the oldest record.
                session.cursor = None;
                self.fill(session);
            }
            Event::Outgoing(Outgoing::Publish(pkid)) => {
                match session.queued.pop_front() {
                    Some(Queued::Record(id)) if self.qos == QoS::AtMostOnce => {
                        session.acknowledged(&self.outbox, id);
                    }
                    Some(Queued::Record(id)) => {
                        session
                            .inflight
                            .insert(pkid, Inflight::Record(id, Instant::now()));
                    }
                    Some(Queued::Tracked(done)) => {
                        session.inflight.insert(pkid, Inflight::Tracked(done));
                    }
                    Some(Queued::Status) | None => {}
                }
                if !session.pending.is_empty() {
                    self.fill(session);
                }
            }
            Event::Incoming(Incoming::Publish(message)) => {
                if let Some(node) = session
                    .node
                    .as_mut()
                    .filter(|n| n.topics().node_command() == message.topic)
                {
                    if self.node_commands {
                        let births = node.node_command(&message.payload);
                        self.send_node(session, births);
                    } else {
                        tracing::warn!(
                            "an NCMD refused: Sparkplug commands carry no signature, and the \
                             broker is not trusted with them (collector.downlink.trustedBroker)"
                        );
                    }
                    if let Err(refused) = session.outbound.ack(&message) {
                        tracing::warn!(%refused, "cannot acknowledge an NCMD");
                    }
                } else if let Some((downlink, _)) = &self.downlink {
                    // The receiver lives as long as the engine.
                    let _ = downlink.send(Downlink::new(
                        session.number,
                        message,
                        inbox.ack_sender.clone(),
                    ));
                } else if let Err(refused) = session.outbound.ack(&message) {
                    tracing::warn!(%refused, "cannot acknowledge a message nobody handles");
                }
            }
            Event::Incoming(Incoming::PubAck(ack)) => {
                self.stats.acknowledged();
                // Invariant 2: a record is released only after its PUBACK.
                if let Some(inflight) = session.inflight.remove(&ack.pkid) {
                    session.settle(&self.outbox, inflight);
                }
                if session.held_back {
                    self.fill(session);
                }
            }
            _ => {}
        }
    }

    /// The connection failed: counted, and logged once per outage.
    fn lost(&self, error: &rumqttc::ConnectionError) {
        if self.stats.set_connected(false) {
            tracing::warn!(%error, "lost the MQTT broker");
        }
        *lock(&self.stats.last_error) = error.to_string();
    }

    /// Subscribes to the downlink, and the edge node to its commands.
    fn subscribe(&self, session: &mut Session) {
        let own = self
            .downlink
            .iter()
            .flat_map(|(_, filters)| filters.iter().cloned());
        let node = session.node.iter().flat_map(|node| {
            let topics = node.topics();
            [topics.node_command(), topics.device_commands()]
        });
        for filter in own.chain(node) {
            if let Err(refused) = session.outbound.subscribe(&filter, QoS::AtLeastOnce) {
                tracing::warn!(%refused, %filter, "cannot subscribe to the downlink");
            }
        }
    }

    /// What the collector tells the edge node: its devices, a lease change.
    fn on_node_event(&self, session: &mut Session, event: NodeEvent) {
        let Some(node) = &mut session.node else {
            return;
        };
        match event {
            NodeEvent::Births(births) => {
                node.set_births(births);
                if session.connected && !node.is_born() {
                    let births = node.birth();
                    self.send_node(session, births);
                    self.fill(session);
                }
            }
            NodeEvent::DeviceState { device_id, offline } => {
                let messages = node.device_state(&device_id, offline);
                self.send_node(session, messages);
            }
        }
    }

    /// Queues the edge node's messages behind what is pending, and flushes.
    fn send_node(&self, session: &mut Session, messages: Vec<NodeMessage>) {
        session
            .pending
            .extend(messages.into_iter().map(|m| Pending {
                queued: Queued::Status,
                topic: m.topic,
                qos: m.qos,
                payload: m.payload.into(),
            }));
        self.flush(session);
    }

    /// Queues pending publishes for the connection, in order, while there is
    /// room; true when none is left. One that finds the queue full stays first:
    /// its seq is set, so it goes out as it is, before anything later.
    fn flush(&self, session: &mut Session) -> bool {
        while let Some(Pending {
            queued,
            topic,
            qos,
            payload,
        }) = session.pending.pop_front()
        {
            match session.outbound.publish(topic, qos, false, payload) {
                Ok(()) => {
                    if matches!(queued, Queued::Record(_)) {
                        self.stats.published.inc();
                        if qos == QoS::AtLeastOnce {
                            self.stats.queued();
                        }
                    }
                    session.queued.push_back(queued);
                }
                Err(Refused::Full(publish)) => {
                    session.pending.push_front(Pending {
                        queued,
                        topic: publish.topic,
                        qos,
                        payload: publish.payload,
                    });
                    return false;
                }
                Err(refused) => {
                    // Not a publish any broker takes (the edge node's births
                    // and deaths; its records are checked before they get here).
                    tracing::error!(%refused, "a publish refused");
                    self.stats.dropped.inc();
                }
            }
        }
        true
    }

    /// Queues records after the cursor while the window has room.
    fn fill(&self, session: &mut Session) {
        if !session.connected || session.node.as_ref().is_some_and(|n| !n.is_born()) {
            return;
        }
        session.held_back = true;
        if !self.flush(session) {
            return;
        }
        let window = session.refusals.window(REPORT_WINDOW);
        loop {
            let used = session.queued.len() + session.inflight.len();
            if used >= window {
                return;
            }
            let records = match self.outbox.read_after(session.cursor, window - used) {
                Ok(records) => records,
                Err(error) => {
                    tracing::error!(%error, "cannot read the WAL");
                    return;
                }
            };
            if records.is_empty() {
                session.held_back = false;
                return;
            }
            for record in records {
                let sent = if session.node.is_some() {
                    self.send_sparkplug(session, record)
                } else {
                    self.send_record(session, record)
                };
                if !sent {
                    return;
                }
            }
        }
    }

    /// Queues one record; false when it could not (the record
    /// stays in the log and goes out later).
    fn send_record(&self, session: &mut Session, record: Record) -> bool {
        if let Err(refused) = session.outbound.fits(
            &record.message.topic,
            record.message.payload.len(),
            self.qos,
        ) {
            session.cursor = Some(record.id);
            session.set_aside.push((record, refused.to_string()));
            return true;
        }
        let message = record.message;
        match session
            .outbound
            .publish(message.topic, self.qos, message.retain, message.payload)
        {
            Ok(()) => {
                session.queued.push_back(Queued::Record(record.id));
                session.cursor = Some(record.id);
                self.stats.published.inc();
                if self.qos == QoS::AtLeastOnce {
                    self.stats.queued();
                }
                true
            }
            Err(_) => {
                self.stats.dropped.inc();
                false
            }
        }
    }

    /// Hands one record to the edge node, which sets its seq and may birth its
    /// device first, then queues it; false when the queue is full
    /// (the rest waits as pending).
    fn send_sparkplug(&self, session: &mut Session, record: Record) -> bool {
        session.cursor = Some(record.id);
        // The edge node only gives the payload its seq: checked before it takes
        // one, with room for the largest seq field.
        if let Err(refused) = session.outbound.fits(
            &record.message.topic,
            record.message.payload.len() + SPARKPLUG_SEQ_FIELD,
            self.qos,
        ) {
            session.set_aside.push((record, refused.to_string()));
            return true;
        }
        let Some(node) = &mut session.node else {
            return true;
        };
        let Some((births, message)) = node.record(record.message) else {
            session.acknowledged(&self.outbox, record.id);
            return true;
        };
        session.pending.extend(births.into_iter().map(|m| Pending {
            queued: Queued::Status,
            topic: m.topic,
            qos: m.qos,
            payload: m.payload.into(),
        }));
        session.pending.push_back(Pending {
            queued: Queued::Record(record.id),
            topic: message.topic,
            qos: self.qos,
            payload: message.payload,
        });
        self.flush(session)
    }

    fn send_status(&self, session: &mut Session, topic: String, payload: Vec<u8>) {
        if session
            .outbound
            .publish(topic, QoS::AtLeastOnce, true, payload)
            .is_ok()
        {
            session.queued.push_back(Queued::Status);
        }
    }

    /// Publishes a tracked message with QoS 1; while disconnected (or when the
    /// queue is full) `done` is dropped at once, which tells the sender
    /// it was not delivered.
    fn send_tracked(
        &self,
        session: &mut Session,
        topic: String,
        payload: Vec<u8>,
        done: oneshot::Sender<()>,
    ) {
        if !session.connected {
            return;
        }
        if session
            .outbound
            .publish(topic, QoS::AtLeastOnce, false, payload)
            .is_ok()
        {
            session.queued.push_back(Queued::Tracked(done));
            self.stats.published.inc();
            self.stats.queued();
        }
    }

    async fn release(&self, session: &mut Session) {
        for (record, reason) in std::mem::take(&mut session.set_aside) {
            let outbox = Arc::clone(&self.outbox);
            let set_aside =
                tokio::task::spawn_blocking(move || outbox.set_aside(record, &reason)).await;
            if !matches!(set_aside, Ok(Ok(()))) {
                // It stays where it was and is met again on the next connection.
                tracing::error!("setting a message aside as a dead letter failed");
            }
        }
        if session.acked.is_empty() {
            return;
        }
        let ids = std::mem::take(&mut session.acked);
        let outbox = Arc::clone(&self.outbox);
        let released = tokio::task::spawn_blocking(move || outbox.release(&ids)).await;
        if !matches!(released, Ok(Ok(()))) {
            // The records stay in the log and are published again later (duplicates
            // are allowed: consumers drop them by seq).
            tracing::error!("releasing acknowledged WAL records failed");
        }
    }

    /// Publishes the offline status and disconnects cleanly, so the broker does not
    /// send the Last Will.
    async fn goodbye(&self, session: &mut Session, mut eventloop: EventLoop) {
        if !session.connected {
            return;
        }
        match &session.node {
            Some(node) => {
                let death = node.death();
                if session
                    .outbound
                    .publish(death.topic, death.qos, false, death.payload)
                    .is_ok()
                {
                    tracing::info!("sent the NDEATH before disconnecting");
                }
            }
            None => {
                let _ = session.outbound.publish(
                    self.status_topic.clone(),
                    QoS::AtLeastOnce,
                    true,
                    status(EntityState::Offline, now_ms()),
                );
            }
        }
        let _ = session.outbound.disconnect();
        if session.outbound.write(&mut eventloop).await.is_err() {
            return;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while tokio::time::Instant::now() < deadline {
            match tokio::time::timeout_at(deadline, eventloop.poll()).await {
                Ok(Ok(Event::Incoming(Incoming::PubAck(ack)))) => {
                    if let Some(inflight) = session.inflight.remove(&ack.pkid) {
                        session.settle(&self.outbox, inflight);
                    }
                    // A full window held the last words back; this PUBACK made room.
                    if session.outbound.write(&mut eventloop).await.is_err() {
                        break;
                    }
                }
                Ok(Ok(Event::Outgoing(Outgoing::Disconnect))) | Ok(Err(_)) | Err(_) => break,
                Ok(Ok(_)) => {}
            }
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
