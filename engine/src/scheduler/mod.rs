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
//! - Devices are added and removed while it runs ([`PlanChange`]); the others'
//!   due times are not touched.

mod counters;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex, mpsc, watch};
use tokio::time::{Instant, sleep_until, timeout};

pub use counters::{LATENCY_BUCKETS_S, RoundCounters, RoundMetrics};

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
    /// Reads `tags` (indexes into the device's tags) of the device planned as `device`.
    fn run(&self, device: u64, tags: Arc<[u32]>) -> RoundFuture;
}

/// What to poll for one device: its tags and their periods (0 = never).
#[derive(Debug, Clone)]
pub struct DevicePlan {
    /// Names the device in [`Rounds::run`] and [`PlanChange::Remove`]; unique.
    pub device: u64,
    pub tag_periods: Vec<u64>,
    /// Where the device's rounds are counted.
    pub counters: Arc<RoundCounters>,
}

/// A change of the devices polled, applied between two dispatches.
#[derive(Debug)]
pub enum PlanChange {
    /// Poll a new device; its first rounds are spread over one period from now.
    Add(DevicePlan),
    /// Stop polling a device; a round in flight finishes on its own.
    Remove(u64),
    /// Poll a new build of a device instead of the old one (`.0`): the new one
    /// waits for a round of the old one still in flight, so two rounds of one
    /// device never overlap.
    Replace(u64, DevicePlan),
}

#[derive(Debug)]
struct Job {
    device: u64,
    period: Duration,
    tags: Arc<[u32]>,
}

/// A polled device: what serialises its work and where its rounds are counted.
#[derive(Debug)]
struct Polled {
    /// Held while the device runs a round: the per-device serialisation.
    busy: Arc<Mutex<()>>,
    counters: Arc<RoundCounters>,
    jobs: Vec<u64>,
}

/// The scheduler and the shared state of its devices.
#[derive(Debug)]
pub struct Scheduler {
    /// Jobs by id; ids are never reused, so a queued id of a removed job is
    /// recognised and dropped.
    jobs: HashMap<u64, Job>,
    next_job: u64,
    devices: HashMap<u64, Polled>,
    device_timeout: Duration,
    changes: mpsc::UnboundedReceiver<PlanChange>,
    changer: mpsc::UnboundedSender<PlanChange>,
}

type Queue = BinaryHeap<Reverse<(Instant, u64)>>;

impl Scheduler {
    /// Jobs for every device: one per distinct non-zero tag period.
    pub fn new(devices: Vec<DevicePlan>, device_timeout: Duration) -> Self {
        let (changer, changes) = mpsc::unbounded_channel();
        let mut scheduler = Self {
            jobs: HashMap::new(),
            next_job: 0,
            devices: HashMap::new(),
            device_timeout,
            changes,
            changer,
        };
        for plan in devices {
            scheduler.add(plan, None);
        }
        scheduler
    }

    /// Where to send changes of the devices polled, before or while it runs.
    pub fn changer(&self) -> mpsc::UnboundedSender<PlanChange> {
        self.changer.clone()
    }

    /// Adds the device's jobs; returns their ids. `busy` is the device's lock
    /// (a new one unless it replaces an earlier build).
    fn add(&mut self, plan: DevicePlan, busy: Option<Arc<Mutex<()>>>) -> Vec<u64> {
        let mut by_period: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
        for (tag, &period) in plan.tag_periods.iter().enumerate() {
            if period > 0 {
                by_period.entry(period).or_default().push(tag as u32);
            }
        }
        let mut ids = Vec::new();
        for (period, tags) in by_period {
            let id = self.next_job;
            self.next_job += 1;
            self.jobs.insert(
                id,
                Job {
                    device: plan.device,
                    period: Duration::from_millis(period),
                    tags: tags.into(),
                },
            );
            ids.push(id);
        }
        // A device planned again (same name) replaces its earlier jobs.
        self.remove(plan.device);
        self.devices.insert(
            plan.device,
            Polled {
                busy: busy.unwrap_or_default(),
                counters: plan.counters,
                jobs: ids.clone(),
            },
        );
        ids
    }

