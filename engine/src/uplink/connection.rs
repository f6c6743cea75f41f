//! One connection to the broker, as a state machine: what was queued for it,
//! which packet carries what, what awaits its PUBACK, how far through the
//! outbox it is (the cursor) and how much it may have in flight (the window).
//! The publisher feeds it the connection's events ([`Connection::up`],
//! [`Connection::published`], [`Connection::puback`]) and writes what it
//! queued; the bookkeeping lives here alone.
//!
//! Every connection starts from the oldest record in the outbox (WAL-3); a
//! record leaves the log only after its PUBACK (WAL-2), in a batch the publisher releases ([`Connection::take_release`]).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use rumqttc::{Publish, QoS};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::outbound::{NotQueued, Outbound};
use super::refusals::{REFUSED_AFTER, Refusals};
use super::sparkplug::{EdgeNode, Outgoing as NodeMessage};
use super::stats::UplinkStats;
use crate::wal::{Outbox, Record};

/// Publishes awaiting their PUBACK at once.
pub(super) const INFLIGHT: u16 = 100;
/// Room kept in the window for statuses and tracked messages.
const REPORT_WINDOW: usize = INFLIGHT as usize - 10;
/// The most a Sparkplug payload grows when the edge node sets its seq (a
/// protobuf varint field).
const SPARKPLUG_SEQ_FIELD: usize = 11;

/// Where a connection's records come from and go, the same for every connection.
#[derive(Clone)]
pub(super) struct Route {
    pub(super) outbox: Arc<Outbox>,
    pub(super) stats: Arc<UplinkStats>,
    /// The QoS of reports.
    pub(super) qos: QoS,
}

/// What outlives a connection and moves on to the next one.
#[derive(Default)]
pub(super) struct Carried {
    /// The record the broker may be refusing.
    pub(super) refusals: Refusals,
    /// The Sparkplug edge node (`payload: sparkplug-b`).
    pub(super) node: Option<EdgeNode>,
}

/// Writes to the log a connection leaves for the publisher to do.
#[derive(Default)]
pub(super) struct Release {
    /// Records that can never be sent, and why: set aside (WAL-9).
    pub(super) set_aside: Vec<(Record, String)>,
    /// Acknowledged records the log holds.
    pub(super) acked: Vec<u64>,
}

/// How a connection ended.
pub(super) struct Ended {
    pub(super) carried: Carried,
    pub(super) release: Release,
    /// When the broker had accepted it, if it did.
    pub(super) came_up: Option<Instant>,
}

/// One connection's bookkeeping.
pub(super) struct Connection {
    route: Route,
    /// Which connection this is: an acknowledgement goes out on the connection
    /// its message came in on only (packet ids are per connection).
    number: u64,
    /// What goes to the broker next.
    outbound: Outbound,
    /// When the broker accepted the connection (CONNACK).
    came_up: Option<Instant>,
    /// The last record queued.
    cursor: Option<u64>,
    /// The last fill stopped with records left in the outbox (the window or the
    /// queue was full, or the log could not be read): a PUBACK, which makes
    /// room, fills again. Otherwise only a push brings anything new.
    held_back: bool,
    /// Per publish queued, in order, what it carries. The client numbers the
    /// publishes it writes in the same order.
    queued: VecDeque<Queued>,
    /// Packet id -> what awaits its PUBACK.
    inflight: HashMap<u16, Inflight>,
    release: Release,
    carried: Carried,
    /// Publishes of the edge node the queue had no room for yet.
    pending: VecDeque<Pending>,
}

/// A publish of the edge node waiting for room in the queue.
struct Pending {
    queued: Queued,
    topic: String,
    qos: QoS,
    payload: Bytes,
}

/// What a queued publish carries.
enum Queued {
    Record(u64),
    Status,
    /// A tracked message and whom to tell of its PUBACK.
    Tracked(oneshot::Sender<()>),
}

/// A publish awaiting its PUBACK.
enum Inflight {
    /// A record, and when it was written to the connection.
    Record(u64, Instant),
    Tracked(oneshot::Sender<()>),
}

impl Connection {
    pub(super) fn new(number: u64, outbound: Outbound, route: Route, carried: Carried) -> Self {
        Self {
            route,
            number,
            outbound,
            came_up: None,
            cursor: None,
            held_back: false,
            queued: VecDeque::new(),
            inflight: HashMap::new(),
            release: Release::default(),
            carried,
            pending: VecDeque::new(),
        }
    }

    pub(super) fn number(&self) -> u64 {
        self.number
    }

    /// Whether the broker accepted the connection.
    pub(super) fn is_up(&self) -> bool {
        self.came_up.is_some()
    }

    /// What goes to the broker next, for the publisher to write (and to queue
    /// acknowledgements and subscriptions on).
    pub(super) fn outbound(&mut self) -> &mut Outbound {
        &mut self.outbound
    }

    /// The Sparkplug edge node, with `payload: sparkplug-b`.
    pub(super) fn node(&mut self) -> Option<&mut EdgeNode> {
        self.carried.node.as_mut()
    }

