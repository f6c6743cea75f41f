//! Counters of the uplink, for `/health` and `/metrics`.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// Counters of the uplink, for `/health` and `/metrics`.
#[derive(Debug, Default)]
pub struct UplinkStats {
    pub(super) connected: AtomicBool,
    pub(super) connects: AtomicU64,
    pub(super) published: AtomicU64,
    pub(super) acked: AtomicU64,
    pub(super) dropped: AtomicU64,
    pub(super) last_error: Mutex<String>,
    /// When each QoS 1 publish awaiting its PUBACK was queued, oldest first (a
    /// broker acknowledges QoS 1 publishes of one connection in order).
    pub(super) pending: Mutex<VecDeque<Instant>>,
    pub(super) latency_sum_us: AtomicU64,
    pub(super) latency_count: AtomicU64,
}

impl UplinkStats {
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// Successful connections to the broker.
    pub fn connects(&self) -> u64 {
        self.connects.load(Ordering::Relaxed)
    }

    /// Messages handed to the client (replays included).
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Relaxed)
    }

    /// PUBACKs received.
    pub fn acked(&self) -> u64 {
        self.acked.load(Ordering::Relaxed)
    }

    /// Publishes the client refused (its queue was full); they stay in the log.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    pub fn last_error(&self) -> String {
        self.last_error
            .lock()
            .map(|e| e.clone())
            .unwrap_or_default()
    }

    /// Total seconds from queueing to PUBACK, and the number of PUBACKs timed.
    pub fn publish_latency(&self) -> (f64, u64) {
        (
            self.latency_sum_us.load(Ordering::Relaxed) as f64 / 1e6,
            self.latency_count.load(Ordering::Relaxed),
        )
    }

    /// QoS 1 publishes queued and not yet acknowledged.
    pub fn backlog(&self) -> usize {
        self.pending.lock().map(|p| p.len()).unwrap_or(0)
    }

    pub(super) fn queued(&self) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.push_back(Instant::now());
        }
    }

    pub(super) fn acknowledged(&self) {
        self.acked.fetch_add(1, Ordering::Relaxed);
        let queued = self.pending.lock().ok().and_then(|mut p| p.pop_front());
        if let Some(at) = queued {
            let us = u64::try_from(at.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.latency_sum_us.fetch_add(us, Ordering::Relaxed);
            self.latency_count.fetch_add(1, Ordering::Relaxed);
        }
    }
}
