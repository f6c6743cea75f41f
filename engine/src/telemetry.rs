//! The engine's metrics: one registry in which each module registers the typed
//! metric families it counts (prometheus-client), rendered as Prometheus text for
//! `GET /metrics`. Counters are registered without their `_total`, which the
//! encoder adds.

use std::fmt;
use std::hash::Hash;
use std::sync::RwLock;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::registry::{Metric, Registry};

pub use prometheus_client::collector::Collector;
pub use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
pub use prometheus_client::metrics::counter::{ConstCounter, Counter};
pub use prometheus_client::metrics::family::Family;
pub use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
pub use prometheus_client::metrics::histogram::Histogram;

use crate::sync::{read, write};

/// A counter of seconds (or any fraction).
pub type FloatCounter = Counter<f64, std::sync::atomic::AtomicU64>;

/// The `Content-Type` of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// Where every module registers its metric families.
pub struct Metrics {
    registry: RwLock<Registry>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            registry: RwLock::new(Registry::default()),
        }
    }
}

impl Metrics {
    /// Registers `metric` (a counter, gauge, histogram or a family of them). The
    /// registry ends `help` with a full stop.
    pub fn register(&self, name: &str, help: &str, metric: impl Metric) {
        let help = help.strip_suffix('.').unwrap_or(help);
        write(&self.registry).register(name, help, metric);
    }

    /// Registers metrics computed at each scrape from the engine's state.
    pub fn collect(&self, collector: impl Collector) {
        write(&self.registry).register_collector(Box::new(collector));
    }

    /// Every metric, in the Prometheus text format.
    ///
    /// # Errors
    /// A collector that failed to encode its metrics.
    pub fn render(&self) -> Result<String, fmt::Error> {
        let mut text = String::with_capacity(8192);
        prometheus_text::encode(&mut text, &read(&self.registry))?;
        Ok(text)
    }
}

/// Encodes `metric`, read or computed by a collector at scrape time (a counter's
/// `name` without its `_total`).
///
/// # Errors
/// A write to the scrape's text failed.
pub fn encode_scraped(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    metric: &impl EncodeMetric,
) -> fmt::Result {
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

/// A family of gauges with these values; values of the same labels add up.
pub fn gauges<L: Labels>(values: impl IntoIterator<Item = (L, i64)>) -> Family<L, Gauge> {
    let family = Family::<L, Gauge>::default();
    for (labels, value) in values {
        family.get_or_create(&labels).inc_by(value);
    }
    family
}

/// A family of counters with these values; values of the same labels add up.
pub fn counters<L: Labels>(values: impl IntoIterator<Item = (L, u64)>) -> Family<L, Counter> {
    let family = Family::<L, Counter>::default();
    for (labels, value) in values {
        family.get_or_create(&labels).inc_by(value);
    }
    family
}

/// What a metric family's labels must be.
pub trait Labels: EncodeLabelSet + Clone + Hash + Eq + fmt::Debug + Send + Sync + 'static {}

impl<T: EncodeLabelSet + Clone + Hash + Eq + fmt::Debug + Send + Sync + 'static> Labels for T {}

/// The labels of a per-device metric.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeviceLabel {
    pub device: String,
}

impl DeviceLabel {
    pub fn of(device: &str) -> Self {
        Self {
            device: device.to_owned(),
        }
    }
}
