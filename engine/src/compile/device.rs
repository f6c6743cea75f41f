//! One device as the components see it: a codec session per channel (every
//! address checked by its codec), its pipeline (and a second one to decode what
//! writes read back), its alarm rules, and the length of its lease.

use std::collections::HashMap;
use std::sync::Arc;

use super::limits::SandboxLimits;
use super::pools::Pools;
use super::problems::report_call;
use super::rules::{DeviceRules, RulesTarget, TenantRules, device_rules, report_rules};
use super::stages::Stages;
use crate::config::{ChannelConfig, DeviceConfig, GatewayConfig, PushChannel, TagConfig};
use crate::model::{Access, Setting, SettingValue, SharedLists, TagSpec, TimeoutSource};
use crate::pipeline::{DevicePipeline, PipelineSet};
use crate::runtime::{CodecSession, Ingester, PayloadDecoder, Registry};
use crate::yaml::Diagnostics;

/// Lease of a device with no `stateTimeout` and nothing polled.
const UNPOLLED_LEASE_SECONDS: u64 = 900;

/// A channel with its codec session.
#[derive(Debug)]
pub struct CompiledChannel {
    pub session: CodecSession,
    /// Device tag index of each of the channel's tags.
    pub tags: Vec<u32>,
    /// The device's lease as its codec knows it, seconds.
    pub lease_seconds: Option<u32>,
}

/// An enabled device, checked by every component it uses and ready to run.
#[derive(Debug)]
pub struct CompiledDevice {
    pub config: DeviceConfig,
    /// The device's tags as components see them, in device order; its codec
    /// sessions, processors and rules share the list.
    pub tags: Arc<[TagSpec]>,
    /// One per polled channel of `config`, in order.
    pub channels: Vec<CompiledChannel>,
    /// For a device that publishes by itself (`protocol: mqtt`): what reads
    /// its messages.
    pub push: Option<CompiledPush>,
    pub pipeline: DevicePipeline,
    /// For a device with writable tags: a pipeline of its own decoding what a
    /// write reads back (the polling pipeline's memory must not see those reads).
    pub decoder: Option<DevicePipeline>,
    /// Its alarm rules, when its tenant runs rules.
    pub rules: Option<DeviceRules>,
    /// How long its lease lasts, and where that came from.
    pub lease: (u64, TimeoutSource),
}

/// What reads the messages of a device that publishes by itself.
#[derive(Debug)]
pub struct CompiledPush {
    pub decoder: PayloadDecoder,
    /// The decoder and the device's pipeline in one call, when both are the
    /// engine's own (docs/push.md, "One call a message").
    pub ingester: Option<Ingester>,
}

/// What building one device needs.
pub(super) struct DeviceContext<'a> {
    pub config: &'a GatewayConfig,
    pub registry: &'a Registry,
    pub pipelines: &'a PipelineSet,
    pub limits: &'a SandboxLimits,
    pub tenants: &'a HashMap<u32, TenantRules>,
    pub stages: Stages<'a>,
    pub pools: &'a mut Pools,
    /// Devices with the same tags share one compiled list.
    pub tag_lists: SharedLists<TagSpec>,
}

