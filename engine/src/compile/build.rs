//! The one config compiler (ARCH-3): the files, then every component's view of
//! them, into a gateway ready to run, or into every problem found.

use std::collections::HashMap;

use super::device::{CompiledDevice, DeviceContext};
use super::limits::SandboxLimits;
use super::pools::Pools;
use super::rules::{TenantRules, tenants, whitelist};
use super::sources::{Loaded, Sources};
use super::stages::Stages;
use crate::config::{DeviceConfig, Document, GatewayConfig};
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
/// Every problem of the files and every problem the components found.
pub fn compile(
    sources: &Sources,
    registry: &Registry,
    pools: &mut Pools,
) -> Result<Compiled, Diagnostics> {
    let document = sources.document()?;
    build(
        load(sources, document.as_ref(), registry)?,
        registry,
        pools,
        &|_| true,
    )
}

/// Reads `sources`, whose configuration file is parsed already (`document`).
///
/// # Errors
/// Every problem of the files, and with them what the components say of the
/// parts of the configuration that read well ([`components_view`]).
pub fn load(
    sources: &Sources,
    document: Option<&Document>,
    registry: &Registry,
) -> Result<Loaded, Diagnostics> {
    sources
        .load_document(document, &registry.protocols())
        .map_err(|mut problems| {
            problems.extend(components_view(sources, document, registry));
            problems.sorted()
        })
}

/// What the components say of the parts of a configuration file with
/// problems that read well (a codec of an address, a stage of its settings),
/// so one pass names every problem (ARCH-3); compiled in pools of its own,
/// so nothing that runs is called.
pub fn components_view(
    sources: &Sources,
    document: Option<&Document>,
    registry: &Registry,
) -> Diagnostics {
    let readable = sources.readable_part(document, &registry.protocols());
    readable
        .and_then(|loaded| build(loaded, registry, &mut Pools::new(), &|_| true).err())
        .unwrap_or_default()
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
        .filter_map(|device| {
            let mark = errors.len();
            let compiled = context.device(device, &mut errors);
            errors.name_since(mark, &format!("device `{}`", device.device_id));
            compiled
        })
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