    /// The broker accepted the connection at `now`: it starts from the oldest
    /// record (WAL-3) once the publisher fills it.
    pub(super) fn up(&mut self, now: Instant) {
        self.came_up = Some(now);
        self.cursor = None;
    }

    /// The client wrote the next queued publish as packet `pkid` at `now`.
    pub(super) fn published(&mut self, pkid: u16, now: Instant) {
        match self.queued.pop_front() {
            Some(Queued::Record(id)) if self.route.qos == QoS::AtMostOnce => self.acknowledged(id),
            Some(Queued::Record(id)) => {
                self.inflight.insert(pkid, Inflight::Record(id, now));
            }
            Some(Queued::Tracked(done)) => {
                self.inflight.insert(pkid, Inflight::Tracked(done));
            }
            Some(Queued::Status) | None => {}
        }
        if !self.pending.is_empty() {
            self.fill();
        }
    }

    /// The PUBACK of packet `pkid` came: what it carried is settled, and the
    /// room it made filled.
    pub(super) fn puback(&mut self, pkid: u16) {
        self.settle(pkid);
        if self.held_back {
            self.fill();
        }
    }

    /// The PUBACK of packet `pkid` came: a tracked sender is told now, a record
    /// acknowledged (WAL-2). Nothing new is queued.
    pub(super) fn settle(&mut self, pkid: u16) {
        match self.inflight.remove(&pkid) {
            Some(Inflight::Record(id, _)) => {
                self.carried.refusals.acknowledged(id);
                self.acknowledged(id);
            }
            Some(Inflight::Tracked(done)) => {
                // The sender may have stopped waiting; the ack still happened.
                let _ = done.send(());
            }
            None => {}
        }
    }

    /// Record `id` needs no more publishing: one still in memory leaves the
    /// outbox now, unwritten; one in the log is released with the next batch.
    fn acknowledged(&mut self, id: u64) {
        if !self.route.outbox.acknowledge(id) {
            self.release.acked.push(id);
        }
    }

    /// Queues records after the cursor while the window has room.
    pub(super) fn fill(&mut self) {
        if !self.is_up() || self.carried.node.as_ref().is_some_and(|n| !n.is_born()) {
            return;
        }
        self.held_back = true;
        if !self.queue_pending() {
            return;
        }
        let window = self.carried.refusals.window(REPORT_WINDOW);
        loop {
            let used = self.queued.len() + self.inflight.len();
            if used >= window {
                return;
            }
            let records = match self.route.outbox.read_after(self.cursor, window - used) {
                Ok(records) => records,
                Err(error) => {
                    tracing::error!(%error, "cannot read the WAL");
                    return;
                }
            };
            if records.is_empty() {
                self.held_back = false;
                return;
            }
            for record in records {
                let queued = if self.carried.node.is_some() {
                    self.queue_sparkplug(record)
                } else {
                    self.queue_record(record)
                };
                if !queued {
                    return;
                }
            }
        }
    }

    /// Queues one record; false when it could not (the record stays in the
    /// log and goes out later).
    fn queue_record(&mut self, record: Record) -> bool {
        let qos = self.route.qos;
        if let Err(refused) =
            self.outbound
                .fits(&record.message.topic, record.message.payload.len(), qos)
        {
            self.cursor = Some(record.id);
            self.release.set_aside.push((record, refused.to_string()));
            return true;
        }
        let message = record.message;
        match self
            .outbound
            .publish(message.topic, qos, message.retain, message.payload)
        {
            Ok(()) => {
                self.queued.push_back(Queued::Record(record.id));
                self.cursor = Some(record.id);
                self.counted(qos);
                true
            }
            Err(_) => {
                self.route.stats.dropped.inc();
                false
            }
        }
    }

    /// Hands one record to the edge node, which sets its seq and may birth
    /// its device first, then queues it; false when the queue is full (the
    /// rest waits as pending).
    fn queue_sparkplug(&mut self, record: Record) -> bool {
        self.cursor = Some(record.id);
        let qos = self.route.qos;
        // The edge node only gives the payload its seq: checked before it takes
        // one, with room for the largest seq field.
        let size = record.message.payload.len() + SPARKPLUG_SEQ_FIELD;
        if let Err(refused) = self.outbound.fits(&record.message.topic, size, qos) {
            self.release.set_aside.push((record, refused.to_string()));
            return true;
        }
        let Some(node) = &mut self.carried.node else {
            return true;
        };
        let Some((births, message)) = node.record(record.message) else {
            self.acknowledged(record.id);
            return true;
        };
        self.pending.extend(births.into_iter().map(Pending::status));
        self.pending.push_back(Pending {
            queued: Queued::Record(record.id),
            topic: message.topic,
            qos,
            payload: message.payload,
        });
        self.queue_pending()
    }

    /// Queues the edge node's messages behind what is pending, and as many of
    /// them as the queue takes.
    pub(super) fn queue_node(&mut self, messages: Vec<NodeMessage>) {
        self.pending
            .extend(messages.into_iter().map(Pending::status));
        self.queue_pending();
    }

