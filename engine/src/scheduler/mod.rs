//! The poll scheduler: a due-time queue of jobs, one job per device and tag period.
//!
//! - Cross-device parallelism: every due job runs as its own task.
//! - A round that panics (a bug) is caught, counted as failed and logged; its
//!   job comes due again one period later, and the others run on.
//! - Per-device serialisation: a job whose device is still busy (another of its
//!   jobs, or a write) waits for it up to 50 ms, in turn; past that it is skipped
//!   and counted, and comes due again one period later.
//! - Each round runs under the per-device timeout; a round that times out is failed.
//! - The next round is due one period after the previous one *completed*, so a slow
//!   device is polled less often instead of piling up work.
//! - First due times are spread evenly over one period, so thousands of devices with
//!   the same period do not all fire at once.
//! - Due times fall on a grid (steps of 20 ms, or a twentieth of a shorter
//!   period's length, from the scheduler's start): the rounds of many devices
//!   start in one wake-up of the runtime, and their answers come back together,
//!   instead of one wake-up each. A device keeps its place on the grid from
//!   period to period.
//! - Tags with period 0 are never polled (write-only).
//! - Devices are added and removed while it runs ([`ScheduleChange`]); the others'
//!   due times are not touched.
//! - A stop starts no round and returns once the rounds in flight have ended,
//!   so nothing reports after it.

mod counters;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
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
    /// Reads `tags` (indexes into the device's tags) of the device scheduled as `device`.
    fn run(&self, device: u64, tags: Arc<[u32]>) -> RoundFuture;
}

/// What to poll for one device: its tags and their periods (0 = never).
#[derive(Debug, Clone)]
pub struct DeviceSchedule {
    /// Names the device in [`Rounds::run`] and [`ScheduleChange::Remove`]; unique.
    pub device: u64,
    pub tag_periods: Vec<u64>,
    /// Where the device's rounds are counted.
    pub counters: Arc<RoundCounters>,
}

/// A change of the devices polled, applied between two dispatches.
#[derive(Debug)]
pub enum ScheduleChange {
    /// Poll a new device; its first rounds are spread over one period from now.
    Add(DeviceSchedule),
    /// Stop polling a device; a round in flight finishes on its own.
    Remove(u64),
    /// Poll a new build of a device instead of the old one (`.0`): the new one
    /// waits for a round of the old one still in flight, so two rounds of one
    /// device never overlap.
    Replace(u64, DeviceSchedule),
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
    changes: mpsc::UnboundedReceiver<ScheduleChange>,
    changer: mpsc::UnboundedSender<ScheduleChange>,
    /// Where the grid of due times starts.
    epoch: Instant,
}

/// Due jobs: (due time, turn, job id), the earliest first; of jobs due at
/// once, one skipped last time (turn 0) goes before the others (turn 1), so a
/// device's jobs that keep coming due together take turns.
type Queue = BinaryHeap<Reverse<(Instant, u8, u64)>>;

/// How a job's attempt ended, sent back to the scheduler.
#[derive(Debug, Clone, Copy)]
struct Ended {
    job: u64,
    at: Instant,
    skipped: bool,
}

/// How long a job waits for its busy device before it is skipped.
const BUSY_WAIT: Duration = Duration::from_millis(50);

/// The widest step of the grid due times fall on. A wider step starts more
/// rounds per wake-up and holds a round's answer longer behind the others of
/// its step. At 1,000 devices a second, 20 ms (twenty rounds a step) took a
/// fifth off the engine's CPU against 10 ms, at the same publish lag p50;
/// 50 ms saved nothing more and doubled the lag (docs/performance.md).
const GRID: Duration = Duration::from_millis(20);

/// `at` moved to the nearest point of the grid of `period`'s jobs, which
/// starts at `epoch`: at most half a step (a fortieth of the period) away, so
/// a round is never due before 0.975 periods have passed.
fn on_grid(epoch: Instant, at: Instant, period: Duration) -> Instant {
    let step = GRID.min(period / 20).as_nanos();
    if step == 0 {
        return at;
    }
    let since = at.saturating_duration_since(epoch).as_nanos();
    let steps = (since + step / 2) / step;
    u64::try_from(steps * step).map_or(at, |nanos| epoch + Duration::from_nanos(nanos))
}

impl Scheduler {
    /// Jobs for every device: one per distinct non-zero tag period.
    pub fn new(devices: Vec<DeviceSchedule>, device_timeout: Duration) -> Self {
        let (changer, changes) = mpsc::unbounded_channel();
        let mut scheduler = Self {
            jobs: HashMap::new(),
            next_job: 0,
            devices: HashMap::new(),
            device_timeout,
            changes,
            changer,
            epoch: Instant::now(),
        };
        for schedule in devices {
            scheduler.add(schedule, None);
        }
        scheduler
    }

    /// Where to send changes of the devices polled, before or while it runs.
    pub fn changer(&self) -> mpsc::UnboundedSender<ScheduleChange> {
        self.changer.clone()
    }

