//! Where an entity's state changes are announced.

use crate::model::{EntityType, StateRow};
use crate::mqtt::{DRIVER_PRODUCT, DeviceTopic};
use crate::uplink::Uplink;

/// Where an entity's state changes are announced: the MQTT identity of its
/// status and event topics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announce {
    pub product_id: String,
    pub device_num: String,
}

impl Announce {
    /// The topics of the device (or driver) with this MQTT identity.
    pub fn device(product_id: &str, device_num: &str) -> Self {
        Self {
            product_id: product_id.to_owned(),
            device_num: device_num.to_owned(),
        }
    }

    /// The topics of a tenant's protocol driver:
    /// `{prefix}/driver/{tenantId}/{driver}/...` (each tenant's driver has a
    /// row, and a status, of its own).
    pub fn driver(tenant_id: u32, driver: &str) -> Self {
        Self {
            product_id: DRIVER_PRODUCT.to_owned(),
            device_num: format!("{tenant_id}/{driver}"),
        }
    }

    /// Where a row kept by heartbeats from outside (STATE-8) is announced: a
    /// driver's under its tenant, a device's at the identity its heartbeats
    /// gave; `None` for the engine's own rows, or a device reported with no identity.
    pub fn of_reported(row: &StateRow) -> Option<Self> {
        row.reported_by()?;
        match row.entity_type {
            EntityType::Driver => Some(Self::driver(row.tenant_id, &row.entity_id)),
            EntityType::Device => {
                let text = |key: &str| row.extension.get(key).and_then(serde_json::Value::as_str);
                Some(Self::device(text("productId")?, text("deviceNum")?))
            }
        }
    }

    pub(super) fn topic(&self, uplink: &Uplink, topic: DeviceTopic<'_>) -> String {
        uplink
            .topics()
            .device(&self.product_id, &self.device_num, topic)
    }
}
