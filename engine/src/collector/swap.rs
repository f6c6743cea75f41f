//! Pipelines that change while the engine runs: every device holds its pipeline
//! behind a [`Swappable`], takes it once per round, and so sees a new one from
//! its next round on, never in the middle of one.

use std::collections::HashMap;
use std::sync::Arc;

use super::device::Device;
use super::{PipelineSet, SandboxLimits};
use crate::model::TagSpec;
use crate::pipeline::{DevicePipeline, Pipeline};
use crate::runtime::{CodecPool, Registry};
use crate::yaml::{Diagnostics, Pos};

/// Pipelines built per tenant and pipeline name, shared by that tenant's devices.
pub(super) struct PipelineCache<'a> {
    registry: &'a Registry,
    pipelines: &'a PipelineSet,
    limits: &'a SandboxLimits,
    built: HashMap<(u32, String), Option<Pipeline>>,
}

impl<'a> PipelineCache<'a> {
    pub(super) fn new(
        registry: &'a Registry,
        pipelines: &'a PipelineSet,
        limits: &'a SandboxLimits,
    ) -> Self {
        Self {
            registry,
            pipelines,
            limits,
            built: HashMap::new(),
        }
    }

    /// The stages of pipeline `name` of `tenant`, configured for one device's tags;
    /// problems go to `errors` at `pos`.
    pub(super) fn for_device(
        &mut self,
        (tenant, name): (u32, &str),
        (device, tags): (&str, &[TagSpec]),
        pos: Pos,
        errors: &mut Diagnostics,
    ) -> Option<DevicePipeline> {
        let key = (tenant, name.to_owned());
        if !self.built.contains_key(&key) {
            let built = match self.pipelines.get(name) {
                None => {
                    errors.push(pos, format!("device `{device}`: unknown pipeline `{name}`"));
                    None
                }
                Some(spec) => match Pipeline::build(spec, self.registry, self.limits.get(tenant)) {
                    Ok(pipeline) => Some(pipeline),
                    Err(problems) => {
                        errors.extend(problems);
                        None
                    }
                },
            };
            self.built.insert(key.clone(), built);
        }
        let pipeline = self.built.get(&key)?.as_ref()?;
        match pipeline.for_device(tags) {
            Ok(device_pipeline) => Some(device_pipeline),
            Err(failure) => {
                errors.push(pos, format!("device `{device}`: {failure}"));
                None
            }
        }
    }
}

/// Builds every device's pipeline again from the registry's active components and
/// swaps them all in, or, when any fails, none (the running ones stay).
///
/// # Errors
/// Every problem found (unknown component, settings or tags a stage refuses).
pub fn reload_pipelines(
    devices: &[Arc<Device>],
    registry: &Registry,
    pipelines: &PipelineSet,
    limits: &SandboxLimits,
) -> Result<usize, Diagnostics> {
    let mut cache = PipelineCache::new(registry, pipelines, limits);
    let mut errors = Diagnostics::new("pipelines");
    let mut fresh = Vec::with_capacity(devices.len());
    for device in devices {
        let who = (device.tenant_id, device.pipeline_name.as_str());
        let what = (device.id.as_str(), device.tags.as_slice());
        let Some(main) = cache.for_device(who, what, Pos::default(), &mut errors) else {
            continue;
        };
        let decoder = match &device.writable {
            Some(_) => cache.for_device(who, what, Pos::default(), &mut errors),
            None => None,
        };
        fresh.push((device, main, decoder));
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let swapped = fresh.len();
    for (device, main, decoder) in fresh {
        device.swap_pipeline(main, decoder);
    }
    Ok(swapped)
}

/// Opens sessions of the active version of codec `name` for every channel that
/// speaks it, in each tenant's sandbox, and swaps them all in, or, when any fails,
/// none. The links of those channels reconnect at their next round, so each new
/// session starts with its own handshake; other links are not touched. Blocking
/// (takes the links' locks): call it off the async workers.
///
/// # Errors
/// The codec is not registered, or refuses a channel's settings or tags.
pub fn reload_codec(
    devices: &[Arc<Device>],
    registry: &Registry,
    name: &str,
    limits: &SandboxLimits,
) -> Result<usize, Diagnostics> {
    let mut errors = Diagnostics::new("codecs");
    let Some(component) = registry.active(name) else {
        errors.push(Pos::default(), format!("no codec `{name}` is registered"));
        return Err(errors);
    };
    let mut pools: HashMap<u32, Arc<CodecPool>> = HashMap::new();
    let mut fresh = Vec::new();
    for device in devices {
        for channel in &device.channels {
            if channel.session.get().health().component != name {
                continue;
            }
            let pool = match pools.get(&device.tenant_id) {
                Some(pool) => Arc::clone(pool),
                None => match registry
                    .runtime()
                    .codec_pool(&component, limits.get(device.tenant_id))
                {
                    Ok(pool) => {
                        pools.insert(device.tenant_id, Arc::clone(&pool));
                        pool
                    }
                    Err(error) => {
                        errors.push(Pos::default(), error.to_string());
                        continue;
                    }
                },
            };
            let tags: Vec<_> = channel
                .tags
                .iter()
                .filter_map(|t| device.tags.get(*t as usize).cloned())
                .collect();
            match pool.session(&channel.settings, &tags) {
                Ok(session) => fresh.push((channel, session)),
                Err(error) => errors.push(
                    Pos::default(),
                    format!("device `{}` channel `{}`: {error}", device.id, channel.id),
                ),
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let swapped = fresh.len();
    for (channel, session) in fresh {
        channel.session.set(session);
        channel
            .link
            .blocking_lock()
            .restart("a new version of its codec was deployed");
    }
    Ok(swapped)
}
