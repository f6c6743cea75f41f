//! Reports between their push and either their PUBACK or their commit.
//!
//! A pushed report gets its log id at once and can be published from here at
//! once (WAL-1 of `docs/wal.md`). The committer writes to the log only
//! the reports still unacknowledged one hold after their push; one the broker
//! acknowledged before that is never written at all. Ids are consecutive from
//! the front entry on, so an id finds its entry by subtraction.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::record::{Message, Record};
use crate::config::OverflowPolicy;

/// One pushed report.
#[derive(Debug)]
struct Entry {
    id: u64,
    pushed: Instant,
    /// `None` once acknowledged or dropped: nothing left to write or publish.
    message: Option<Message>,
    /// Told (by being dropped) once the report is safe: written, acknowledged
    /// or dropped by the overflow policy.
    settled: Option<oneshot::Sender<()>>,
    /// In the batch being written now.
    in_batch: bool,
}

impl Entry {
    fn kill(&mut self) {
        self.message = None;
        self.settled = None;
    }
}

/// What became of a push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pushed {
    Kept,
    /// The oldest waiting report made room for it (`DROP_OLDEST`).
    DroppedOldest,
    /// It was refused (`DROP_NEWEST`).
    DroppedNewest,
}

/// Where an acknowledged id was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Acknowledged {
    /// Here, unwritten: it never reaches the log.
    Unwritten,
    /// Here, but gone already (dropped by the policy, or a second PUBACK).
    Gone,
    /// Before the front: in the log (or released from it already).
    InLog,
}

/// The reports pushed and not yet written, acknowledged or dropped.
#[derive(Debug)]
pub(super) struct Staging {
    entries: VecDeque<Entry>,
    /// The id the next push gets.
    next_id: u64,
    /// How many front entries the committer is writing now.
    committing: usize,
    /// Live entries outside the committing prefix (what the capacity bounds).
    waiting: usize,
    /// Bumped whenever written entries leave: a reader that saw the log before
    /// the bump may have missed them there.
    generation: u64,
}

impl Staging {
    /// Staging whose first push gets `next_id` (the log's next id).
    pub(super) fn new(next_id: u64) -> Self {
        Self {
            entries: VecDeque::new(),
            next_id,
            committing: 0,
            waiting: 0,
            generation: 0,
        }
    }

