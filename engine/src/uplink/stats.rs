//! Counters of the uplink, for `/health` and `/metrics`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::clock::now_ms;
use crate::sync::lock;
use crate::telemetry::{
    Collector, ConstGauge, Counter, DescriptorEncoder, Gauge, Histogram, Metrics, encode_scraped,
};

/// Upper bounds (s) of the publish latency histogram (queued to PUBACK).
const PUBLISH_BUCKETS_S: [f64; 10] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];

/// Whole days from now until `expiry_ms` (0: none).
fn days_left(expiry_ms: &AtomicI64) -> Option<i64> {
    match expiry_ms.load(Ordering::Relaxed) {
        0 => None,
        expires => Some((expires - now_ms()).div_euclid(86_400_000)),
    }
}

/// The days left on the client certificate, computed at each scrape.
#[derive(Debug)]
struct CertificateDays(Arc<AtomicI64>);

impl Collector for CertificateDays {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let Some(days) = days_left(&self.0) else {
            return Ok(());
        };
        encode_scraped(
            &mut encoder,
            "sluice_mqtt_client_certificate_days_left",
            "Days until the MQTT client certificate of the last connect expires.",
            &ConstGauge::new(days),
        )
    }
}

/// Counters of the uplink, for `/health` and `/metrics`.
#[derive(Debug)]
pub struct UplinkStats {
    pub(super) connected: Gauge,
    pub(super) connects: Counter,
    pub(super) published: Counter,
    pub(super) acked: Counter,
    pub(super) dropped: Counter,
    pub(super) last_error: Mutex<String>,
    /// When the client certificate of the last connect stops being valid, ms
    /// since the epoch; 0 without one.
    client_certificate_expiry_ms: Arc<AtomicI64>,
    /// When each QoS 1 publish awaiting its PUBACK was queued, oldest first (a
    /// broker acknowledges QoS 1 publishes of one connection in order).
    pending: Mutex<VecDeque<Instant>>,
    backlog: Gauge,
    latency: Histogram,
}

impl Default for UplinkStats {
    fn default() -> Self {
        Self {
            connected: Gauge::default(),
            connects: Counter::default(),
            published: Counter::default(),
            acked: Counter::default(),
            dropped: Counter::default(),
            last_error: Mutex::default(),
            client_certificate_expiry_ms: Arc::default(),
            pending: Mutex::default(),
            backlog: Gauge::default(),
            latency: Histogram::new(PUBLISH_BUCKETS_S),
        }
    }
}

impl UplinkStats {
    /// Registers the uplink's metrics (`sluice_mqtt_*`).
    pub fn register(&self, metrics: &Metrics) {
        let gauges = [
            (
                "sluice_mqtt_connected",
                "1 while connected to the broker.",
                &self.connected,
            ),
            (
                "sluice_mqtt_backlog",
                "QoS 1 messages queued and not yet acknowledged.",
                &self.backlog,
            ),
        ];
        for (name, help, gauge) in gauges {
            metrics.register(name, help, gauge.clone());
        }
        let counters = [
            (
                "sluice_mqtt_published",
                "Messages handed to the MQTT client.",
                &self.published,
            ),
            ("sluice_mqtt_acked", "PUBACKs received.", &self.acked),
            (
                "sluice_mqtt_dropped",
                "Messages dropped (client queue full).",
                &self.dropped,
            ),
        ];
        for (name, help, counter) in counters {
            metrics.register(name, help, counter.clone());
        }
        metrics.register(
            "sluice_mqtt_publish_seconds",
            "Time from queueing a QoS 1 publish to its PUBACK.",
            self.latency.clone(),
        );
        metrics.collect(CertificateDays(Arc::clone(
            &self.client_certificate_expiry_ms,
        )));
    }

    /// Days until the client certificate of the last connect stops being
    /// valid (negative once it has), without one `None`.
    pub fn client_certificate_days_left(&self) -> Option<i64> {
        days_left(&self.client_certificate_expiry_ms)
    }

    pub(super) fn set_client_certificate_expiry(&self, expires_ms: Option<i64>) {
        self.client_certificate_expiry_ms
            .store(expires_ms.unwrap_or(0), Ordering::Relaxed);
    }

    pub fn connected(&self) -> bool {
        self.connected.get() != 0
    }

    /// Successful connections to the broker.
    pub fn connects(&self) -> u64 {
        self.connects.get()
    }

    /// Messages handed to the client (replays included).
    pub fn published(&self) -> u64 {
        self.published.get()
    }

    /// PUBACKs received.
    pub fn acked(&self) -> u64 {
        self.acked.get()
    }

    /// Publishes the client refused (its queue was full); they stay in the log.
    pub fn dropped(&self) -> u64 {
        self.dropped.get()
    }

    pub fn last_error(&self) -> String {
        lock(&self.last_error).clone()
    }

    /// QoS 1 publishes queued and not yet acknowledged.
    pub fn backlog(&self) -> usize {
        lock(&self.pending).len()
    }

    pub(super) fn set_connected(&self, connected: bool) -> bool {
        self.connected.set(i64::from(connected)) != 0
    }

    pub(super) fn queued(&self) {
        let mut pending = lock(&self.pending);
        pending.push_back(Instant::now());
        self.backlog.set(pending.len() as i64);
    }

    pub(super) fn acknowledged(&self) {
        self.acked.inc();
        let mut pending = lock(&self.pending);
        if let Some(at) = pending.pop_front() {
            self.latency.observe(at.elapsed().as_secs_f64());
        }
        self.backlog.set(pending.len() as i64);
    }
}
