//! Every tenant's component pools, listed once each with their tenant (for
//! `/metrics`, `/health` and the quarantine alarm).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};

use crate::alarm::Alarms;
use crate::collector::{Device, Fleet};
use crate::runtime::PoolHealth;
use crate::telemetry::{
    Collector, DescriptorEncoder, EncodeLabelSet, Metrics, counters, encode_scraped, gauges,
};

/// A pool and the tenant it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantPool {
    pub tenant: u32,
    pub health: PoolHealth,
}

/// Every pool in use (codecs, stages, rules), once each.
pub fn pools(devices: &[Arc<Device>], alarms: &Alarms) -> Vec<TenantPool> {
    let mut seen = HashSet::new();
    let mut pools = Vec::new();
    let device_pools = devices
        .iter()
        .flat_map(|d| d.component_health().into_iter().map(|h| (d.tenant_id, h)));
    for (tenant, health) in device_pools.chain(alarms.component_health()) {
        if seen.insert(health.pool) {
            pools.push(TenantPool { tenant, health });
        }
    }
    pools.sort_by(|a, b| (a.tenant, &a.health.component).cmp(&(b.tenant, &b.health.component)));
    pools
}

/// A tenant's component.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabel {
    tenant: u32,
    component: String,
}

/// Every pool's failures and quarantine, read at each scrape.
#[derive(Debug)]
struct PoolMetrics {
    fleet: Weak<Fleet>,
    alarms: Weak<Alarms>,
}

impl Collector for PoolMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let (Some(fleet), Some(alarms)) = (self.fleet.upgrade(), self.alarms.upgrade()) else {
            return Ok(());
        };
        let pools = pools(fleet.roster().devices(), &alarms);
        let label = |p: &TenantPool| PoolLabel {
            tenant: p.tenant,
            component: p.health.component.clone(),
        };
        encode_scraped(
            &mut encoder,
            "sluice_component_pool_failures",
            "Failed calls (traps, limits) per tenant and component; calls refused during a quarantine are not counted.",
            &counters(pools.iter().map(|p| (label(p), p.health.failures))),
        )?;
        // A tenant's component may run in several pools (one per pipeline using a
        // stage): it is quarantined when any of them is.
        let mut quarantined: HashMap<PoolLabel, i64> = HashMap::new();
        for pool in &pools {
            let flag = quarantined.entry(label(pool)).or_default();
            *flag = (*flag).max(i64::from(pool.health.quarantined));
        }
        encode_scraped(
            &mut encoder,
            "sluice_component_quarantined",
            "1 while a tenant's component is quarantined after failing too often.",
            &gauges(quarantined),
        )
    }
}

/// Registers every pool's failures and quarantine state, read at each scrape.
pub fn register_metrics(fleet: &Arc<Fleet>, alarms: &Arc<Alarms>, metrics: &Metrics) {
    metrics.collect(PoolMetrics {
        fleet: Arc::downgrade(fleet),
        alarms: Arc::downgrade(alarms),
    });
}
