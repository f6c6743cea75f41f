//! Each tenant's sandbox limits, from `tenants[].limits`.

use std::collections::HashMap;
use std::time::Duration;

use crate::config::{GatewayConfig, TenantLimits};
use crate::runtime::Limits;

/// The sandbox limits of each tenant's components.
#[derive(Debug, Clone, Default)]
pub struct SandboxLimits(HashMap<u32, Limits>);

impl SandboxLimits {
    pub fn of(config: &GatewayConfig) -> Self {
        let limits = |t: TenantLimits| Limits {
            memory_bytes: usize::try_from(t.memory_mb << 20).unwrap_or(usize::MAX),
            fuel_per_call: t.fuel_per_call,
            instances: t.instances,
            quarantine_after: t.quarantine_after,
            quarantine_for: Duration::from_secs(t.quarantine_seconds),
        };
        Self(
            config
                .tenants
                .iter()
                .map(|t| (t.tenant_id, limits(t.limits)))
                .collect(),
        )
    }

    /// The limits of `tenant`'s components (the defaults without a tenant).
    pub fn get(&self, tenant: u32) -> Limits {
        self.0.get(&tenant).copied().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenants_limits_reach_its_sandboxes_and_others_get_the_defaults() {
        let config = crate::config::tests::load_str(
            "gw.yaml",
            "tenants:\n  - { tenantId: 1, name: t, limits: { memoryMb: 16, fuelPerCall: 5000000, instances: 2, quarantineAfter: 3, quarantineSeconds: 5 } }\n  - { tenantId: 2, name: plain }\n",
        )
        .expect("valid");
        let limits = SandboxLimits::of(&config);
        assert_eq!(
            limits.get(1),
            Limits {
                memory_bytes: 16 << 20,
                fuel_per_call: 5_000_000,
                instances: 2,
                quarantine_after: 3,
                quarantine_for: Duration::from_secs(5),
            }
        );
        assert_eq!(limits.get(2), Limits::DEFAULT);
        assert_eq!(limits.get(0), Limits::DEFAULT, "no tenant");
    }
}
