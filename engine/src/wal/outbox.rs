//! The outbox: reports in memory on their way to the broker, and the log that
//! keeps those the broker has not acknowledged within the hold.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, oneshot, watch};

use super::dead_letter::DeadLetter;
use super::error::WalError;
use super::log::MessageLog;
use super::memory_log::MemoryLog;
use super::record::{Message, Record};
use super::redb_log::RedbLog;
use super::staging::{Acknowledged, Pushed, Staging};
use crate::config::{OverflowPolicy, WalConfig};
use crate::store::Store;
use crate::sync::lock;
use crate::telemetry::{
    Collector, ConstCounter, ConstGauge, Counter, DescriptorEncoder, Metrics, encode_scraped,
};

/// What the log holds, read at each scrape.
#[derive(Debug)]
struct LogMetrics(Arc<dyn MessageLog>);

impl Collector for LogMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let (records, bytes) = self.0.size();
        let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        encode_scraped(
            &mut encoder,
            "sluice_wal_records",
            "Reports in the WAL awaiting their PUBACK.",
            &ConstGauge::new(gauge(records)),
        )?;
        encode_scraped(
            &mut encoder,
            "sluice_wal_bytes",
            "Bytes of reports in the WAL.",
            &ConstGauge::new(gauge(bytes)),
        )?;
        encode_scraped(
            &mut encoder,
            "sluice_wal_corrupt",
            "Damaged WAL records skipped.",
            &ConstCounter::new(self.0.corrupt()),
        )?;
        let held = gauge(self.0.dead_letter_count());
        encode_scraped(
            &mut encoder,
            "sluice_wal_dead_letters",
            "Messages set aside because they can never be sent, awaiting the operator.",
            &ConstGauge::new(held),
        )
    }
}

/// Counters of the outbox, for `/health` and `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct OutboxStats {
    pub appended: Counter,
    pub dropped_oldest: Counter,
    pub dropped_newest: Counter,
    pub commits: Counter,
    pub commit_errors: Counter,
    /// Reports the broker acknowledged before they were written.
    pub acknowledged_unwritten: Counter,
    /// Messages set aside as dead letters (WAL-9).
    pub dead_lettered: Counter,
    /// Dead letters dropped to keep at most `MAX_DEAD_LETTERS`.
    pub dead_letters_dropped: Counter,
}

/// Resolves once a pushed message is safe: acknowledged by the broker, in the
/// log, or dropped by the overflow policy (and counted). A commit that keeps
/// failing keeps it waiting.
#[derive(Debug)]
pub struct Settled(Option<oneshot::Receiver<()>>);

impl Settled {
    pub async fn wait(self) {
        if let Some(settled) = self.0 {
            // Every outcome drops the sender: the outbox let go of the message.
            let _ = settled.await;
        }
    }
}

/// Reports in memory on their way to the broker and, unless acknowledged
/// first, to the log; and the log.
#[derive(Debug)]
pub struct Outbox {
    log: Arc<dyn MessageLog>,
    policy: OverflowPolicy,
    staging: Mutex<Staging>,
    capacity: usize,
    /// How long a report waits for its PUBACK before it is written.
    hold: Duration,
    /// Wakes the committer when the first report arrives in an empty staging.
    wake: Notify,
    /// Bumped on every push: something new to publish.
    pushed: watch::Sender<u64>,
    stats: OutboxStats,
}

/// What one commit did.
#[derive(Debug, PartialEq, Eq)]
enum Commit {
    Stored,
    /// Nothing was due (or everything due was acknowledged already).
    Empty,
    /// The batch stays staged, to be written later.
    Failed,
}

/// Wait before retrying a commit that failed.
const COMMIT_RETRY: Duration = Duration::from_secs(1);

impl Outbox {
    /// The outbox for `config`: the redb log in `store` when the WAL is enabled, a
    /// memory ring otherwise.
    ///
    /// # Errors
    /// When the log cannot be opened (see [`RedbLog::open`]).
    pub fn open(config: &WalConfig, store: &Store) -> Result<Arc<Self>, WalError> {
        let log: Arc<dyn MessageLog> = if config.enabled {
            Arc::new(RedbLog::open(
                store,
                config.total_quota_mb.saturating_mul(1 << 20),
            )?)
        } else {
            Arc::new(MemoryLog::new(config.ring_capacity as usize))
        };
        Ok(Self::with_log(
            log,
            config.overflow_policy,
            config.ring_capacity as usize,
            Duration::from_millis(config.group_commit_ms),
        ))
    }

