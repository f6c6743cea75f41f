//! The one config compiler (ARCH-3): the files, then every component's view of
//! them, into a gateway ready to run, or into every problem found.

use std::collections::HashMap;

use super::device::{CompiledDevice, DeviceContext};
use super::limits::SandboxLimits;
use super::pools::Pools;
use super::rules::{TenantRules, tenants, whitelist};
use super::sources::{Loaded, Sources};
use super::stages::Stages;
use crate::config::{DeviceConfig, GatewayConfig};
use crate::model::{SharedLists, Whitelist};
use crate::pipeline::PipelineSet;
use crate::runtime::Registry;
use crate::yaml::Diagnostics;

/// A configuration every component accepted, with what they built for it.
#[derive(Debug)]
pub struct Compiled {
    /// The configuration file's name, as diagnostics print it.
    pub file: String,
    pub config: GatewayConfig,
    pub pipelines: PipelineSet,
    pub limits: SandboxLimits,
    /// The enabled devices (those selected), in file order.
    pub devices: Vec<CompiledDevice>,
    /// Every tenant's rules sandbox, "no tenant" (0) included.
    pub tenants: HashMap<u32, TenantRules>,
    /// The transition whitelists the alarm and command stores follow.
    pub whitelist: Whitelist,
}

/// Reads `sources` and compiles them: what `sluice check` and `sluice run` do.
///
/// # Errors
/// Every problem of the files, or else every problem the components found.
pub fn compile(
    sources: &Sources,
    registry: &Registry,
    pools: &mut Pools,
) -> Result<Compiled, Diagnostics> {
    build(
        sources.load(&registry.protocols())?,
        registry,
        pools,
        &|_| true,
    )
}

/// Compiles loaded files: the tenants' sandboxes, the whitelists, and each enabled
/// device `select` picks (a reload picks the devices it rebuilds) with its codec
/// sessions, pipelines and rules.
///
/// # Errors
/// Every problem found, each at the position it concerns.
pub fn build(
    loaded: Loaded,
    registry: &Registry,
    pools: &mut Pools,
    select: &dyn Fn(&DeviceConfig) -> bool,
) -> Result<Compiled, Diagnostics> {
    let Loaded {
        file,
        config,
        pipelines,
        ..
    } = loaded;
    let mut errors = Diagnostics::new(&file);
    let limits = SandboxLimits::of(&config);
    let whitelist = whitelist(registry, pools, &mut errors);
    let tenants = tenants(&config, registry, pools, &limits, &mut errors);
    let mut context = DeviceContext {
        config: &config,
        registry,
        pipelines: &pipelines,
        limits: &limits,
        tenants: &tenants,
        stages: Stages::new(registry, &pipelines, &limits),
        pools,
        tag_lists: SharedLists::default(),
    };
    let devices: Vec<CompiledDevice> = config
        .devices
        .iter()
        .filter(|d| d.enabled && select(d))
        .filter_map(|device| context.device(device, &mut errors))
        .collect();
    drop(context);
    let Some(whitelist) = whitelist else {
        return Err(errors.sorted());
    };
    errors.into_result(Compiled {
        file,
        config,
        pipelines,
        limits,
        devices,
        tenants,
        whitelist,
    })
}
