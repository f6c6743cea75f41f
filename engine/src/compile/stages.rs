//! Pipelines built once per tenant and pipeline name in one compile, then
//! configured for each of that tenant's devices.

use std::collections::HashMap;
use std::sync::Arc;

use super::limits::SandboxLimits;
use crate::config::DeviceConfig;
use crate::model::TagSpec;
use crate::pipeline::{DevicePipeline, Pipeline, PipelineSet};
use crate::runtime::Registry;
use crate::yaml::Diagnostics;

/// The pipelines of one compile, per tenant and name.
pub(super) struct Stages<'a> {
    registry: &'a Registry,
    pipelines: &'a PipelineSet,
    limits: &'a SandboxLimits,
    built: HashMap<(u32, String), Option<Pipeline>>,
}

impl<'a> Stages<'a> {
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

    /// The stages of `device`'s pipeline (its tenant's pipeline of that name),
    /// configured for its `tags`; problems go to `errors`, the device's at its
    /// position.
    pub(super) fn for_device(
        &mut self,
        device: &DeviceConfig,
        tags: &Arc<[TagSpec]>,
        errors: &mut Diagnostics,
    ) -> Option<DevicePipeline> {
        let (tenant, name, pos) = (device.tenant_id, device.pipeline.as_str(), device.pos);
        let device = device.device_id.as_str();
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
