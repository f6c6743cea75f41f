//! What the engine collects itself, which heartbeats from outside may not
//! speak for (STATE-8 of `docs/state.md`).

use super::fleet::Fleet;
use crate::lease::reported::Owners;

impl Owners for Fleet {
    fn own_device(&self, id: &str) -> Option<u32> {
        self.roster().get(id).map(|device| device.tenant_id)
    }

    /// A codec of its devices', or the decoder of those that publish by
    /// themselves: each renews its own driver row.
    fn own_driver(&self, tenant: u32, id: &str) -> bool {
        self.roster().devices().iter().any(|device| {
            device.tenant_id == tenant
                && (device
                    .channels
                    .iter()
                    .any(|c| c.session.get().pool().name() == id)
                    || device
                        .push
                        .as_ref()
                        .is_some_and(|p| p.decoder.get().component() == id))
        })
    }

    fn own_identity(&self, product_id: &str, device_num: &str) -> bool {
        self.roster().by_identity(product_id, device_num).is_some()
    }

    fn knows_tenant(&self, tenant: u32) -> bool {
        tenant == 0
            || self.read_config(|config| config.tenants.iter().any(|t| t.tenant_id == tenant))
    }
}