    /// Live entries: pushed, not yet acknowledged, written or dropped.
    pub(super) fn live(&self) -> usize {
        self.waiting
            + self
                .entries
                .iter()
                .take(self.committing)
                .filter(|e| e.message.is_some())
                .count()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(super) fn generation(&self) -> u64 {
        self.generation
    }

    /// Every id below this one is in the log or gone.
    pub(super) fn front_id(&self) -> u64 {
        self.entries.front().map_or(self.next_id, |e| e.id)
    }

    /// Takes `message` under the overflow policy (WAL-7: only a full
    /// staging area drops, and the caller counts every drop).
    pub(super) fn push(
        &mut self,
        message: Message,
        settled: Option<oneshot::Sender<()>>,
        now: Instant,
        capacity: usize,
        policy: OverflowPolicy,
    ) -> Pushed {
        let mut outcome = Pushed::Kept;
        if self.waiting >= capacity {
            match policy {
                OverflowPolicy::DropNewest => return Pushed::DroppedNewest,
                OverflowPolicy::DropOldest => {
                    if let Some(oldest) = self
                        .entries
                        .iter_mut()
                        .skip(self.committing)
                        .find(|e| e.message.is_some())
                    {
                        oldest.kill();
                        self.waiting -= 1;
                    }
                    outcome = Pushed::DroppedOldest;
                }
            }
        }
        self.entries.push_back(Entry {
            id: self.next_id,
            pushed: now,
            message: Some(message),
            settled,
            in_batch: false,
        });
        self.next_id += 1;
        self.waiting += 1;
        outcome
    }

    /// The broker acknowledged `id`.
    pub(super) fn acknowledge(&mut self, id: u64) -> Acknowledged {
        let front = self.front_id();
        if id < front {
            return Acknowledged::InLog;
        }
        let index = usize::try_from(id - front).unwrap_or(usize::MAX);
        let committing = index < self.committing;
        match self.entries.get_mut(index) {
            Some(entry) if entry.message.is_some() => {
                entry.kill();
                if !committing {
                    self.waiting -= 1;
                }
                Acknowledged::Unwritten
            }
            _ => Acknowledged::Gone,
        }
    }

    /// Up to `limit` live entries with ids above `after`, in id order.
    pub(super) fn read_after(&self, after: Option<u64>, limit: usize) -> Vec<Record> {
        let front = self.front_id();
        let skip = after.map_or(0, |a| {
            usize::try_from(a.saturating_add(1).saturating_sub(front)).unwrap_or(usize::MAX)
        });
        let mut records = Vec::with_capacity(limit.min(self.entries.len().saturating_sub(skip)));
        records.extend(
            self.entries
                .iter()
                .skip(skip)
                .filter_map(|e| {
                    e.message.as_ref().map(|message| Record {
                        id: e.id,
                        message: message.clone(),
                    })
                })
                .take(limit),
        );
        records
    }

    /// When the front entry's hold ends, after dropping the dead entries
    /// before it; `None` when nothing is staged.
    pub(super) fn next_due(&mut self, hold: Duration) -> Option<Instant> {
        while self
            .entries
            .front()
            .is_some_and(|e| e.message.is_none() && self.committing == 0)
        {
            self.entries.pop_front();
        }
        self.entries.front().map(|e| e.pushed + hold)
    }

    /// Marks the entries pushed at or before `cutoff` as being written and
    /// returns the live ones (every entry when `cutoff` is `None`). Dead
    /// entries among them leave at once; with no live one nothing is written.
    pub(super) fn take_due(&mut self, cutoff: Option<Instant>) -> Vec<Record> {
        debug_assert_eq!(self.committing, 0, "one commit at a time");
        let due = self
            .entries
            .iter()
            .take_while(|e| cutoff.is_none_or(|at| e.pushed <= at))
            .count();
        let mut batch = Vec::new();
        for entry in self.entries.iter_mut().take(due) {
            if let Some(message) = &entry.message {
                entry.in_batch = true;
                batch.push(Record {
                    id: entry.id,
                    message: message.clone(),
                });
            }
        }
        if batch.is_empty() {
            self.entries.drain(..due);
        } else {
            self.committing = due;
            self.waiting -= batch.len();
        }
        batch
    }

    /// The batch of [`Staging::take_due`] is durable: its entries leave (their
    /// waiters learn they are safe). Returns the ids acknowledged while it was
    /// being written, which now have to leave the log.
    pub(super) fn written(&mut self) -> Vec<u64> {
        let acknowledged = self
            .entries
            .drain(..self.committing)
            .filter(|e| e.in_batch && e.message.is_none())
            .map(|e| e.id)
            .collect();
        self.committing = 0;
        self.generation = self.generation.wrapping_add(1);
        acknowledged
    }

    /// The batch of [`Staging::take_due`] was not written: it stays, to be
    /// taken again.
    pub(super) fn not_written(&mut self) {
        for entry in self.entries.iter_mut().take(self.committing) {
            if entry.in_batch && entry.message.is_some() {
                self.waiting += 1;
            }
            entry.in_batch = false;
        }
        self.committing = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(seq: u64) -> Message {
        Message {
            device: "d".into(),
            seq,
            topic: "t".into(),
            payload: bytes::Bytes::new(),
            retain: false,
        }
    }

    fn staged(staging: &Staging) -> Vec<u64> {
        staging
            .read_after(None, usize::MAX)
            .iter()
            .map(|r| r.message.seq)
            .collect()
    }

    #[test]
    fn a_full_staging_area_applies_each_policy_but_never_to_a_batch_being_written() {
        let now = Instant::now();
        let mut staging = Staging::new(1);
        let oldest = OverflowPolicy::DropOldest;
        assert_eq!(staging.push(report(1), None, now, 2, oldest), Pushed::Kept);
        assert_eq!(staging.push(report(2), None, now, 2, oldest), Pushed::Kept);
        assert_eq!(
            staging.push(report(3), None, now, 2, oldest),
            Pushed::DroppedOldest
        );
        assert_eq!(staged(&staging), [2, 3]);
        // Being written, 2 and 3 are out of the policy's reach.
        assert_eq!(seqs(&staging.take_due(None)), [2, 3]);
        assert_eq!(staging.push(report(4), None, now, 2, oldest), Pushed::Kept);
        assert_eq!(staging.push(report(5), None, now, 2, oldest), Pushed::Kept);
        assert_eq!(
            staging.push(report(6), None, now, 2, oldest),
            Pushed::DroppedOldest
        );
        assert_eq!(staged(&staging), [2, 3, 5, 6]);
        let newest = OverflowPolicy::DropNewest;
        assert_eq!(
            staging.push(report(7), None, now, 2, newest),
            Pushed::DroppedNewest
        );
        assert_eq!(staging.written(), Vec::<u64>::new());
        assert_eq!(staged(&staging), [5, 6]);
        assert_eq!(staging.live(), 2);
    }

    #[test]
    fn acknowledgements_find_their_entry_by_id() {
        let now = Instant::now();
        let mut staging = Staging::new(10);
        let oldest = OverflowPolicy::DropOldest;
        for seq in 1..=3 {
            staging.push(report(seq), None, now, 10, oldest);
        }
        assert_eq!(staging.acknowledge(9), Acknowledged::InLog);
        assert_eq!(staging.acknowledge(11), Acknowledged::Unwritten);
        assert_eq!(staging.acknowledge(11), Acknowledged::Gone);
        assert_eq!(staging.acknowledge(99), Acknowledged::Gone);
        // Entry 10 is written while 12 is acknowledged during the write; 11
        // was acknowledged before and never went to the log.
        let batch = staging.take_due(None);
        assert_eq!(batch.iter().map(|r| r.id).collect::<Vec<_>>(), [10, 12]);
        assert_eq!(staging.acknowledge(12), Acknowledged::Unwritten);
        assert_eq!(staging.written(), [12], "12 has to leave the log again");
        assert_eq!(staging.front_id(), 13);
        assert_eq!(staging.acknowledge(10), Acknowledged::InLog);
    }

    #[test]
    fn only_entries_past_their_hold_are_due_and_a_failed_write_keeps_them() {
        let start = Instant::now();
        let hold = Duration::from_millis(5);
        let mut staging = Staging::new(1);
        let oldest = OverflowPolicy::DropOldest;
        staging.push(report(1), None, start, 10, oldest);
        staging.push(report(2), None, start + hold, 10, oldest);
        staging.acknowledge(1);
        // The acknowledged front entry goes; the next one is due a hold later.
        assert_eq!(staging.next_due(hold), Some(start + 2 * hold));
        assert!(staging.take_due(Some(start)).is_empty());
        assert_eq!(seqs(&staging.take_due(Some(start + hold))), [2]);
        staging.not_written();
        assert_eq!(staging.live(), 1);
        assert_eq!(seqs(&staging.take_due(None)), [2]);
        assert!(staging.written().is_empty());
        assert!(staging.is_empty());
        assert_eq!(staging.next_due(hold), None);
    }

    fn seqs(records: &[Record]) -> Vec<u64> {
        records.iter().map(|r| r.message.seq).collect()
    }
}