impl DeviceContext<'_> {
    /// `device` compiled, or `None` with its problems in `errors`.
    pub(super) fn device(
        &mut self,
        device: &DeviceConfig,
        errors: &mut Diagnostics,
    ) -> Option<CompiledDevice> {
        let tag_configs: Vec<&TagConfig> = device.tags().collect();
        let tags = self
            .tag_lists
            .share(tag_configs.iter().map(|t| t.component_spec()).collect());
        let mut channels = Vec::new();
        let mut push = None;
        let mut next = 0u32;
        for channel in &device.channels {
            if let Some(settings) = &channel.push {
                next += channel.tags.len() as u32;
                let mark = errors.len();
                push = Some(self.decoder(device, channel, settings, &tags, errors));
                errors.name_since(mark, &format!("channel `{}`", channel.channel_id));
                continue;
            }
            let indexes: Vec<u32> = (next..next + channel.tags.len() as u32).collect();
            next += channel.tags.len() as u32;
            let mark = errors.len();
            channels.push(self.channel(device, channel, &tags, indexes, errors));
            errors.name_since(mark, &format!("channel `{}`", channel.channel_id));
        }
        let pipeline = self.stages.for_device(device, &tags, errors);
        let push = push.map(|read| {
            read.map(|(decoder, settings)| CompiledPush {
                ingester: (pipeline.as_ref())
                    .and_then(|p| self.ingester(device, &decoder, &settings, p, &tags)),
                decoder,
            })
        });
        let writable = tag_configs.iter().any(|t| t.spec.access != Access::Read);
        let decoder = if writable {
            self.stages.for_device(device, &tags, errors)
        } else {
            None
        };
        let rules = self.rules(device, &tags, errors);
        let product_timeout = self
            .config
            .product(&device.product_id)
            .and_then(|p| p.state_timeout_s);
        let channels: Option<Vec<_>> = channels.into_iter().collect();
        // Of several channels' codecs, the longest lease: the device is alive while
        // any of its connections may be.
        let driver_timeout = channels
            .iter()
            .flatten()
            .filter_map(|c| c.lease_seconds)
            .max()
            .map(u64::from);
        let lease = lease_length(
            device,
            [product_timeout, driver_timeout],
            &tag_configs,
            self.config.collector.per_device_timeout_ms,
        );
        Some(CompiledDevice {
            config: device.clone(),
            tags,
            channels: channels?,
            push: push.map_or(Some(None), |decoder| decoder.map(Some))?,
            pipeline: pipeline?,
            decoder: if writable { Some(decoder?) } else { None },
            rules: rules?,
            lease,
        })
    }

    fn channel(
        &mut self,
        device: &DeviceConfig,
        channel: &ChannelConfig,
        tags: &Arc<[TagSpec]>,
        indexes: Vec<u32>,
        errors: &mut Diagnostics,
    ) -> Option<CompiledChannel> {
        let codec = channel.protocol.codec();
        let pool = match self
            .pools
            .codec(self.registry, self.limits, device.tenant_id, codec)
        {
            Ok(pool) => pool,
            Err(error) => {
                errors.push(
                    channel.pos,
                    format!("protocol {}: {error}", channel.protocol),
                );
                return None;
            }
        };
        // A channel with every tag of the device (the usual case) shares its list.
        let channel_tags: Arc<[TagSpec]> = if indexes.len() == tags.len() {
            Arc::clone(tags)
        } else {
            indexes.iter().map(|i| tags[*i as usize].clone()).collect()
        };
        let session = match pool.session(&channel.settings, channel_tags) {
            Ok(session) => session,
            Err(error) => {
                let placed: Vec<_> = channel.placed_tags().collect();
                report_call(errors, &error, channel, &placed);
                return None;
            }
        };
        match session.lease_seconds() {
            Ok(Some(0)) => {
                errors.push(
                    channel.pos,
                    format!(
                        "protocol {}: its codec gives the device a lease of 0 s",
                        channel.protocol
                    ),
                );
                None
            }
            Ok(lease_seconds) => Some(CompiledChannel {
                session,
                tags: indexes,
                lease_seconds,
            }),
            Err(error) => {
                errors.push(
                    channel.pos,
                    format!(
                        "protocol {}: its codec failed to tell the device's lease: {error}",
                        channel.protocol
                    ),
                );
                None
            }
        }
    }

    /// The decoder of an MQTT channel and its settings: the channel's, with
    /// its `commandTopic` resolved for the device, checked by the decoder now.
    fn decoder(
        &mut self,
        device: &DeviceConfig,
        channel: &ChannelConfig,
        push: &PushChannel,
        tags: &Arc<[TagSpec]>,
        errors: &mut Diagnostics,
    ) -> Option<(PayloadDecoder, Vec<Setting>)> {
        let pool =
            match self
                .pools
                .decoder(self.registry, self.limits, device.tenant_id, &push.decoder)
            {
                Ok(pool) => pool,
                Err(error) => {
                    errors.push(channel.pos, format!("`decoder`: {error}"));
                    return None;
                }
            };
        let mut settings = channel.settings.clone();
        if let Some(template) = &push.command_topic {
            let topic = PushChannel::resolve(
                template,
                &device.product_id,
                &device.device_num,
                &device.device_id,
            );
            settings.push(Setting {
                key: "commandTopic".into(),
                value: SettingValue::Text(topic),
            });
        }
        // The engine's own decoders run on the round's thread, uploaded ones apart.
        let isolated = !self
            .registry
            .active(&push.decoder)
            .is_some_and(|component| self.registry.is_builtin(&component));
        match pool.decoder(&settings, Arc::clone(tags), isolated) {
            Ok(decoder) => Some((decoder, settings)),
            Err(error) => {
                let placed: Vec<_> = channel.placed_tags().collect();
                report_call(errors, &error, channel, &placed);
                None
            }
        }
    }

    /// `decoder` with the device's pipeline behind it, in one call a message,
    /// when both are the engine's own; `None` otherwise, and when reports
    /// carry raw values (`rawValue`: only the two calls see a message's
    /// samples before the pipeline).
    fn ingester(
        &mut self,
        device: &DeviceConfig,
        decoder: &PayloadDecoder,
        settings: &[Setting],
        pipeline: &DevicePipeline,
        tags: &Arc<[TagSpec]>,
    ) -> Option<Ingester> {
        if self.config.collector.raw_value {
            return None;
        }
        let chain = pipeline.chained()?;
        let component = self
            .registry
            .active(decoder.component())
            .filter(|component| self.registry.is_builtin(component))?;
        let made = self
            .pools
            .ingest(self.registry, self.limits, device.tenant_id, &component)
            .and_then(|pool| {
                pool.ingester(settings, chain, Arc::clone(tags))
                    .map_err(|e| e.to_string())
            });
        match made {
            Ok(ingester) => {
                // Idle while the ingester runs: their memory goes to the next
                // device's (their next call, if any, creates them again).
                decoder.release();
                pipeline.release();
                Some(ingester)
            }
            Err(error) => {
                // The decoder and the stages each accepted the device alone.
                tracing::warn!(device = %device.device_id, %error, "decoder and pipeline called apart");
                None
            }
        }
    }

    /// The device's rules (`Some(None)` when it has none), or `None` on a problem.
    fn rules(
        &mut self,
        device: &DeviceConfig,
        tags: &Arc<[TagSpec]>,
        errors: &mut Diagnostics,
    ) -> Option<Option<DeviceRules>> {
        let Some(tenant) = self.tenants.get(&device.tenant_id) else {
            return Some(None);
        };
        let target = RulesTarget {
            device_id: &device.device_id,
            tenant_id: device.tenant_id,
            pipeline: &device.pipeline,
            tags,
        };
        match device_rules(&tenant.pool, target, self.pipelines) {
            Ok(rules) => Some(rules),
            Err(error) => {
                if let Some(spec) = self.pipelines.get(&device.pipeline) {
                    report_rules(errors, &error, &device.device_id, device.pos, spec);
                }
                None
            }
        }
    }
}