    /// Adds the device's jobs; returns their ids. `busy` is the device's lock
    /// (a new one unless it replaces an earlier build).
    fn add(&mut self, schedule: DeviceSchedule, busy: Option<Arc<Mutex<()>>>) -> Vec<u64> {
        let mut by_period: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
        for (tag, &period) in schedule.tag_periods.iter().enumerate() {
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
                    device: schedule.device,
                    period: Duration::from_millis(period),
                    tags: tags.into(),
                },
            );
            ids.push(id);
        }
        // A device scheduled again (same name) replaces its earlier jobs.
        self.remove(schedule.device);
        self.devices.insert(
            schedule.device,
            Polled {
                busy: busy.unwrap_or_default(),
                counters: schedule.counters,
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
            queue.push(Reverse((
                on_grid(self.epoch, start + offset, period),
                1,
                *id,
            )));
        }
    }

    /// Runs until `shutdown` turns true (or its sender is dropped), then waits
    /// for the rounds in flight to end (each is bounded by the device timeout):
    /// once it returns no round reports any more, so a stop can give back the
    /// report numbers left unused (WAL-10 of `docs/wal.md`).
    pub async fn run<R: Rounds>(mut self, rounds: Arc<R>, mut shutdown: watch::Receiver<bool>) {
        let mut queue = Queue::new();
        let mut all: Vec<u64> = self.jobs.keys().copied().collect();
        all.sort_unstable();
        self.epoch = Instant::now();
        self.first_due(&all, self.epoch, &mut queue);
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Ended>();
        // One timer, moved when the earliest due time changes: a round's end
        // (a thousand a second at 1,000 devices) does not register a new one.
        let wake = sleep_until(self.epoch);
        tokio::pin!(wake);
        let mut armed: Option<Instant> = None;
        // Attempts spawned and not yet ended.
        let mut in_flight: usize = 0;
        loop {
            let next_due = queue.peek().map(|Reverse((due, _, _))| *due);
            if next_due != armed {
                if let Some(due) = next_due {
                    wake.as_mut().reset(due);
                }
                armed = next_due;
            }
            tokio::select! {
                () = &mut wake, if armed.is_some() => {
                    armed = None;
                    let now = Instant::now();
                    while let Some(Reverse((due, _, id))) = queue.peek().copied() {
                        if due > now {
                            break;
                        }
                        queue.pop();
                        if let Some(attempt) = self.attempt(id, &rounds) {
                            let done = done_tx.clone();
                            // The scheduler may have stopped; then nobody
                            // needs the end.
                            tokio::spawn(attempt.map(move |ended| done.send(ended)));
                            in_flight += 1;
                        }
                    }
                }
                Some(ended) = done_rx.recv() => {
                    in_flight -= 1;
                    self.requeue(ended, &mut queue);
                    // Ends that came meanwhile, in the same turn.
                    while let Ok(ended) = done_rx.try_recv() {
                        in_flight -= 1;
                        self.requeue(ended, &mut queue);
                    }
                }
                Some(change) = self.changes.recv() => {
                    let (schedule, busy) = match change {
                        ScheduleChange::Add(schedule) => (schedule, None),
                        ScheduleChange::Replace(old, schedule) => {
                            let busy = self.remove(old);
                            (schedule, busy)
                        }
                        ScheduleChange::Remove(device) => {
                            self.remove(device);
                            continue;
                        }
                    };
                    let ids = self.add(schedule, busy);
                    self.first_due(&ids, Instant::now(), &mut queue);
                }
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        break;
                    }
                }
            }
        }
        // Every attempt ends within its wait for the device and the device
        // timeout (a panic is caught inside it); the bound only guards a bug.
        let drained = async {
            while in_flight > 0 && done_rx.recv().await.is_some() {
                in_flight -= 1;
            }
        };
        if timeout(BUSY_WAIT + self.device_timeout * 2, drained)
            .await
            .is_err()
        {
            tracing::warn!("rounds still running at the stop were left behind");
        }
    }

    /// Queues the next round of a job that ended (unless it was removed meanwhile).
    fn requeue(&self, ended: Ended, queue: &mut Queue) {
        if let Some(job) = self.jobs.get(&ended.job) {
            let due = on_grid(self.epoch, ended.at + job.period, job.period);
            let turn = u8::from(!ended.skipped);
            queue.push(Reverse((due, turn, ended.job)));
        }
    }

    /// An attempt at job `id`: its round at once if its device is free,
    /// otherwise once it is (waiting up to [`BUSY_WAIT`]); a job that waited
    /// in vain is skipped and counted. None for a job removed meanwhile.
    fn attempt<R: Rounds>(
        &self,
        id: u64,
        rounds: &Arc<R>,
    ) -> Option<impl Future<Output = Ended> + Send + 'static> {
        let job = self.jobs.get(&id)?;
        let polled = self.devices.get(&job.device)?;
        let free = Arc::clone(&polled.busy).try_lock_owned().ok();
        let busy = Arc::clone(&polled.busy);
        let rounds = Arc::clone(rounds);
        let (device, tags) = (job.device, Arc::clone(&job.tags));
        let limit = self.device_timeout;
        let counters = Arc::clone(&polled.counters);
        Some(async move {
            let guard = match free {
                Some(guard) => guard,
                None => match timeout(BUSY_WAIT, busy.lock_owned()).await {
                    Ok(guard) => guard,
                    Err(_) => {
                        counters.skipped();
                        return Ended {
                            job: id,
                            at: Instant::now(),
                            skipped: true,
                        };
                    }
                },
            };
            counters.started();
            let started = Instant::now();
            // A panic in the round (a bug) fails this round only: the
            // scheduler, and the rounds running beside it, go on.
            let round = AssertUnwindSafe(async { rounds.run(device, tags).await }).catch_unwind();
            let outcome = match timeout(limit, round).await {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(panic)) => {
                    let message = panic
                        .downcast_ref::<&str>()
                        .copied()
                        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                        .unwrap_or("(not text)");
                    tracing::error!(device, message, "a round panicked; it counts as failed");
                    RoundOutcome::Failed
                }
                Err(_) => RoundOutcome::Failed,
            };
            drop(guard);
            let completed = Instant::now();
            counters.finished(completed - started, outcome == RoundOutcome::Failed);
            Ended {
                job: id,
                at: completed,
                skipped: false,
            }
        })
    }
}

#[cfg(test)]
mod tests;
