//! The poll scheduler: a due-time queue of jobs, one job per device and tag period.
//!
//! - Cross-device parallelism: every due job runs as its own task.
//! - Per-device serialisation: a job whose device is still busy (another of its
//!   jobs, or a write) is skipped and counted, and comes due again one period later.
//! - Each round runs under the per-device timeout; a round that times out is failed.
//! - The next round is due one period after the previous one *completed*, so a slow
//!   device is polled less often instead of piling up work.
//! - First due times are spread evenly over one period, so thousands of devices with
//!   the same period do not all fire at once.
//! - Tags with period 0 are never polled (write-only).

mod counters;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, mpsc, watch};
use tokio::time::{Instant, sleep_until, timeout};

pub use counters::{LATENCY_BUCKETS_MS, RoundCounters, RoundStats};

/// What a round achieved; a failed round counts in the device's failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundOutcome {
    /// The device answered (some tags may still be BAD).
    Done,
    /// The device could not be read at all.
    Failed,
}

/// A boxed round future.
pub type RoundFuture = Pin<Box<dyn Future<Output = RoundOutcome> + Send>>;

/// Runs rounds; the collector implements it, tests use a fake.
pub trait Rounds: Send + Sync + 'static {
    /// Reads `tags` (indexes into the device's tags) of device `device`.
    fn run(&self, device: usize, tags: Arc<[u32]>) -> RoundFuture;
}

/// What to poll for one device: its tags and their periods (0 = never).
#[derive(Debug, Clone)]
pub struct DevicePlan {
    pub tag_periods: Vec<u64>,
}

#[derive(Debug)]
struct Job {
    device: usize,
    period: Duration,
    tags: Arc<[u32]>,
}

/// The scheduler and the shared state of its devices.
#[derive(Debug)]
pub struct Scheduler {
    jobs: Vec<Job>,
    /// Held while a device runs a round (or a write): the per-device serialisation.
    busy: Vec<Arc<Mutex<()>>>,
    counters: Arc<[RoundCounters]>,
    device_timeout: Duration,
}

impl Scheduler {
    /// Jobs for every device: one per distinct non-zero tag period.
    pub fn new(devices: &[DevicePlan], device_timeout: Duration) -> Self {
        let mut jobs = Vec::new();
        for (device, plan) in devices.iter().enumerate() {
            let mut by_period: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
            for (tag, &period) in plan.tag_periods.iter().enumerate() {
                if period > 0 {
                    by_period.entry(period).or_default().push(tag as u32);
                }
            }
            for (period, tags) in by_period {
                jobs.push(Job {
                    device,
                    period: Duration::from_millis(period),
                    tags: tags.into(),
                });
            }
        }
        Self {
            jobs,
            busy: devices.iter().map(|_| Arc::new(Mutex::new(()))).collect(),
            counters: devices.iter().map(|_| RoundCounters::default()).collect(),
            device_timeout,
        }
    }

    /// Round counters, by device index.
    pub fn counters(&self) -> Arc<[RoundCounters]> {
        Arc::clone(&self.counters)
    }

    /// The lock that serialises work on device `device` (writes take it too).
    pub fn device_lock(&self, device: usize) -> Option<Arc<Mutex<()>>> {
        self.busy.get(device).cloned()
    }

    /// First due time of each job: spread evenly over one period among the jobs
    /// that share that period.
    fn first_due(&self, start: Instant) -> Vec<Instant> {
        let mut per_period: BTreeMap<Duration, usize> = BTreeMap::new();
        for job in &self.jobs {
            *per_period.entry(job.period).or_default() += 1;
        }
        let mut seen: BTreeMap<Duration, usize> = BTreeMap::new();
        self.jobs
            .iter()
            .map(|job| {
                let count = per_period[&job.period] as u32;
                let index = seen.entry(job.period).or_default();
                let offset = job.period * (*index as u32) / count.max(1);
                *index += 1;
                start + offset
            })
            .collect()
    }

    /// Runs until `shutdown` turns true (or its sender is dropped). Rounds in flight
    /// are left to finish on their own.
    pub async fn run<R: Rounds>(self, rounds: Arc<R>, mut shutdown: watch::Receiver<bool>) {
        let mut queue: BinaryHeap<Reverse<(Instant, usize)>> = BinaryHeap::new();
        for (job, due) in self.first_due(Instant::now()).into_iter().enumerate() {
            queue.push(Reverse((due, job)));
        }
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(usize, Instant)>();
        loop {
            let next_due = queue.peek().map(|Reverse((due, _))| *due);
            tokio::select! {
                _ = async {
                    match next_due {
                        Some(due) => sleep_until(due).await,
                        None => std::future::pending().await,
                    }
                } => {
                    let now = Instant::now();
                    while let Some(Reverse((due, index))) = queue.peek().copied() {
                        if due > now {
                            break;
                        }
                        queue.pop();
                        if let Some(next) = self.dispatch(index, &rounds, &done_tx) {
                            queue.push(Reverse((next, index)));
                        }
                    }
                }
                Some((index, completed)) = done_rx.recv() => {
                    queue.push(Reverse((completed + self.jobs[index].period, index)));
                }
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        break;
                    }
                }
            }
        }
    }

    /// Starts job `index` if its device is free; otherwise counts a skip and returns
    /// when the job is due again.
    fn dispatch<R: Rounds>(
        &self,
        index: usize,
        rounds: &Arc<R>,
        done: &mpsc::UnboundedSender<(usize, Instant)>,
    ) -> Option<Instant> {
        let job = &self.jobs[index];
        let counters = &self.counters[job.device];
        let Ok(guard) = Arc::clone(&self.busy[job.device]).try_lock_owned() else {
            counters.skipped();
            return Some(Instant::now() + job.period);
        };
        counters.started();
        let future = rounds.run(job.device, Arc::clone(&job.tags));
        let limit = self.device_timeout;
        let counters = Arc::clone(&self.counters);
        let device = job.device;
        let done = done.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let outcome = timeout(limit, future).await.unwrap_or(RoundOutcome::Failed);
            drop(guard);
            let completed = Instant::now();
            counters[device].finished(completed - started, outcome == RoundOutcome::Failed);
            // The scheduler may have stopped; then nobody needs the completion.
            let _ = done.send((index, completed));
        });
        None
    }
}

#[cfg(test)]
mod tests;
