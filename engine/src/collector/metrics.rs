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

/// What became of a message a device published.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MessageLabel {
    device: String,
    outcome: &'static str,
}

fn message(device: &str, outcome: &'static str) -> MessageLabel {
    MessageLabel {
        device: device.to_owned(),
        outcome,
    }
}

/// The outcomes a device's messages are counted by.
const MESSAGE_OUTCOMES: [&str; 3] = ["received", "refused", "dropped"];

/// The families every device counts in.
#[derive(Debug, Clone, Default)]
pub struct DeviceMetrics {
    rounds: RoundMetrics,
    failures: Family<FailureLabel, Counter>,
    component_seconds: Family<DeviceLabel, FloatCounter>,
    messages: Family<MessageLabel, Counter>,
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
        metrics.register(
            "sluice_device_messages",
            "Messages of devices that publish by themselves, per device: received, refused \
             (by the decoder, in part or whole) and dropped (over the device's rate).",
            self.messages.clone(),
        );
    }

    /// The message series of a device that publishes by itself.
    pub(super) fn messages(&self, device: &str) -> super::push::MessageCounters {
        let [received, refused, dropped] = MESSAGE_OUTCOMES
            .map(|outcome| self.messages.get_or_create_owned(&message(device, outcome)));
        super::push::MessageCounters {
            received,
            refused,
            dropped,
        }
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
        for outcome in MESSAGE_OUTCOMES {
            self.messages.remove(&message(device, outcome));
        }
    }
}
