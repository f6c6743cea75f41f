//! Watches every tenant's component pools: lists them once each with their tenant
//! (for `/metrics` and `/health`), and keeps a `COMPONENT_QUARANTINED` alarm open
//! on the tenant while one of its pools is quarantined (its calls failed too many
//! times in a row), cleared when the pool runs again.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;

use crate::alarm::{Alarms, Raise, Source};
use crate::clock::now_ms;
use crate::collector::{Device, Fleet};
use crate::runtime::PoolHealth;
use crate::telemetry::{
    Collector, DescriptorEncoder, EncodeLabelSet, Metrics, counters, encode_scraped, gauges,
};

/// The rule key of the alarm of a quarantined pool.
pub const QUARANTINE_RULE: &str = "COMPONENT_QUARANTINED";
/// How often the pools are looked at.
const WATCH_EVERY: Duration = Duration::from_secs(2);

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

/// Where the alarm of a tenant's quarantined component is kept.
fn alarm_subject(tenant: u32, component: &str) -> String {
    format!("{component}@tenant-{tenant}")
}

/// Raises and clears quarantine alarms until `shutdown`.
pub async fn watch(fleet: Arc<Fleet>, alarms: Arc<Alarms>, mut shutdown: watch::Receiver<bool>) {
    let mut open: HashSet<(u32, String)> = HashSet::new();
    let mut timer = tokio::time::interval(WATCH_EVERY);
    while crate::clock::next_tick(&mut timer, &mut shutdown).await {
        let now: HashSet<(u32, String)> = pools(fleet.roster().devices(), &alarms)
            .into_iter()
            .filter(|p| p.health.quarantined)
            .map(|p| (p.tenant, p.health.component))
            .collect();
        let store = Arc::clone(alarms.store());
        let (raise, clear): (Vec<_>, Vec<_>) = (
            now.difference(&open).cloned().collect(),
            open.difference(&now).cloned().collect(),
        );
        let applied = tokio::task::spawn_blocking(move || {
            let at = now_ms();
            for (tenant, component) in &raise {
                let alarm = Raise {
                    tenant_id: *tenant,
                    device_id: alarm_subject(*tenant, component),
                    rule_key: QUARANTINE_RULE.to_owned(),
                    source: Source::Engine,
                    message: format!("component `{component}` failed too often and is quarantined"),
                    ts_ms: at,
                    event_id: None,
                };
                if let Err(error) = store.raise(&alarm, at) {
                    tracing::error!(%error, component = %component, "cannot raise the quarantine alarm");
                }
            }
            for (tenant, component) in &clear {
                let subject = alarm_subject(*tenant, component);
                if let Err(error) = store.clear(&subject, QUARANTINE_RULE, at, None, at) {
                    tracing::error!(%error, component = %component, "cannot clear the quarantine alarm");
                }
            }
        })
        .await;
        if applied.is_ok() {
            open = now;
        }
    }
}
