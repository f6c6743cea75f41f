//! Per-device round counters and the round latency histogram.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds (ms) of the round latency histogram buckets; the last is +Inf.
pub const LATENCY_BUCKETS_MS: [u64; 11] = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000];

/// Counters of one device, updated by the scheduler.
#[derive(Debug, Default)]
pub struct RoundCounters {
    total: AtomicU64,
    skipped: AtomicU64,
    failed: AtomicU64,
    latency_sum_us: AtomicU64,
    /// Cumulative counts per bucket of [`LATENCY_BUCKETS_MS`], plus +Inf.
    latency_buckets: [AtomicU64; LATENCY_BUCKETS_MS.len() + 1],
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoundStats {
    pub total: u64,
    pub skipped: u64,
    pub failed: u64,
    pub latency_sum_us: u64,
    pub latency_buckets: Vec<u64>,
}

impl RoundCounters {
    pub(super) fn started(&self) {
        self.total.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn skipped(&self) {
        self.skipped.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn finished(&self, latency: Duration, failed: bool) {
        if failed {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.latency_sum_us.fetch_add(us, Ordering::Relaxed);
        let ms = us / 1000;
        let bucket = LATENCY_BUCKETS_MS
            .iter()
            .position(|bound| ms < *bound)
            .unwrap_or(LATENCY_BUCKETS_MS.len());
        for counter in &self.latency_buckets[bucket..] {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn snapshot(&self) -> RoundStats {
        RoundStats {
            total: self.total.load(Ordering::Relaxed),
            skipped: self.skipped.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            latency_sum_us: self.latency_sum_us.load(Ordering::Relaxed),
            latency_buckets: self
                .latency_buckets
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
        }
    }
}