    pub fn with_log(
        log: Arc<dyn MessageLog>,
        policy: OverflowPolicy,
        capacity: usize,
        hold: Duration,
    ) -> Arc<Self> {
        let staging = Staging::new(log.next_id());
        Arc::new(Self {
            log,
            policy,
            staging: Mutex::new(staging),
            capacity: capacity.max(1),
            hold,
            wake: Notify::new(),
            pushed: watch::channel(0).0,
            stats: OutboxStats::default(),
        })
    }

    pub fn log(&self) -> &Arc<dyn MessageLog> {
        &self.log
    }

    pub fn stats(&self) -> &OutboxStats {
        &self.stats
    }

    /// Messages in memory, neither acknowledged nor written yet.
    pub fn ring_len(&self) -> usize {
        self.staging().live()
    }

    /// Bumped after every push: there is something new to publish.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.pushed.subscribe()
    }

    fn staging(&self) -> std::sync::MutexGuard<'_, Staging> {
        lock(&self.staging)
    }
    /// Registers the outbox's metrics: its counters, and what the log holds.
    pub fn register_metrics(self: &Arc<Self>, metrics: &Metrics) {
        let stats = &self.stats;
        for (name, help, counter) in [
            (
                "sluice_wal_appended",
                "Reports appended to the WAL.",
                &stats.appended,
            ),
            (
                "sluice_wal_commits",
                "Durable WAL commits (group commits).",
                &stats.commits,
            ),
            (
                "sluice_wal_commit_errors",
                "WAL commits that failed and were retried.",
                &stats.commit_errors,
            ),
            (
                "sluice_wal_acknowledged_unwritten",
                "Reports the broker acknowledged before they had to be written to the WAL.",
                &stats.acknowledged_unwritten,
            ),
            (
                "sluice_wal_dropped_oldest",
                "Old reports dropped by DROP_OLDEST at the quota.",
                &stats.dropped_oldest,
            ),
            (
                "sluice_wal_dropped_newest",
                "New reports refused by DROP_NEWEST at the quota.",
                &stats.dropped_newest,
            ),
            (
                "sluice_wal_dead_lettered",
                "Messages set aside because they can never be sent (too big, refused by the broker).",
                &stats.dead_lettered,
            ),
            (
                "sluice_wal_dead_letters_dropped",
                "Dead letters dropped, oldest first, to keep at most 1000.",
                &stats.dead_letters_dropped,
            ),
        ] {
            metrics.register(name, help, counter.clone());
        }
        metrics.collect(LogMetrics(Arc::clone(&self.log)));
    }

    /// Queues a message: published at once, written to the log if its PUBACK
    /// has not come within the hold. Never blocks: when memory holds
    /// `ringCapacity` messages (the broker and the disk cannot keep up), the
    /// overflow policy drops one and counts it.
    pub fn push(&self, message: Message) {
        self.queue(message, None);
    }

    /// Queues a message like [`Outbox::push`]; what it returns resolves once the
    /// message is safe (acknowledged, in the log, or dropped by the overflow
    /// policy), for a caller that may go on only then.
    pub fn push_settled(&self, message: Message) -> Settled {
        let (settled, waiter) = oneshot::channel();
        self.queue(message, Some(settled));
        Settled(Some(waiter))
    }

    fn queue(&self, message: Message, settled: Option<oneshot::Sender<()>>) {
        let now = tokio::time::Instant::now();
        let (pushed, was_empty) = {
            let mut staging = self.staging();
            let was_empty = staging.is_empty();
            let pushed = staging.push(message, settled, now, self.capacity, self.policy);
            (pushed, was_empty)
        };
        // WAL-7: only a full staging area drops, and every drop is counted.
        let dropped = match pushed {
            Pushed::Kept => None,
            Pushed::DroppedOldest => Some(&self.stats.dropped_oldest),
            Pushed::DroppedNewest => Some(&self.stats.dropped_newest),
        };
        if let Some(counter) = dropped {
            counter.inc();
            tracing::warn!(policy = ?self.policy, "outbox full: a report was dropped");
        }
        if was_empty {
            self.wake.notify_one();
        }
        if pushed != Pushed::DroppedNewest {
            self.pushed.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Up to `limit` messages with ids above `after` (all when `None`), in id
    /// order: first those in the log, then those only in memory.
    ///
    /// # Errors
    /// When the log cannot be read.
    pub fn read_after(&self, after: Option<u64>, limit: usize) -> Result<Vec<Record>, WalError> {
        loop {
            let (front, generation) = {
                let staging = self.staging();
                (staging.front_id(), staging.generation())
            };
            // Ids below the front are in the log (or gone); none above it is
            // only in the log.
            let mut records = Vec::new();
            if after.is_none_or(|a| a.saturating_add(1) < front) {
                records = self.log.read_after(after, limit)?;
            }
            let staging = self.staging();
            // A commit that ended meanwhile moved entries from memory to the
            // log, where the read above may have missed them: read again
            // (what was read is older than they are: return it alone).
            if staging.generation() != generation {
                if records.is_empty() {
                    continue;
                }
                return Ok(records);
            }
            let last = records.last().map_or(after, |r| Some(r.id));
            let room = limit - records.len();
            records.extend(staging.read_after(last, room));
            return Ok(records);
        }
    }

    /// The broker acknowledged `id`. True when it was still in memory: it
    /// leaves now and is never written; false when the log holds it, to be
    /// released from there ([`Outbox::release`]).
    pub fn acknowledge(&self, id: u64) -> bool {
        match self.staging().acknowledge(id) {
            Acknowledged::Unwritten => {
                self.stats.acknowledged_unwritten.inc();
                true
            }
            Acknowledged::Gone => true,
            Acknowledged::InLog => false,
        }
    }

    /// Sets `record` aside (WAL-9): kept durably among the dead letters,
    /// gone from the log and from memory, so it never holds up what follows.
    ///
    /// # Errors
    /// When the dead letter cannot be committed: the record stays where it was.
    pub fn set_aside(&self, record: Record, reason: &str) -> Result<(), WalError> {
        let letter = DeadLetter {
            id: record.id,
            at_ms: crate::clock::now_ms(),
            reason: reason.to_owned(),
            message: record.message,
        };
        let dropped = self.log.set_aside(&letter)?;
        // Gone from memory now; a record the committer is writing at this
        // moment is released from the log once it is written.
        self.staging().acknowledge(letter.id);
        self.stats.dead_lettered.inc();
        if dropped > 0 {
            self.stats.dead_letters_dropped.inc_by(dropped);
        }
        tracing::error!(
            id = letter.id,
            topic = %letter.message.topic,
            device = %letter.message.device,
            seq = letter.message.seq,
            bytes = letter.message.payload.len(),
            reason,
            "a message that cannot be sent was set aside as a dead letter (see GET /dead-letters)"
        );
        Ok(())
    }

    /// The dead letters, oldest first.
    ///
    /// # Errors
    /// When they cannot be read.
    pub fn dead_letters(&self) -> Result<Vec<DeadLetter>, WalError> {
        self.log.dead_letters()
    }

    /// Removes dead letter `id` for good; `None` when there is none.
    ///
    /// # Errors
    /// When the removal cannot be committed.
    pub fn discard_dead_letter(&self, id: u64) -> Result<Option<DeadLetter>, WalError> {
        let taken = self.log.take_dead_letter(id)?;
        if let Some(letter) = &taken {
            tracing::info!(id, topic = %letter.message.topic, "a dead letter was discarded");
        }
        Ok(taken)
    }

    /// Sends dead letter `id` again: it leaves the dead letters and is pushed as
    /// a new record, with the `seq` it had; `None` when there is none.
    ///
    /// # Errors
    /// When the removal cannot be committed: it stays a dead letter.
    pub fn resend_dead_letter(&self, id: u64) -> Result<Option<DeadLetter>, WalError> {
        let taken = self.log.take_dead_letter(id)?;
        if let Some(letter) = &taken {
            tracing::info!(id, topic = %letter.message.topic, "a dead letter is sent again");
            self.push(letter.message.clone());
        }
        Ok(taken)
    }

    /// Removes acknowledged records from the log (WAL-2).
    ///
    /// # Errors
    /// When the removal cannot be committed.
    pub fn release(&self, ids: &[u64]) -> Result<(), WalError> {
        self.log.release(ids)
    }

    /// Writes what is due in the log, until `shutdown` turns true; then writes
    /// every message still unacknowledged.
    pub async fn run_committer(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        // When the last commit began: commits start at least one hold apart, so
        // while nothing is acknowledged (the uplink is down) the reports of one
        // hold share a flush.
        let mut last: Option<tokio::time::Instant> = None;
        loop {
            let front = self.staging().next_due(self.hold);
            let due = front.map(|at| last.map_or(at, |last| at.max(last + self.hold)));
            tokio::select! {
                () = wait_until(due, &self.wake) => {
                    let now = tokio::time::Instant::now();
                    last = Some(now);
                    let cutoff = now.checked_sub(self.hold).unwrap_or(now);
                    if self.commit(Some(cutoff)).await == Commit::Failed {
                        tokio::time::sleep(COMMIT_RETRY).await;
                    }
                }
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        while self.commit(None).await == Commit::Stored {}
                        return;
                    }
                }
            }
        }
    }

    /// Writes the unacknowledged messages pushed at or before `cutoff` (all
    /// of them when `None`) in one transaction.
    async fn commit(self: &Arc<Self>, cutoff: Option<tokio::time::Instant>) -> Commit {
        let batch = self.staging().take_due(cutoff);
        if batch.is_empty() {
            return Commit::Empty;
        }
        let count = batch.len();
        let this = Arc::clone(self);
        let result = tokio::task::spawn_blocking(move || this.log.append(batch, this.policy)).await;
        let error = match result {
            Ok(Ok(outcome)) => {
                self.stats.commits.inc();
                self.stats.appended.inc_by(outcome.stored);
                self.stats.dropped_oldest.inc_by(outcome.dropped_oldest);
                self.stats.dropped_newest.inc_by(outcome.dropped_newest);
                if outcome.dropped_oldest + outcome.dropped_newest > 0 {
                    tracing::warn!(
                        dropped_oldest = outcome.dropped_oldest,
                        dropped_newest = outcome.dropped_newest,
                        "WAL quota reached: reports dropped by the overflow policy"
                    );
                }
                // Their waiters learn that the messages are safe; those
                // acknowledged during the write leave the log again.
                let acknowledged = self.staging().written();
                if !acknowledged.is_empty() {
                    let this = Arc::clone(self);
                    let released =
                        tokio::task::spawn_blocking(move || this.log.release(&acknowledged)).await;
                    if !matches!(released, Ok(Ok(()))) {
                        // Published again after a restart: at-least-once.
                        tracing::error!("releasing acknowledged WAL records failed");
                    }
                }
                tracing::trace!(count, "WAL batch committed");
                return Commit::Stored;
            }
            Ok(Err(error)) => error.to_string(),
            Err(error) => error.to_string(),
        };
        self.stats.commit_errors.inc();
        tracing::error!(%error, "WAL commit failed; retrying");
        self.staging().not_written();
        Commit::Failed
    }
}