    /// Queues pending publishes, in order, while there is room; true when none
    /// is left. One that finds the queue full stays first: its seq is set, so
    /// it goes out as it is, before anything later.
    fn queue_pending(&mut self) -> bool {
        while let Some(Pending {
            queued,
            topic,
            qos,
            payload,
        }) = self.pending.pop_front()
        {
            match self.outbound.publish(topic, qos, false, payload) {
                Ok(()) => {
                    if matches!(queued, Queued::Record(_)) {
                        self.counted(qos);
                    }
                    self.queued.push_back(queued);
                }
                Err(NotQueued::Full(Publish { topic, payload, .. })) => {
                    self.pending.push_front(Pending {
                        queued,
                        topic,
                        qos,
                        payload,
                    });
                    return false;
                }
                Err(refused) => {
                    // Not a publish any broker takes (the edge node's births
                    // and deaths; its records are checked before they get here).
                    tracing::error!(%refused, "a publish refused");
                    self.route.stats.dropped.inc();
                }
            }
        }
        true
    }

    /// A publish of a report was queued: counted, and timed when acknowledged.
    fn counted(&self, qos: QoS) {
        self.route.stats.published.inc();
        if qos == QoS::AtLeastOnce {
            self.route.stats.queued();
        }
    }

    /// Queues a retained status (QoS 1); dropped when the queue is full.
    pub(super) fn queue_status(&mut self, topic: String, payload: Vec<u8>) {
        if self
            .outbound
            .publish(topic, QoS::AtLeastOnce, true, payload)
            .is_ok()
        {
            self.queued.push_back(Queued::Status);
        }
    }

    /// Queues a tracked message with QoS 1; while the connection is not up (or
    /// when the queue is full) `done` is dropped at once, which tells the
    /// sender it was not delivered.
    pub(super) fn queue_tracked(
        &mut self,
        topic: String,
        payload: Vec<u8>,
        done: oneshot::Sender<()>,
    ) {
        if !self.is_up() {
            return;
        }
        if self
            .outbound
            .publish(topic, QoS::AtLeastOnce, false, payload)
            .is_ok()
        {
            self.queued.push_back(Queued::Tracked(done));
            self.counted(QoS::AtLeastOnce);
        }
    }

    /// The log writes due so far, for the publisher to do.
    pub(super) fn take_release(&mut self) -> Release {
        std::mem::take(&mut self.release)
    }

    /// The connection ended at `now`; `dropped` when it failed (not a
    /// shutdown). The record it dropped on, if the broker refused it time
    /// after time, is set aside (WAL-9).
    pub(super) fn end(mut self, dropped: bool, now: Instant) -> Ended {
        if dropped {
            self.refused(now);
        }
        Ended {
            carried: self.carried,
            release: self.release,
            came_up: self.came_up,
        }
    }

    fn refused(&mut self, now: Instant) {
        let oldest = self
            .inflight
            .values()
            .filter_map(|inflight| match inflight {
                Inflight::Record(id, sent) => Some((*id, *sent)),
                Inflight::Tracked(_) => None,
            })
            .min_by_key(|(id, _)| *id);
        let Some(id) = self.carried.refusals.connection_lost(oldest, now) else {
            return;
        };
        match self.route.outbox.read_after(id.checked_sub(1), 1) {
            Ok(mut records) if records.first().is_some_and(|r| r.id == id) => {
                let reason = format!(
                    "the broker closed the connection {REFUSED_AFTER} times in a row right after this message was sent, before acknowledging it: it refuses the message (too big for its packet limit, or not allowed)"
                );
                self.release.set_aside.push((records.remove(0), reason));
            }
            Ok(_) => {}
            Err(error) => tracing::error!(%error, "cannot read the WAL"),
        }
    }
}

impl Pending {
    /// A message of the edge node that is no report.
    fn status(message: NodeMessage) -> Self {
        Self {
            queued: Queued::Status,
            topic: message.topic,
            qos: message.qos,
            payload: message.payload.into(),
        }
    }
}

impl Release {
    /// Does the writes: sets records aside, releases acknowledged ones. What
    /// fails stays in the log and is met again (published again: duplicates
    /// are allowed, consumers drop them by seq).
    pub(super) async fn apply(self, outbox: &Arc<Outbox>) {
        for (record, reason) in self.set_aside {
            let outbox = Arc::clone(outbox);
            let set_aside =
                tokio::task::spawn_blocking(move || outbox.set_aside(record, &reason)).await;
            if !matches!(set_aside, Ok(Ok(()))) {
                tracing::error!("setting a message aside as a dead letter failed");
            }
        }
        if self.acked.is_empty() {
            return;
        }
        let ids = self.acked;
        let outbox = Arc::clone(outbox);
        let released = tokio::task::spawn_blocking(move || outbox.release(&ids)).await;
        if !matches!(released, Ok(Ok(()))) {
            tracing::error!("releasing acknowledged WAL records failed");
        }
    }
}

#[cfg(test)]
mod tests;
