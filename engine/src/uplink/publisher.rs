//! The publisher: owns the MQTT connection, publishes the outbox's records in log
//! order, maps each PUBACK back to its record and releases it.
//!
//! Each connection gets a fresh client and event loop, so the client never
//! retransmits on its own: after a reconnect the publisher starts again from the
//! oldest record in the log (invariant 3 of `docs/wal.md`), which resends exactly
//! what was not acknowledged, in order, before newer records.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use rumqttc::{AsyncClient, Event, EventLoop, Incoming, LastWill, MqttOptions, Outgoing, QoS};
use tokio::sync::{mpsc, oneshot, watch};

use super::message::{Ack, Downlink, Tracked};
use super::stats::UplinkStats;
use crate::clock::now_ms;
use crate::config::MqttConfig;
use crate::model::EntityState;
use crate::mqtt::{Topics, status};
use crate::sync::lock;
use crate::wal::Outbox;

/// Publishes awaiting their PUBACK at once.
const INFLIGHT: u16 = 100;
/// Room kept in the window for statuses.
const REPORT_WINDOW: usize = INFLIGHT as usize - 10;
/// Requests the client queues.
const QUEUE_CAPACITY: usize = 1000;
/// How often acknowledged records are released in one batch.
const RELEASE_EVERY: Duration = Duration::from_millis(50);
/// Longest wait between reconnect attempts to the broker.
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(5);

pub(super) struct Publisher {
    options: MqttOptions,
    qos: QoS,
    status_topic: String,
    outbox: Arc<Outbox>,
    stats: Arc<UplinkStats>,
    /// Where downlink messages go, and the filters subscribed for them.
    downlink: Option<(mpsc::UnboundedSender<Downlink>, [String; 3])>,
}

/// What comes to the publisher besides the outbox: statuses, tracked messages,
/// and the acknowledgements of downlink messages from those who handled them.
struct Inbox {
    statuses: mpsc::UnboundedReceiver<(String, Vec<u8>)>,
    tracked: mpsc::UnboundedReceiver<Tracked>,
    acks: mpsc::UnboundedReceiver<Ack>,
    ack_sender: mpsc::UnboundedSender<Ack>,
}

/// One connection's bookkeeping.
struct Session {
    client: AsyncClient,
    /// Which connection this is: an acknowledgement goes out on the connection
    /// its message came in on only (packet ids are per connection).
    number: u64,
    connected: bool,
    /// The last record handed to the client.
    cursor: Option<u64>,
    /// The last fill stopped with records left in the log (the window or the
    /// client's queue was full, or the log could not be read): a PUBACK, which
    /// makes room, fills again. Otherwise only a commit brings anything new.
    held_back: bool,
    /// Per publish handed to the client, in order, what it carries. The event loop
    /// reports outgoing publishes in the same order.
    queued: VecDeque<Queued>,
    /// Packet id -> what awaits its PUBACK.
    inflight: HashMap<u16, Inflight>,
    acked: Vec<u64>,
}

/// What a publish handed to the client carries.
enum Queued {
    Record(u64),
    Status,
    /// A tracked message and whom to tell of its PUBACK.
    Tracked(oneshot::Sender<()>),
}

/// A publish awaiting its PUBACK.
enum Inflight {
    Record(u64),
    Tracked(oneshot::Sender<()>),
}

impl Inflight {
    /// The PUBACK arrived: a record is released later, a tracked sender told now.
    fn acknowledged(self, acked: &mut Vec<u64>) {
        match self {
            Inflight::Record(id) => acked.push(id),
            Inflight::Tracked(done) => {
                // The sender may have stopped waiting; the ack still happened.
                let _ = done.send(());
            }
        }
    }
}

