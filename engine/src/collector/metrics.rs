//! The collector's metric families: per-device rounds, failures and component
//! time, one series per device, kept across rebuilds of it and dropped when it
//! is removed.

use std::sync::Arc;

use crate::scheduler::{RoundCounters, RoundMetrics};
use crate::telemetry::{Counter, DeviceLabel, EncodeLabelSet, Family, FloatCounter, Metrics};

/// Which kind of component failed.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabel {
    device: String,
    kind: &'static str,
}

/// The families every device counts in.
#[derive(Debug, Clone, Default)]
pub struct DeviceMetrics {
    rounds: RoundMetrics,
    failures: Family<FailureLabel, Counter>,
    component_seconds: Family<DeviceLabel, FloatCounter>,
}

/// One device's series.
#[derive(Debug, Default)]
pub struct DeviceCounters {
    pub rounds: Arc<RoundCounters>,
    pub codec_failures: Counter,
    pub stage_failures: Counter,
    pub component_seconds: FloatCounter,
}

fn failure(device: &str, kind: &'static str) -> FailureLabel {
    FailureLabel {
        device: device.to_owned(),
        kind,
    }
}

impl DeviceMetrics {
    /// Registers the families (`sluice_rounds*`, `sluice_round_seconds`,
    /// `sluice_component_failures_total`, `sluice_component_seconds_total`).
    pub fn register(&self, metrics: &Metrics) {
        self.rounds.register(metrics);
        metrics.register(
            "sluice_component_failures",
            "Failed component calls (traps, limits) per device.",
            self.failures.clone(),
        );
        metrics.register(
            "sluice_component_seconds",
            "Time spent in component calls (codec and pipeline) per device.",
            self.component_seconds.clone(),
        );
    }

    /// The series of `device`: a rebuilt device goes on counting in its own.
    pub(super) fn device(&self, device: &str) -> DeviceCounters {
        DeviceCounters {
            rounds: self.rounds.device(device),
            codec_failures: self.failures.get_or_create_owned(&failure(device, "codec")),
            stage_failures: self.failures.get_or_create_owned(&failure(device, "stage")),
            component_seconds: self
                .component_seconds
                .get_or_create_owned(&DeviceLabel::of(device)),
        }
    }

    /// Drops the series of a device no longer configured.
    pub(super) fn forget(&self, device: &str) {
        self.rounds.forget(device);
        self.failures.remove(&failure(device, "codec"));
        self.failures.remove(&failure(device, "stage"));
        self.component_seconds.remove(&DeviceLabel::of(device));
    }
}
