//! The collector's metrics: per-device round, failure and component-time
//! families (one series per device, kept across rebuilds of it and dropped when
//! it is removed), and, read at each scrape, whether each device is online and
//! the state of each connection.

use std::sync::{Arc, Weak};

use super::fleet::Fleet;
use crate::io::LinkState;
use crate::model::{EntityState, EntityType};
use crate::scheduler::{RoundCounters, RoundMetrics};
use crate::telemetry::{
    Collector, Counter, DescriptorEncoder, DeviceLabel, EncodeLabelSet, Family, FloatCounter,
    Metrics, scraped_counters, scraped_gauges,
};

/// Which kind of component failed.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FailureLabel {
    device: String,
    kind: &'static str,
}

/// A connection, by what it speaks and where it goes.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LinkLabel {
    protocol: &'static str,
    address: String,
}

/// A connection in one of its states.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LinkStateLabel {
    protocol: &'static str,
    address: String,
    state: &'static str,
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

/// Device states and connection states, read from the fleet at each scrape.
#[derive(Debug)]
pub(super) struct FleetState(pub(super) Weak<Fleet>);

impl Collector for FleetState {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let Some(fleet) = self.0.upgrade() else {
            return Ok(());
        };
        let roster = fleet.roster();
        let leases = fleet.services().leases.store();
        let now = crate::clock::now_ms();
        let online = roster.devices().iter().map(|device| {
            let row = leases.get(EntityType::Device, &device.id).ok().flatten();
            let up = row.is_some_and(|r| r.effective_state(now) == EntityState::Online);
            (DeviceLabel::of(&device.id), i64::from(up))
        });
        let help = (
            "sluice_device_online",
            "1 when the device answered its last round.",
        );
        scraped_gauges(&mut encoder, help, online)?;
        let mut states = Vec::new();
        let mut reconnects = Vec::new();
        for info in roster.links() {
            let Ok(link) = info.link.try_lock() else {
                continue;
            };
            let (protocol, address) = (info.protocol(), info.address());
            for state in LinkState::ALL {
                let label = LinkStateLabel {
                    protocol,
                    address: address.clone(),
                    state: state.as_str(),
                };
                states.push((label, i64::from(link.state() == state)));
            }
            reconnects.push((LinkLabel { protocol, address }, link.reconnects()));
        }
        let help = (
            "sluice_connection_state",
            "1 for the state each connection is in.",
        );
        scraped_gauges(&mut encoder, help, states)?;
        let help = ("sluice_connection_reconnects", "Reconnects per connection.");
        scraped_counters(&mut encoder, help, reconnects)
    }
}