/// Resolves at `due`, or (with nothing staged) when `wake` is notified.
async fn wait_until(due: Option<tokio::time::Instant>, wake: &Notify) {
    match due {
        Some(at) => tokio::time::sleep_until(at).await,
        None => wake.notified().await,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::wal::log::Appended;

    /// A memory log whose commits take `delay`, remembering when each began.
    #[derive(Debug)]
    struct SlowLog {
        inner: MemoryLog,
        delay: Duration,
        commits: Mutex<Vec<Instant>>,
    }

    impl SlowLog {
        fn new(delay: Duration) -> Arc<Self> {
            Arc::new(Self {
                inner: MemoryLog::new(10_000),
                delay,
                commits: Mutex::default(),
            })
        }

        fn commits(&self) -> usize {
            lock(&self.commits).len()
        }
    }

    impl MessageLog for SlowLog {
        fn append(
            &self,
            records: Vec<Record>,
            policy: OverflowPolicy,
        ) -> Result<Appended, WalError> {
            lock(&self.commits).push(Instant::now());
            std::thread::sleep(self.delay);
            self.inner.append(records, policy)
        }

        fn next_id(&self) -> u64 {
            self.inner.next_id()
        }

        fn read_after(&self, after: Option<u64>, limit: usize) -> Result<Vec<Record>, WalError> {
            self.inner.read_after(after, limit)
        }

        fn release(&self, ids: &[u64]) -> Result<(), WalError> {
            self.inner.release(ids)
        }

        fn size(&self) -> (u64, u64) {
            self.inner.size()
        }

        fn corrupt(&self) -> u64 {
            0
        }

        fn set_aside(&self, letter: &DeadLetter) -> Result<u64, WalError> {
            self.inner.set_aside(letter)
        }

        fn dead_letters(&self) -> Result<Vec<DeadLetter>, WalError> {
            self.inner.dead_letters()
        }

        fn take_dead_letter(&self, id: u64) -> Result<Option<DeadLetter>, WalError> {
            self.inner.take_dead_letter(id)
        }

        fn dead_letter_count(&self) -> u64 {
            self.inner.dead_letter_count()
        }
    }

    fn report(seq: u64) -> Message {
        Message {
            device: "d".into(),
            seq,
            topic: "t".into(),
            payload: bytes::Bytes::from_static(&[1, 2, 3]),
            retain: false,
        }
    }

    fn seqs(records: &[Record]) -> Vec<u64> {
        records.iter().map(|r| r.message.seq).collect()
    }

    /// Waits (bounded) until `done` holds.
    async fn until(what: &str, done: impl Fn() -> bool) {
        for _ in 0..500 {
            if done() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("not within 5 s: {what}");
    }

    fn start(log: Arc<SlowLog>, hold: Duration) -> (Arc<Outbox>, watch::Sender<bool>) {
        let outbox = Outbox::with_log(log, OverflowPolicy::DropNewest, 10_000, hold);
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(Arc::clone(&outbox).run_committer(stopped));
        (outbox, stop)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_report_acknowledged_within_the_hold_is_never_written() {
        let log = SlowLog::new(Duration::ZERO);
        let (outbox, _stop) = start(Arc::clone(&log), Duration::from_millis(100));
        let settled = outbox.push_settled(report(1));
        outbox.push(report(2));
        let published = outbox.read_after(None, 10).expect("read");
        assert_eq!(seqs(&published), [1, 2], "published before any write");
        assert!(outbox.acknowledge(published[0].id), "still in memory");
        tokio::time::timeout(Duration::from_secs(5), settled.wait())
            .await
            .expect("an acknowledged report is safe");
        // The committer appends, then marks the batch written: wait for both.
        until("the unacknowledged report is written", || {
            log.size().0 == 1 && outbox.ring_len() == 0
        })
        .await;
        assert_eq!(seqs(&log.read_after(None, 10).expect("read")), [2]);
        assert_eq!(outbox.stats().acknowledged_unwritten.get(), 1);
        // Its PUBACK comes later: the log holds it, the caller releases it.
        assert!(!outbox.acknowledge(published[1].id));
        outbox.release(&[published[1].id]).expect("release");
        assert_eq!(log.size().0, 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_give_the_log_first_then_memory_in_push_order() {
        let log = SlowLog::new(Duration::ZERO);
        let (outbox, _stop) = start(Arc::clone(&log), Duration::from_millis(200));
        outbox.push(report(1));
        outbox.push(report(2));
        until("the first two are written", || log.size().0 == 2).await;
        outbox.push(report(3));
        let all = outbox.read_after(None, 10).expect("read");
        assert_eq!(seqs(&all), [1, 2, 3]);
        assert_eq!(
            all.iter().map(|r| r.id).collect::<Vec<_>>(),
            [1, 2, 3],
            "one id space for the log and memory"
        );
        assert_eq!(seqs(&outbox.read_after(Some(1), 1).expect("read")), [2]);
        assert_eq!(seqs(&outbox.read_after(Some(2), 10).expect("read")), [3]);
        assert!(outbox.read_after(Some(3), 10).expect("read").is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_report_acknowledged_while_it_is_written_leaves_the_log_after() {
        let log = SlowLog::new(Duration::from_millis(300));
        let (outbox, _stop) = start(Arc::clone(&log), Duration::ZERO);
        let settled = outbox.push_settled(report(1));
        until("the commit starts", || log.commits() == 1).await;
        let id = outbox.read_after(None, 1).expect("read")[0].id;
        assert!(outbox.acknowledge(id), "in memory until its commit ends");
        tokio::time::timeout(Duration::from_secs(5), settled.wait())
            .await
            .expect("settled");
        until("the commit ends and the record leaves", || {
            outbox.stats().commits.get() == 1 && log.size().0 == 0
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unacknowledged_reports_are_written_a_hold_apart_and_shutdown_writes_the_rest() {
        let hold = Duration::from_millis(40);
        let log = SlowLog::new(Duration::from_millis(15));
        let (outbox, stop) = start(Arc::clone(&log), hold);
        let started = Instant::now();
        // A report every 2 ms: with 15 ms commits, back-to-back commits would
        // start about every 15 ms.
        for seq in 1..=150 {
            outbox.push(report(seq));
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        stop.send(true).expect("committer listens");
        until("every report is written by shutdown", || {
            log.size().0 == 150
        })
        .await;
        let elapsed = started.elapsed();
        // Counted rather than timed one by one, so a blocking thread that
        // starts late cannot make the test fail.
        let commits = log.commits();
        let allowed = (elapsed.as_millis() / hold.as_millis()) as usize + 2;
        assert!(commits >= 2, "{commits} commits");
        assert!(
            commits <= allowed,
            "{commits} commits in {elapsed:?}: more than one every {hold:?}"
        );
        assert_eq!(
            seqs(&log.read_after(None, 200).expect("read")),
            (1..=150).collect::<Vec<_>>()
        );
    }
}