impl Publisher {
    pub(super) fn new(
        (config, client_id): (&MqttConfig, &str),
        outbox: Arc<Outbox>,
        stats: Arc<UplinkStats>,
        downlink: Option<mpsc::UnboundedSender<Downlink>>,
    ) -> Self {
        let topics = Topics::new(&config.topic_prefix);
        let status_topic = topics.collector_status(client_id);
        let mut options = MqttOptions::new(client_id, &config.broker_host, config.broker_port);
        // Invariant S1: a persistent session, so the broker keeps the downlink
        // messages that come while the engine is away; S2: they are acknowledged
        // by hand, once handled.
        options
            .set_keep_alive(Duration::from_secs(u64::from(config.keep_alive_sec.max(1))))
            .set_clean_session(false)
            .set_manual_acks(true)
            .set_inflight(INFLIGHT)
            .set_request_channel_capacity(QUEUE_CAPACITY)
            .set_max_packet_size(1 << 20, 1 << 20)
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
            outbox,
            stats,
            downlink: downlink.map(|tx| (tx, topics.downlink_filters())),
        }
    }

    pub(super) async fn run(
        self,
        statuses: mpsc::UnboundedReceiver<(String, Vec<u8>)>,
        tracked: mpsc::UnboundedReceiver<Tracked>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        // Latest status per topic, sent on (re)connect.
        let mut latest: HashMap<String, Vec<u8>> = HashMap::new();
        let (ack_sender, acks) = mpsc::unbounded_channel();
        let mut inbox = Inbox {
            statuses,
            tracked,
            acks,
            ack_sender,
        };
        let mut delay = Duration::from_millis(100);
        let mut number = 0;
        loop {
            number += 1;
            let (client, eventloop) = AsyncClient::new(self.options.clone(), QUEUE_CAPACITY);
            let mut session = Session {
                client,
                number,
                connected: false,
                cursor: None,
                held_back: false,
                queued: VecDeque::new(),
                inflight: HashMap::new(),
                acked: Vec::new(),
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
            self.release(&mut session).await;
            if stop {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = shutdown.changed() => return,
            }
            delay = (delay * 2).min(MAX_RECONNECT_DELAY);
            if session.connected {
                delay = Duration::from_millis(100);
            }
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
        let mut committed = self.outbox.subscribe();
        let mut release = tokio::time::interval(RELEASE_EVERY);
        loop {
            tokio::select! {
                event = eventloop.poll() => match event {
                    Ok(Event::Incoming(Incoming::ConnAck(_))) => {
                        session.connected = true;
                        self.stats.set_connected(true);
                        self.stats.connects.inc();
                        tracing::info!("connected to the MQTT broker");
                        self.send_status(session, self.status_topic.clone(), status(EntityState::Online, now_ms()));
                        for (topic, payload) in latest.drain() {
                            self.send_status(session, topic, payload);
                        }
                        // Subscribe on every connection: a broker that lost the
                        // session (or never had it) gets the subscriptions again.
                        if let Some((_, filters)) = &self.downlink {
                            for filter in filters {
                                if let Err(error) = session.client.try_subscribe(filter, QoS::AtLeastOnce) {
                                    tracing::warn!(%error, %filter, "cannot subscribe to the downlink");
                                }
                            }
                        }
                        // Invariant 3: every connection starts from the oldest record.
                        session.cursor = None;
                        self.fill(session);
                    }
                    Ok(Event::Outgoing(Outgoing::Publish(pkid))) => {
                        match session.queued.pop_front() {
                            Some(Queued::Record(id)) if self.qos == QoS::AtMostOnce => {
                                session.acked.push(id);
                            }
                            Some(Queued::Record(id)) => {
                                session.inflight.insert(pkid, Inflight::Record(id));
                            }
                            Some(Queued::Tracked(done)) => {
                                session.inflight.insert(pkid, Inflight::Tracked(done));
                            }
                            Some(Queued::Status) | None => {}
                        }
                    }
                    Ok(Event::Incoming(Incoming::Publish(message))) => {
                        if let Some((downlink, _)) = &self.downlink {
                            // The receiver lives as long as the engine.
                            let _ = downlink.send(Downlink::new(session.number, message, inbox.ack_sender.clone()));
                        } else if let Err(error) = session.client.try_ack(&message) {
                            tracing::warn!(%error, "cannot acknowledge a message nobody handles");
                        }
                    }
                    Ok(Event::Incoming(Incoming::PubAck(ack))) => {
                        self.stats.acknowledged();
                        // Invariant 2: a record is released only after its PUBACK.
                        if let Some(inflight) = session.inflight.remove(&ack.pkid) {
                            inflight.acknowledged(&mut session.acked);
                        }
                        if session.held_back {
                            self.fill(session);
                        }
                    }
                    Ok(_) => {}
                    Err(error) => {
                        if self.stats.set_connected(false) {
                            tracing::warn!(%error, "lost the MQTT broker");
                        }
                        *lock(&self.stats.last_error) = error.to_string();
                        return false;
                    }
                },
                _ = committed.changed() => self.fill(session),
                Some((topic, payload)) = inbox.statuses.recv() => {
                    if session.connected {
                        self.send_status(session, topic, payload);
                    } else {
                        latest.insert(topic, payload);
                    }
                }
                Some((topic, payload, done)) = inbox.tracked.recv() => {
                    self.send_tracked(session, topic, payload, done);
                }
                Some((number, message)) = inbox.acks.recv() => {
                    // Invariant S2: an acknowledgement of an earlier connection is
                    // not sent; the broker delivers that message again.
                    if number == session.number
                        && let Err(error) = session.client.try_ack(&message)
                    {
                        tracing::warn!(%error, topic = %message.topic, "cannot acknowledge a downlink message; the broker delivers it again");
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
        }
    }

    /// Hands records after the cursor to the client while the window has room.
    fn fill(&self, session: &mut Session) {
        if !session.connected {
            return;
        }
        session.held_back = true;
        loop {
            let used = session.queued.len() + session.inflight.len();
            if used >= REPORT_WINDOW {
                return;
            }
            let records = match self
                .outbox
                .log()
                .read_after(session.cursor, REPORT_WINDOW - used)
            {
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
                let message = record.message;
                match session.client.try_publish(
                    message.topic,
                    self.qos,
                    message.retain,
                    message.payload,
                ) {
                    Ok(()) => {
                        session.queued.push_back(Queued::Record(record.id));
                        session.cursor = Some(record.id);
                        self.stats.published.inc();
                        if self.qos == QoS::AtLeastOnce {
                            self.stats.queued();
                        }
                    }
                    Err(_) => {
                        // The record stays in the log and goes out later.
                        self.stats.dropped.inc();
                        return;
                    }
                }
            }
        }
    }

    fn send_status(&self, session: &mut Session, topic: String, payload: Vec<u8>) {
        if session
            .client
            .try_publish(topic, QoS::AtLeastOnce, true, payload)
            .is_ok()
        {
            session.queued.push_back(Queued::Status);
        }
    }

    /// Publishes a tracked message with QoS 1; while disconnected (or when the
    /// client's queue is full) `done` is dropped at once, which tells the sender
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
            .client
            .try_publish(topic, QoS::AtLeastOnce, false, payload)
            .is_ok()
        {
            session.queued.push_back(Queued::Tracked(done));
            self.stats.published.inc();
            self.stats.queued();
        }
    }

    async fn release(&self, session: &mut Session) {
        if session.acked.is_empty() {
            return;
        }
        let ids = std::mem::take(&mut session.acked);
        let log = Arc::clone(self.outbox.log());
        let released = tokio::task::spawn_blocking(move || log.release(&ids)).await;
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
        let _ = session.client.try_publish(
            &self.status_topic,
            QoS::AtLeastOnce,
            true,
            status(EntityState::Offline, now_ms()),
        );
        let _ = session.client.try_disconnect();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while tokio::time::Instant::now() < deadline {
            match tokio::time::timeout_at(deadline, eventloop.poll()).await {
                Ok(Ok(Event::Incoming(Incoming::PubAck(ack)))) => {
                    if let Some(inflight) = session.inflight.remove(&ack.pkid) {
                        inflight.acknowledged(&mut session.acked);
                    }
                }
                Ok(Ok(Event::Outgoing(Outgoing::Disconnect))) | Ok(Err(_)) | Err(_) => break,
                Ok(Ok(_)) => {}
            }
        }
    }
}
