//! The alarm service as the configuration describes it: each tenant's rules
//! component in a pool of its own (its sandbox), an evaluator per enabled device
//! with its pipeline's `alarms` settings, and one per tenant for driver events.

use std::collections::HashMap;
use std::sync::Arc;

use super::delivery::{DeliveryPlan, QuietHours, Recipient};
use super::service::{Alarms, DeviceRules};
use super::store::{AlarmStore, AuditWriter};
use crate::collector::{PipelineSet, SandboxLimits, component_tag};
use crate::config::{DEFAULT_RULES, DeviceConfig, GatewayConfig};
use crate::runtime::{ComponentKind, Limits, Registry, RulesPool};
use crate::store::Store;
use crate::uplink::Uplink;
use crate::yaml::{Diagnostics, Pos};

/// Builds the alarm service for `config` (read from `file`).
///
/// # Errors
/// Every problem, at the device or tenant it concerns: a rules component that is
/// not registered or not a rules component, settings or tags it refuses.
pub fn build(
    file: &str,
    config: &GatewayConfig,
    registry: &Registry,
    pipelines: &PipelineSet,
    store: &Store,
    audit: Arc<dyn AuditWriter>,
) -> Result<Arc<Alarms>, Diagnostics> {
    let mut errors = Diagnostics::new(file);
    // The whitelist is the engine's, whatever rules a tenant runs.
    let whitelist = rules_pool(
        registry,
        DEFAULT_RULES,
        Limits::default(),
        Pos::default(),
        &mut errors,
    );
    let sandboxes = SandboxLimits::of(config);
    // Every configured tenant (and "no tenant") gets its sandbox now, so devices
    // added while the engine runs find theirs.
    let mut pools: HashMap<u32, Arc<RulesPool>> = HashMap::new();
    let mut tenants: Vec<(u32, &str, Pos)> = vec![(0, DEFAULT_RULES, Pos::default())];
    tenants.extend(
        config
            .tenants
            .iter()
            .map(|t| (t.tenant_id, t.rules.as_str(), t.pos)),
    );
    for (tenant, name, pos) in tenants {
        if let Some(pool) = rules_pool(registry, name, sandboxes.get(tenant), pos, &mut errors) {
            pools.insert(tenant, pool);
        }
    }
    let mut drivers = HashMap::new();
    for (tenant, pool) in &pools {
        match pool.evaluator(&[], &[]) {
            Ok(evaluator) => {
                drivers.insert(*tenant, evaluator);
            }
            Err(error) => errors.push(Pos::default(), format!("tenant {tenant}: {error}")),
        }
    }
    let Some(whitelist) = whitelist else {
        return Err(errors);
    };
    let store = Arc::new(AlarmStore::new(store, whitelist, audit));
    let alarms = Alarms::new(store, HashMap::new(), (drivers, pools));
    for device in config.devices.iter().filter(|d| d.enabled) {
        match device_rules(&alarms, device, pipelines) {
            Ok(Some(rules)) => alarms.attach(&device.device_id, rules),
            Ok(None) => {}
            Err(error) => errors.push(device.pos, error),
        }
    }
    errors.into_result(alarms)
}

/// The rules of one device: its tenant's rules component with the `alarms`
/// settings of its pipeline. `None` when its pipeline or tenant is unknown (the
/// collector reports those).
///
/// # Errors
/// What the rules component refuses of the settings or tags.
pub fn device_rules(
    alarms: &Alarms,
    device: &DeviceConfig,
    pipelines: &PipelineSet,
) -> Result<Option<DeviceRules>, String> {
    let (Some(pool), Some(spec)) = (
        alarms.pool(device.tenant_id),
        pipelines.get(&device.pipeline),
    ) else {
        return Ok(None);
    };
    let tags: Vec<_> = device.tags().map(component_tag).collect();
    pool.evaluator(&spec.alarms.settings, &tags)
        .map(|evaluator| {
            Some(DeviceRules {
                tenant_id: device.tenant_id,
                evaluator,
            })
        })
        .map_err(|error| {
            format!(
                "device `{}`: the `alarms` of pipeline `{}` ({}): {error}",
                device.device_id, spec.name, spec.file
            )
        })
}

/// How alarms are delivered: the alarm topic under the uplink's prefix, the
/// escalation delay, and each tenant's recipients with their quiet hours.
pub fn delivery_plan(config: &GatewayConfig, uplink: &Uplink) -> DeliveryPlan {
    let alarms = &config.collector.alarms;
    let recipients = config
        .tenants
        .iter()
        .map(|tenant| {
            let list = tenant
                .recipients
                .iter()
                .map(|r| Recipient {
                    name: r.name.clone(),
                    quiet_hours: r.quiet_hours.map(|(start, end)| QuietHours {
                        start,
                        end,
                        utc_offset_min: r.utc_offset_min.unwrap_or(alarms.utc_offset_min),
                    }),
                })
                .collect();
            (tenant.tenant_id, list)
        })
        .collect();
    DeliveryPlan {
        topic: uplink.topic(&alarms.topic),
        escalate_after_ms: (alarms.escalate_after_sec > 0).then(|| {
            i64::try_from(alarms.escalate_after_sec.saturating_mul(1000)).unwrap_or(i64::MAX)
        }),
        recipients,
    }
}

/// A new pool (sandbox) of the rules component `name`.
fn rules_pool(
    registry: &Registry,
    name: &str,
    limits: Limits,
    pos: Pos,
    errors: &mut Diagnostics,
) -> Option<Arc<RulesPool>> {
    let Some(component) = registry.active(name) else {
        errors.push(pos, format!("no rules component `{name}` is registered"));
        return None;
    };
    if component.kind() != ComponentKind::Rules {
        errors.push(
            pos,
            format!(
                "component `{name}` is a {} component, not a rules component",
                component.kind()
            ),
        );
        return None;
    }
    match registry.runtime().rules_pool(&component, limits) {
        Ok(pool) => Some(pool),
        Err(error) => {
            errors.push(pos, error.to_string());
            None
        }
    }
}