    /// Drops the device's jobs; returns its lock.
    fn remove(&mut self, device: u64) -> Option<Arc<Mutex<()>>> {
        let polled = self.devices.remove(&device)?;
        for job in polled.jobs {
            self.jobs.remove(&job);
        }
        Some(polled.busy)
    }

    /// First due time of each of `jobs`: spread evenly over one period among the
    /// jobs that share that period.
    fn first_due(&self, jobs: &[u64], start: Instant, queue: &mut Queue) {
        let mut per_period: BTreeMap<Duration, u32> = BTreeMap::new();
        for id in jobs {
            *per_period.entry(self.jobs[id].period).or_default() += 1;
        }
        let mut seen: BTreeMap<Duration, u32> = BTreeMap::new();
        for id in jobs {
            let period = self.jobs[id].period;
            let index = seen.entry(period).or_default();
            let offset = period * *index / per_period[&period].max(1);
            *index += 1;
            queue.push(Reverse((start + offset, *id)));
        }
    }

    /// Runs until `shutdown` turns true (or its sender is dropped). Rounds in flight
    /// are left to finish on their own.
    pub async fn run<R: Rounds>(mut self, rounds: Arc<R>, mut shutdown: watch::Receiver<bool>) {
        let mut queue = Queue::new();
        let mut all: Vec<u64> = self.jobs.keys().copied().collect();
        all.sort_unstable();
        self.first_due(&all, Instant::now(), &mut queue);
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(u64, Instant)>();
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
                    while let Some(Reverse((due, id))) = queue.peek().copied() {
                        if due > now {
                            break;
                        }
                        queue.pop();
                        if let Some(next) = self.dispatch(id, &rounds, &done_tx) {
                            queue.push(Reverse((next, id)));
                        }
                    }
                }
                Some((id, completed)) = done_rx.recv() => {
                    if let Some(job) = self.jobs.get(&id) {
                        queue.push(Reverse((completed + job.period, id)));
                    }
                }
                Some(change) = self.changes.recv() => {
                    let (plan, busy) = match change {
                        PlanChange::Add(plan) => (plan, None),
                        PlanChange::Replace(old, plan) => {
                            let busy = self.remove(old);
                            (plan, busy)
                        }
                        PlanChange::Remove(device) => {
                            self.remove(device);
                            continue;
                        }
                    };
                    let ids = self.add(plan, busy);
                    self.first_due(&ids, Instant::now(), &mut queue);
                }
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        break;
                    }
                }
            }
        }
    }

    /// Starts job `id` if its device is free; otherwise counts a skip and returns
    /// when the job is due again. A job removed meanwhile is dropped.
    fn dispatch<R: Rounds>(
        &self,
        id: u64,
        rounds: &Arc<R>,
        done: &mpsc::UnboundedSender<(u64, Instant)>,
    ) -> Option<Instant> {
        let job = self.jobs.get(&id)?;
        let polled = self.devices.get(&job.device)?;
        let Ok(guard) = Arc::clone(&polled.busy).try_lock_owned() else {
            polled.counters.skipped();
            return Some(Instant::now() + job.period);
        };
        polled.counters.started();
        let future = rounds.run(job.device, Arc::clone(&job.tags));
        let limit = self.device_timeout;
        let counters = Arc::clone(&polled.counters);
        let done = done.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let outcome = timeout(limit, future).await.unwrap_or(RoundOutcome::Failed);
            drop(guard);
            let completed = Instant::now();
            counters.finished(completed - started, outcome == RoundOutcome::Failed);
            // The scheduler may have stopped; then nobody needs the completion.
            let _ = done.send((id, completed));
        });
        None
    }
}

#[cfg(test)]
mod tests;
