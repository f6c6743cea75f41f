//! Alarm rules as the configuration asks for them: each tenant's rules component
//! in a sandbox of its own (with the rules of its drivers), each device's rules
//! with its pipeline's `alarms` settings, and the whitelists the stores follow.

use std::collections::HashMap;
use std::sync::Arc;

use super::limits::SandboxLimits;
use super::pools::{Pools, fresh_rules};
use crate::config::{DEFAULT_RULES, GatewayConfig};
use crate::model::{TagSpec, Whitelist};
use crate::pipeline::{PipelineSet, PipelineSpec};
use crate::runtime::{CallError, Evaluator, Limits, Registry, RulesPool};
use crate::yaml::{Diagnostics, Pos};

/// One device's rules: its tenant's component with its pipeline's settings.
#[derive(Debug)]
pub struct DeviceRules {
    pub tenant_id: u32,
    pub evaluator: Evaluator,
}

/// One tenant's rules sandbox and the rules of its drivers.
#[derive(Debug)]
pub struct TenantRules {
    pub pool: Arc<RulesPool>,
    pub drivers: Option<Arc<Evaluator>>,
}

/// What a device's rules are made for.
#[derive(Debug, Clone, Copy)]
pub struct RulesTarget<'a> {
    pub device_id: &'a str,
    pub tenant_id: u32,
    pub pipeline: &'a str,
    pub tags: &'a Arc<[TagSpec]>,
}

/// The whitelists of the engine's own rules component, whatever rules a tenant
/// runs: stored alarms and commands follow one state machine. Those of the start
/// when `pools` keeps them.
pub(super) fn whitelist(
    registry: &Registry,
    pools: &Pools,
    errors: &mut Diagnostics,
) -> Option<Whitelist> {
    if let Some(running) = pools.whitelist() {
        return Some(running.clone());
    }
    let read = fresh_rules(registry, DEFAULT_RULES, Limits::default())
        .and_then(|pool| pool.whitelist().map_err(|e| e.to_string()));
    match read {
        Ok(whitelist) => Some(whitelist),
        Err(error) => {
            errors.push(Pos::default(), format!("the transition whitelist: {error}"));
            None
        }
    }
}

/// Every configured tenant's sandbox (and "no tenant"'s), so devices added while
/// the engine runs find theirs.
pub(super) fn tenants(
    config: &GatewayConfig,
    registry: &Registry,
    pools: &mut Pools,
    limits: &SandboxLimits,
    errors: &mut Diagnostics,
) -> HashMap<u32, TenantRules> {
    let mut wanted: Vec<(u32, &str, Pos)> = vec![(0, DEFAULT_RULES, Pos::default())];
    wanted.extend(
        config
            .tenants
            .iter()
            .map(|t| (t.tenant_id, t.rules.as_str(), t.pos)),
    );
    let mut tenants = HashMap::new();
    for (tenant, name, pos) in wanted {
        // A running sandbox is not called again: it was checked when it was made,
        // and one quarantined must not stop a reload of another tenant's devices.
        let built =
            pools
                .rules(registry, limits, tenant, name)
                .and_then(|(pool, fresh)| match fresh {
                    true => tenant_rules(tenant, pool),
                    false => Ok(TenantRules {
                        pool,
                        drivers: None,
                    }),
                });
        match built {
            Ok(rules) => {
                tenants.insert(tenant, rules);
            }
            Err(error) => errors.push(pos, error),
        }
    }
    tenants
}

/// A tenant's sandbox with the rules of its drivers.
///
/// # Errors
/// What the component refuses, naming the tenant.
pub fn tenant_rules(tenant: u32, pool: Arc<RulesPool>) -> Result<TenantRules, String> {
    let drivers = pool
        .evaluator(&[], Arc::default())
        .map_err(|error| format!("tenant {tenant}: {error}"))?;
    Ok(TenantRules {
        pool,
        drivers: Some(Arc::new(drivers)),
    })
}

/// The rules of one device in `pool`: its pipeline's `alarms` settings and its
/// tags. `None` when its pipeline is unknown (reported with the pipeline).
///
/// # Errors
/// What the rules component refuses of the settings or tags.
pub fn device_rules(
    pool: &Arc<RulesPool>,
    device: RulesTarget<'_>,
    pipelines: &PipelineSet,
) -> Result<Option<DeviceRules>, CallError> {
    let Some(spec) = pipelines.get(device.pipeline) else {
        return Ok(None);
    };
    let evaluator = pool.evaluator(&spec.alarms.settings, Arc::clone(device.tags))?;
    Ok(Some(DeviceRules {
        tenant_id: device.tenant_id,
        evaluator,
    }))
}

/// Reports what the rules component refused of a device's rules: each setting
/// at its place in the `alarms` block of the device's pipeline file.
pub(super) fn report_rules(
    errors: &mut Diagnostics,
    error: &CallError,
    device: &str,
    at: Pos,
    spec: &PipelineSpec,
) {
    let issues = match error {
        CallError::Config { component, issues } => issues
            .iter()
            .map(|issue| (issue, component.as_str()))
            .collect(),
        _ => Vec::new(),
    };
    if issues.is_empty() {
        errors.push(
            at,
            format!(
                "device `{device}`: the `alarms` of pipeline `{}` ({}): {error}",
                spec.name, spec.file
            ),
        );
    }
    for (issue, component) in issues {
        let message = format!(
            "`alarms` of device `{device}`: {component}: {}",
            issue.message
        );
        match spec.alarms.position_of(&issue.key).or(spec.alarms_pos) {
            Some(pos) => errors.push_in(&spec.file, pos, message),
            None => errors.push(at, message),
        }
    }
}
