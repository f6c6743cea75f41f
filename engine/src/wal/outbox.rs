//! The outbox: the ring in front of the log, drained by a committer task in
//! group commits.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, oneshot, watch};

use super::error::WalError;
use super::log::MessageLog;
use super::memory_log::MemoryLog;
use super::record::Message;
use super::redb_log::RedbLog;
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
        let records_help = (
            "sluice_wal_records",
            "Reports in the WAL awaiting their PUBACK.",
        );
        encode_scraped(&mut encoder, records_help, &ConstGauge::new(gauge(records)))?;
        encode_scraped(
            &mut encoder,
            ("sluice_wal_bytes", "Bytes of reports in the WAL."),
            &ConstGauge::new(gauge(bytes)),
        )?;
        let corrupt = ("sluice_wal_corrupt", "Damaged WAL records skipped.");
        encode_scraped(&mut encoder, corrupt, &ConstCounter::new(self.0.corrupt()))
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
}

/// A message waiting in the ring, and whom to tell once it is settled.
type Waiting = (Message, Option<oneshot::Sender<()>>);

/// Resolves once a pushed message is settled: in the log, or dropped by the
/// overflow policy (and counted). A commit that keeps failing keeps it waiting.
#[derive(Debug)]
pub struct Settled(Option<oneshot::Receiver<()>>);

impl Settled {
    pub async fn wait(self) {
        if let Some(settled) = self.0 {
            // Sent or dropped, both mean the ring let go of the message.
            let _ = settled.await;
        }
    }
}

/// The ring in front of the log, and the log.
#[derive(Debug)]
pub struct Outbox {
    log: Arc<dyn MessageLog>,
    policy: OverflowPolicy,
    ring: Mutex<VecDeque<Waiting>>,
    ring_capacity: usize,
    group_commit: Duration,
    wake: Notify,
    committed: watch::Sender<u64>,
    stats: OutboxStats,
}

