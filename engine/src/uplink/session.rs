//! One connection's bookkeeping: what was queued for the connection, what
//! awaits its PUBACK, what waits for room in the queue.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use rumqttc::QoS;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::outbound::Outbound;
use super::refusals::Refusals;
use super::sparkplug::EdgeNode;
use crate::wal::{Outbox, Record};

/// One connection's bookkeeping.
pub(super) struct Session {
    /// What goes to the broker next.
    pub(super) outbound: Outbound,
    /// Which connection this is: an acknowledgement goes out on the connection
    /// its message came in on only (packet ids are per connection).
    pub(super) number: u64,
    pub(super) connected: bool,
    /// When the broker accepted the connection.
    pub(super) connected_at: Option<Instant>,
    /// The last record queued.
    pub(super) cursor: Option<u64>,
    /// The last fill stopped with records left in the outbox (the window or the
    /// queue was full, or the log could not be read): a PUBACK, which
    /// makes room, fills again. Otherwise only a push brings anything new.
    pub(super) held_back: bool,
    /// Per publish queued, in order, what it carries. The event loop
    /// reports outgoing publishes in the same order.
    pub(super) queued: VecDeque<Queued>,
    /// Packet id -> what awaits its PUBACK.
    pub(super) inflight: HashMap<u16, Inflight>,
    /// Acknowledged records the log holds, released in one batch.
    pub(super) acked: Vec<u64>,
    /// Records that can never be sent, and why: set aside with the next batch
    /// (invariant 9 of `docs/wal.md`).
    pub(super) set_aside: Vec<(Record, String)>,
    /// The record the broker may be refusing; it outlives the connection and
    /// moves on to the next one.
    pub(super) refusals: Refusals,
    /// The Sparkplug edge node (`payload: sparkplug-b`); it outlives the
    /// connection and moves on to the next one.
    pub(super) node: Option<EdgeNode>,
    /// Publishes of the edge node the queue had no room for yet.
    pub(super) pending: VecDeque<Pending>,
}

/// A publish of the edge node waiting for room in the queue.
pub(super) struct Pending {
    pub(super) queued: Queued,
    pub(super) topic: String,
    pub(super) qos: QoS,
    pub(super) payload: Bytes,
}

/// What a queued publish carries.
pub(super) enum Queued {
    Record(u64),
    Status,
    /// A tracked message and whom to tell of its PUBACK.
    Tracked(oneshot::Sender<()>),
}

/// A publish awaiting its PUBACK.
pub(super) enum Inflight {
    /// A record, and when it was written to the connection.
    Record(u64, Instant),
    Tracked(oneshot::Sender<()>),
}

impl Session {
    /// The PUBACK of `inflight` arrived: a tracked sender is told now, a record
    /// settled ([`Session::acknowledged`]).
    pub(super) fn settle(&mut self, outbox: &Outbox, inflight: Inflight) {
        match inflight {
            Inflight::Record(id, _) => {
                self.refusals.acknowledged(id);
                self.acknowledged(outbox, id);
            }
            Inflight::Tracked(done) => {
                // The sender may have stopped waiting; the ack still happened.
                let _ = done.send(());
            }
        }
    }

    /// The oldest record awaiting its PUBACK, and when it was sent.
    pub(super) fn oldest_inflight(&self) -> Option<(u64, Instant)> {
        self.inflight
            .values()
            .filter_map(|inflight| match inflight {
                Inflight::Record(id, sent) => Some((*id, *sent)),
                Inflight::Tracked(_) => None,
            })
            .min_by_key(|(id, _)| *id)
    }

    /// Record `id` needs no more publishing (invariant 2 of `docs/wal.md`): one
    /// still in memory leaves the outbox now, unwritten; one in the log is
    /// released with the next batch.
    pub(super) fn acknowledged(&mut self, outbox: &Outbox, id: u64) {
        if !outbox.acknowledge(id) {
            self.acked.push(id);
        }
    }
}
