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