/// A device's lease length and where it came from, in priority order (seed
/// 000): its own `stateTimeout`; its product's `stateTimeout`; the lease its
/// codec reports (`[product, driver]` seconds); else the system default: for a
/// device that publishes by itself three of its declared periods
/// (`reportPeriodMs`, the seed's 2-3 for MQTT reporting), else three polling
/// periods of its fastest tag plus one round's timeout (the seed's 3-5
/// periods for polled devices, with room for a slow round), or 15 minutes for a
/// device with nothing polled.
pub fn lease_length(
    device: &DeviceConfig,
    [product_timeout_s, driver_timeout_s]: [Option<u64>; 2],
    tags: &[&TagConfig],
    round_timeout_ms: u64,
) -> (u64, TimeoutSource) {
    if let Some(seconds) = device.state_timeout_s {
        return (seconds, TimeoutSource::Device);
    }
    if let Some(seconds) = product_timeout_s {
        return (seconds, TimeoutSource::Profile);
    }
    if let Some(seconds) = driver_timeout_s {
        return (seconds, TimeoutSource::Driver);
    }
    if let Some(push) = device.channels.iter().find_map(|c| c.push.as_ref()) {
        return (
            (3 * push.report_period_ms).div_ceil(1000),
            TimeoutSource::System,
        );
    }
    match tags.iter().map(|t| t.period_ms).filter(|p| *p > 0).min() {
        Some(period) => (
            (3 * period + round_timeout_ms).div_ceil(1000),
            TimeoutSource::System,
        ),
        None => (UNPOLLED_LEASE_SECONDS, TimeoutSource::System),
    }
}
