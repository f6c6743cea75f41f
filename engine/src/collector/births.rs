//! What the Sparkplug edge node's births need of the collector: the devices
//! this engine polls, their tags, last values and lease states.

use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::watch;

use super::device::Device;
use super::fleet::Fleet;
use crate::clock::now_ms;
use crate::model::{EntityType, StateFilter};
use crate::mqtt::sparkplug::{DeviceBirth, MetricTable};
use crate::uplink::Births;

/// The fleet as the edge node's source of births.
#[derive(Debug)]
pub struct FleetBirths(pub Arc<Fleet>);

impl FleetBirths {
    /// Devices whose lease is live now: online, in maintenance or at fault. A
    /// device without a lease row has not been seen yet, so it counts as
    /// offline; when the store fails every device counts as live (a lease
    /// change then tells).
    fn live(&self) -> Option<HashSet<String>> {
        let filter = StateFilter {
            tenant: None,
            entity_type: Some(EntityType::Device),
            parent: None,
        };
        let now = now_ms();
        match self.0.services().leases.store().list(&filter) {
            Ok(rows) => Some(
                rows.into_iter()
                    .filter(|row| row.effective_state(now).is_live())
                    .map(|row| row.entity_id)
                    .collect(),
            ),
            Err(error) => {
                tracing::warn!(%error, "device states unreadable for the Sparkplug births");
                None
            }
        }
    }
}

fn birth(device: &Device, offline: bool) -> DeviceBirth {
    DeviceBirth {
        device_id: device.id.clone(),
        offline,
        tags: Arc::clone(&device.tags),
        metrics: device
            .reporter
            .metric_table()
            .cloned()
            .unwrap_or_else(|| MetricTable::new(&device.id, &device.tags, false)),
        latest: device.latest.view().samples,
    }
}

impl Births for FleetBirths {
    fn devices(&self) -> Vec<DeviceBirth> {
        let live = self.live();
        let roster = self.0.roster();
        roster
            .devices()
            .iter()
            .filter(|device| self.0.owns(&device.id))
            .map(|device| {
                let offline = live.as_ref().is_some_and(|live| !live.contains(&device.id));
                birth(device, offline)
            })
            .collect()
    }

    fn device(&self, device_id: &str) -> Option<DeviceBirth> {
        let roster = self.0.roster();
        let device = roster.get(device_id).filter(|d| self.0.owns(&d.id))?;
        Some(birth(device, false))
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.0.subscribe()
    }
}
