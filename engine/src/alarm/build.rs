//! The alarm service as the configuration describes it: each tenant's rules
//! component in a pool of its own (its sandbox), an evaluator per enabled device
//! with its pipeline's `alarms` settings, and one per tenant for driver events.

use std::collections::HashMap;
use std::sync::Arc;

use super::delivery::{DeliveryPlan, QuietHours, Recipient};
use super::service::{Alarms, DeviceRules};
use super::store::{AlarmStore, AuditWriter};
use crate::collector::{PipelineSet, SandboxLimits, component_tag};
use crate::config::{DEFAULT_RULES, GatewayConfig};
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
    let mut pools: HashMap<u32, Option<Arc<RulesPool>>> = HashMap::new();
    let mut devices = HashMap::new();
    for device in config.devices.iter().filter(|d| d.enabled) {
        let tenant = device.tenant_id;
        let pool = pools
            .entry(tenant)
            .or_insert_with(|| {
                let (name, pos) = config
                    .tenant(tenant)
                    .map_or((DEFAULT_RULES, device.pos), |t| (t.rules.as_str(), t.pos));
                rules_pool(registry, name, sandboxes.get(tenant), pos, &mut errors)
            })
            .clone();
        let (Some(pool), Some(spec)) = (pool, pipelines.get(&device.pipeline)) else {
            // An unknown pipeline is reported by the collector.
            continue;
        };
        let tags: Vec<_> = device.tags().map(component_tag).collect();
        match pool.evaluator(&spec.alarms.settings, &tags) {
            Ok(evaluator) => {
                devices.insert(
                    device.device_id.clone(),
                    DeviceRules {
                        tenant_id: tenant,
                        evaluator,
                    },
                );
            }
            Err(error) => errors.push(
                device.pos,
                format!(
                    "device `{}`: the `alarms` of pipeline `{}` ({}): {error}",
                    device.device_id, spec.name, spec.file
                ),
            ),
        }
    }
    let mut drivers = HashMap::new();
    for (tenant, pool) in pools {
        let Some(pool) = pool else { continue };
        match pool.evaluator(&[], &[]) {
            Ok(evaluator) => {
                drivers.insert(tenant, evaluator);
            }
            Err(error) => errors.push(Pos::default(), format!("tenant {tenant}: {error}")),
        }
    }
    let Some(whitelist) = whitelist else {
        return Err(errors);
    };
    let store = Arc::new(AlarmStore::new(store, whitelist, audit));
    errors.into_result(Alarms::new(store, devices, drivers))
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
