//! What the collector's metrics read at each scrape: whether each device is
//! online, and the state of each connection.

use std::sync::Weak;

use super::fleet::Fleet;
use crate::io::LinkState;
use crate::model::{EntityKey, EntityState};
use crate::telemetry::{
    Collector, DescriptorEncoder, DeviceLabel, EncodeLabelSet, counters, encode_scraped, gauges,
};

/// A connection, by what it speaks and the first channel that uses it (never
/// by its address: `/metrics` may be open to anyone).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LinkLabel {
    protocol: String,
    connection: String,
}

/// A connection in one of its states.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LinkStateLabel {
    protocol: String,
    connection: String,
    state: &'static str,
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
            let entity = EntityKey::device(device.tenant_id, &device.id);
            let row = leases.get(&entity).ok().flatten();
            let up = row.is_some_and(|r| r.effective_state(now) == EntityState::Online);
            (DeviceLabel::of(&device.id), i64::from(up))
        });
        encode_scraped(
            &mut encoder,
            "sluice_device_online",
            "1 when the device answered its last round.",
            &gauges(online),
        )?;
        let mut states = Vec::new();
        let mut reconnects = Vec::new();
        for info in roster.links() {
            let (protocol, connection) = (info.protocol(), info.name.clone());
            for state in LinkState::ALL {
                let label = LinkStateLabel {
                    protocol: protocol.to_owned(),
                    connection: connection.clone(),
                    state: state.as_str(),
                };
                states.push((label, i64::from(info.link.state() == state)));
            }
            reconnects.push((
                LinkLabel {
                    protocol: protocol.to_owned(),
                    connection,
                },
                info.link.reconnects(),
            ));
        }
        encode_scraped(
            &mut encoder,
            "sluice_connection_state",
            "Connections to each endpoint in each state (1 for the state of a single connection).",
            &gauges(states),
        )?;
        encode_scraped(
            &mut encoder,
            "sluice_connection_reconnects",
            "Reconnects per connection.",
            &counters(reconnects),
        )
    }
}