/// What one commit of the ring did.
#[derive(Debug, PartialEq, Eq)]
enum Commit {
    Stored,
    /// The ring was empty.
    Empty,
    /// The batch went back to the ring.
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
        ring_capacity: usize,
        group_commit: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            log,
            policy,
            ring: Mutex::new(VecDeque::new()),
            ring_capacity: ring_capacity.max(1),
            group_commit,
            wake: Notify::new(),
            committed: watch::channel(0).0,
            stats: OutboxStats::default(),
        })
    }

    pub fn log(&self) -> &Arc<dyn MessageLog> {
        &self.log
    }

    pub fn stats(&self) -> &OutboxStats {
        &self.stats
    }

    /// Messages waiting in the ring for the next commit.
    pub fn ring_len(&self) -> usize {
        self.ring().len()
    }

    /// Bumped after every commit that stored something.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.committed.subscribe()
    }

    fn ring(&self) -> std::sync::MutexGuard<'_, VecDeque<Waiting>> {
        lock(&self.ring)
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
                "sluice_wal_dropped_oldest",
                "Old reports dropped by DROP_OLDEST at the quota.",
                &stats.dropped_oldest,
            ),
            (
                "sluice_wal_dropped_newest",
                "New reports refused by DROP_NEWEST at the quota.",
                &stats.dropped_newest,
            ),
        ] {
            metrics.register(name, help, counter.clone());
        }
        metrics.collect(LogMetrics(Arc::clone(&self.log)));
    }

    /// Queues a message for the next commit. Never blocks: when the ring is full
    /// (the disk cannot keep up), the overflow policy drops a message and counts it.
    pub fn push(&self, message: Message) {
        self.queue((message, None));
    }

    /// Queues a message like [`Outbox::push`]; what it returns resolves once the
    /// message is in the log (or dropped by the overflow policy), for a caller
    /// that may go on only then.
    pub fn push_settled(&self, message: Message) -> Settled {
        let (settled, waiter) = oneshot::channel();
        self.queue((message, Some(settled)));
        Settled(Some(waiter))
    }

    fn queue(&self, message: Waiting) {
        {
            let mut ring = self.ring();
            // Invariant 7: only a full ring drops, and every drop is counted.
            if ring.len() >= self.ring_capacity {
                let counter = match self.policy {
                    OverflowPolicy::DropOldest => {
                        ring.pop_front();
                        ring.push_back(message);
                        &self.stats.dropped_oldest
                    }
                    OverflowPolicy::DropNewest => &self.stats.dropped_newest,
                };
                counter.inc();
                tracing::warn!(policy = ?self.policy, "outbox ring full: a report was dropped");
            } else {
                ring.push_back(message);
            }
        }
        self.wake.notify_one();
    }

    /// Commits what the ring holds, in batches, until `shutdown` turns true; then
    /// commits what is left.
    pub async fn run_committer(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        // When the last commit began: commits start at most one `group_commit` apart.
        let mut last_commit: Option<tokio::time::Instant> = None;
        loop {
            tokio::select! {
                _ = self.wake.notified() => {
                    // An idle committer commits at once; under load the reports that
                    // arrive within one spacing share a commit (one flush for many).
                    if let Some(at) = last_commit {
                        tokio::time::sleep_until(at + self.group_commit).await;
                    }
                    last_commit = Some(tokio::time::Instant::now());
                    // Reports pushed during this commit have woken the next
                    // iteration already: they wait for the spacing, not for nothing.
                    self.commit_once().await;
                }
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        while self.commit_once().await == Commit::Stored {}
                        return;
                    }
                }
            }
        }
    }

    /// Commits what the ring holds now, in one transaction.
    async fn commit_once(self: &Arc<Self>) -> Commit {
        let kept: Vec<Waiting> = self.ring().drain(..).collect();
        if kept.is_empty() {
            return Commit::Empty;
        }
        let count = kept.len();
        let batch: Vec<Message> = kept.iter().map(|(message, _)| message.clone()).collect();
        let this = Arc::clone(self);
        let result = tokio::task::spawn_blocking(move || this.log.append(batch, this.policy)).await;
        match result {
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
                self.committed.send_modify(|n| *n = n.wrapping_add(1));
                // Their waiters learn that the messages are settled.
                drop(kept);
            }
            Ok(Err(error)) => {
                self.failed(kept, &error.to_string()).await;
                return Commit::Failed;
            }
            Err(error) => {
                self.failed(kept, &error.to_string()).await;
                return Commit::Failed;
            }
        }
        tracing::trace!(count, "WAL batch committed");
        Commit::Stored
    }

    /// Puts a batch whose commit failed back at the front of the ring and waits
    /// before the next try; the ring's policy bounds memory meanwhile.
    async fn failed(&self, batch: Vec<Waiting>, error: &str) {
        self.stats.commit_errors.inc();
        tracing::error!(%error, "WAL commit failed; retrying");
        {
            let mut ring = self.ring();
            for message in batch.into_iter().rev() {
                ring.push_front(message);
            }
            while ring.len() > self.ring_capacity {
                match self.policy {
                    OverflowPolicy::DropOldest => ring.pop_front(),
                    OverflowPolicy::DropNewest => ring.pop_back(),
                };
                let counter = match self.policy {
                    OverflowPolicy::DropOldest => &self.stats.dropped_oldest,
                    OverflowPolicy::DropNewest => &self.stats.dropped_newest,
                };
                counter.inc();
            }
        }
        tokio::time::sleep(COMMIT_RETRY).await;
        self.wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::wal::log::Appended;
    use crate::wal::record::Record;

    /// A memory log whose commits take `delay`, remembering when each began.
    #[derive(Debug)]
    struct SlowLog {
        inner: MemoryLog,
        delay: Duration,
        commits: Mutex<Vec<Instant>>,
    }

    impl MessageLog for SlowLog {
        fn append(
            &self,
            messages: Vec<Message>,
            policy: OverflowPolicy,
        ) -> Result<Appended, WalError> {
            lock(&self.commits).push(Instant::now());
            std::thread::sleep(self.delay);
            self.inner.append(messages, policy)
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
    }

    fn report(seq: u64) -> Message {
        Message {
            device: "d".into(),
            seq,
            topic: "t".into(),
            payload: vec![1, 2, 3],
            retain: false,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn under_load_commits_start_one_spacing_apart_and_shutdown_commits_the_rest() {
        let spacing = Duration::from_millis(40);
        let log = Arc::new(SlowLog {
            inner: MemoryLog::new(10_000),
            delay: Duration::from_millis(15),
            commits: Mutex::default(),
        });
        let outbox = Outbox::with_log(log.clone(), OverflowPolicy::DropNewest, 10_000, spacing);
        let (stop, stopped) = watch::channel(false);
        let committer = tokio::spawn(Arc::clone(&outbox).run_committer(stopped));
        let started = Instant::now();
        // A report every 2 ms: with 15 ms commits, back-to-back commits would
        // start about every 15 ms.
        for seq in 1..=150 {
            outbox.push(report(seq));
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        stop.send(true).expect("committer listens");
        committer.await.expect("committer ends");
        let elapsed = started.elapsed();
        assert_eq!(log.size().0, 150, "every report is committed by shutdown");
        // Commits begin at least one spacing apart within the run, plus the one
        // shutdown makes at once. Counted rather than timed one by one, so a
        // blocking thread that starts late cannot make the test fail.
        let commits = lock(&log.commits).len();
        let allowed = (elapsed.as_millis() / spacing.as_millis()) as usize + 2;
        assert!(commits >= 2, "{commits} commits");
        assert!(
            commits <= allowed,
            "{commits} commits in {elapsed:?}: more than one every {spacing:?}"
        );
    }
}
