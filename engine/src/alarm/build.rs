//! The alarm service as the configuration describes it: each tenant's rules
//! component in a pool of its own (its sandbox), an evaluator per enabled device
//! with its pipeline's `alarms` settings, and one per tenant for driver events.

use std::collections::HashMap;
use std::sync::Arc;

use super::delivery::{DeliveryPlan, QuietHours, Recipient};
use super::service::{Alarms, DeviceRules, TenantRules};
use super::store::{AlarmStore, AuditWriter};
use crate::collector::{Device, PipelineSet, SandboxLimits, component_tag};
use crate::config::{DEFAULT_RULES, DeviceConfig, GatewayConfig};
use crate::model::TagSpec;
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
    let mut tenants: Vec<(u32, &str, Pos)> = vec![(0, DEFAULT_RULES, Pos::default())];
    tenants.extend(
        config
            .tenants
            .iter()
            .map(|t| (t.tenant_id, t.rules.as_str(), t.pos)),
    );
    let mut sandboxes_by_tenant = HashMap::new();
    for (tenant, name, pos) in tenants {
        let Some(pool) = rules_pool(registry, name, sandboxes.get(tenant), pos, &mut errors) else {
            continue;
        };
        match tenant_rules(tenant, pool) {
            Ok(rules) => {
                sandboxes_by_tenant.insert(tenant, rules);
            }
            Err(error) => errors.push(pos, error),
        }
    }
    let Some(whitelist) = whitelist else {
        return Err(errors);
    };
    let store = Arc::new(AlarmStore::new(store, whitelist, audit));
    let alarms = Alarms::new(store, HashMap::new(), sandboxes_by_tenant);
    for device in config.devices.iter().filter(|d| d.enabled) {
        match device_rules(&alarms, device, pipelines) {
            Ok(Some(rules)) => alarms.attach(&device.device_id, 0, rules),
            Ok(None) => {}
            Err(error) => errors.push(device.pos, error),
        }
    }
    errors.into_result(alarms)
}

/// A tenant's sandbox with the rules of its drivers.
fn tenant_rules(tenant: u32, pool: Arc<RulesPool>) -> Result<TenantRules, String> {
    let drivers = pool
        .evaluator(&[], &[])
        .map_err(|error| format!("tenant {tenant}: {error}"))?;
    Ok(TenantRules {
        pool,
        drivers: Some(Arc::new(drivers)),
    })
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
    let Some(pool) = alarms.pool(device.tenant_id) else {
        return Ok(None);
    };
    let tags: Vec<_> = device.tags().map(component_tag).collect();
    let device = RulesFor {
        id: &device.device_id,
        tenant_id: device.tenant_id,
        pipeline: &device.pipeline,
        tags: &tags,
    };
    rules_in(&pool, &device, pipelines)
}

/// What a device's rules are made for.
struct RulesFor<'a> {
    id: &'a str,
    tenant_id: u32,
    pipeline: &'a str,
    tags: &'a [TagSpec],
}

fn rules_in(
    pool: &Arc<RulesPool>,
    device: &RulesFor<'_>,
    pipelines: &PipelineSet,
) -> Result<Option<DeviceRules>, String> {
    let Some(spec) = pipelines.get(device.pipeline) else {
        return Ok(None);
    };
    pool.evaluator(&spec.alarms.settings, device.tags)
        .map(|evaluator| {
            Some(DeviceRules {
                tenant_id: device.tenant_id,
                evaluator,
            })
        })
        .map_err(|error| {
            format!(
                "device `{}`: the `alarms` of pipeline `{}` ({}): {error}",
                device.id, spec.name, spec.file
            )
        })
}

/// Puts the active version of rules component `name` to use in every tenant
/// sandbox that runs it: a new pool, its drivers' rules and the rules of each of
/// its `devices`, all built before any is swapped in, or none. The transition
/// whitelist that stored alarms and commands follow stays the one of the start.
///
/// # Errors
/// The component is not registered, or refuses a device's settings or tags.
pub fn reload_rules(
    alarms: &Alarms,
    registry: &Registry,
    name: &str,
    (devices, pipelines): (&[Arc<Device>], &PipelineSet),
    limits: &SandboxLimits,
) -> Result<usize, Diagnostics> {
    let mut errors = Diagnostics::new("rules");
    let mut fresh = Vec::new();
    for tenant in alarms.tenants_running(name) {
        let Some(pool) = rules_pool(
            registry,
            name,
            limits.get(tenant),
            Pos::default(),
            &mut errors,
        ) else {
            continue;
        };
        let mut built = Vec::new();
        for device in devices.iter().filter(|d| d.tenant_id == tenant) {
            let target = RulesFor {
                id: &device.id,
                tenant_id: tenant,
                pipeline: &device.pipeline_name,
                tags: &device.tags,
            };
            match rules_in(&pool, &target, pipelines) {
                Ok(Some(rules)) => built.push((device.id.clone(), rules)),
                Ok(None) => {}
                Err(error) => errors.push(Pos::default(), error),
            }
        }
        match tenant_rules(tenant, pool) {
            Ok(rules) => fresh.push((tenant, rules, built)),
            Err(error) => errors.push(Pos::default(), error),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let swapped = fresh.iter().map(|(_, _, built)| built.len()).sum();
    for (tenant, rules, built) in fresh {
        alarms.replace_tenant(tenant, rules, built);
    }
    Ok(swapped)
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
