//! Per-device round counters and the round latency histogram: handles into the
//! metric families of [`RoundMetrics`], one series per device.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::telemetry::{Counter, DeviceLabel, Family, Histogram, Metrics};

/// Upper bounds (s) of the round latency histogram buckets; +Inf follows. A
/// round over loopback takes a few tenths of a millisecond, hence the fine start.
pub const LATENCY_BUCKETS_S: [f64; 17] = [
    0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS_S)
}

/// The round families of every device.
#[derive(Debug, Clone)]
pub struct RoundMetrics {
    total: Family<DeviceLabel, Counter>,
    skipped: Family<DeviceLabel, Counter>,
    failed: Family<DeviceLabel, Counter>,
    latency: Family<DeviceLabel, Histogram, fn() -> Histogram>,
}

impl Default for RoundMetrics {
    fn default() -> Self {
        Self {
            total: Family::default(),
            skipped: Family::default(),
            failed: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
        }
    }
}

impl RoundMetrics {
    /// Registers the families as `sluice_rounds_total`, `sluice_rounds_skipped_total`,
    /// `sluice_rounds_failed_total` and `sluice_round_seconds`.
    pub fn register(&self, metrics: &Metrics) {
        metrics.register("sluice_rounds", "Poll rounds started.", self.total.clone());
        metrics.register(
            "sluice_rounds_skipped",
            "Rounds skipped because the device was busy.",
            self.skipped.clone(),
        );
        metrics.register(
            "sluice_rounds_failed",
            "Rounds that could not read the device.",
            self.failed.clone(),
        );
        metrics.register(
            "sluice_round_seconds",
            "Duration of poll rounds.",
            self.latency.clone(),
        );
    }

    /// The counters of `device` (the same series for every build of it).
    pub fn device(&self, device: &str) -> Arc<RoundCounters> {
        let label = DeviceLabel::of(device);
        Arc::new(RoundCounters {
            total: self.total.get_or_create_owned(&label),
            skipped: self.skipped.get_or_create_owned(&label),
            failed: self.failed.get_or_create_owned(&label),
            latency: self.latency.get_or_create_owned(&label),
            last_latency_us: AtomicU64::new(NO_ROUND),
        })
    }

    /// Drops the series of a device no longer configured.
    pub fn forget(&self, device: &str) {
        let label = DeviceLabel::of(device);
        self.total.remove(&label);
        self.skipped.remove(&label);
        self.failed.remove(&label);
        self.latency.remove(&label);
    }
}

/// Counters of one device, updated by the scheduler.
#[derive(Debug)]
pub struct RoundCounters {
    total: Counter,
    skipped: Counter,
    failed: Counter,
    latency: Histogram,
    /// The last finished round's latency in µs; [`NO_ROUND`] before the first.
    last_latency_us: AtomicU64,
}

const NO_ROUND: u64 = u64::MAX;

impl Default for RoundCounters {
    /// Counters of their own, in no family.
    fn default() -> Self {
        Self {
            total: Counter::default(),
            skipped: Counter::default(),
            failed: Counter::default(),
            latency: latency_histogram(),
            last_latency_us: AtomicU64::new(NO_ROUND),
        }
    }
}

/// A copy of the counters at one moment, for tests.
#[cfg(test)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundStats {
    pub total: u64,
    pub skipped: u64,
    pub failed: u64,
}

impl RoundCounters {
    pub(super) fn started(&self) {
        self.total.inc();
    }

    pub(super) fn skipped(&self) {
        self.skipped.inc();
    }

    pub(super) fn finished(&self, latency: Duration, failed: bool) {
        if failed {
            self.failed.inc();
        }
        self.latency.observe(latency.as_secs_f64());
        let micros = u64::try_from(latency.as_micros()).unwrap_or(NO_ROUND - 1);
        self.last_latency_us.store(micros, Ordering::Relaxed);
    }

    /// How long the last finished round took, if one finished.
    pub fn last_latency(&self) -> Option<Duration> {
        match self.last_latency_us.load(Ordering::Relaxed) {
            NO_ROUND => None,
            micros => Some(Duration::from_micros(micros)),
        }
    }

    #[cfg(test)]
    pub(super) fn snapshot(&self) -> RoundStats {
        RoundStats {
            total: self.total.get(),
            skipped: self.skipped.get(),
            failed: self.failed.get(),
        }
    }
}
