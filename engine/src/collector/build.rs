//! Building devices from a checked configuration: links (shared by protocol, host
//! and port), codec sessions and pipelines in each tenant's pools. Everything a component refuses is reported with
//! the position of the device, channel or tag it concerns.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex as AsyncMutex;

use super::LinkInfo;
use super::device::{Channel, Device, DeviceParts, LeaseTerms, Probe};
use super::fleet::Roster;
use super::reporter::Reporter;
use super::swap::PipelineCache;
use super::tag_io::Writable;
use crate::alarm::Alarms;
use crate::config::{ChannelConfig, DeviceConfig, GatewayConfig, Protocol, TagConfig};
use crate::io::{Budget, Link, LinkSettings};
use crate::lease::{Leases, TimeoutSource};
use crate::model::{Access, Setting, SettingValue, TagSpec};
use crate::pipeline::{self, PipelineSpec};
use crate::runtime::{CallError, CodecPool, Limits, Registry};
use crate::store::SeqAllocator;
use crate::sync::Swappable;
use crate::uplink::Uplink;
use crate::yaml::{Diagnostics, Pos};

/// Failed connection attempts in a row after which a link is reported FAILED.
const FAILED_AFTER_ATTEMPTS: u32 = 10;

/// Why the collector could not be built (in addition to config diagnostics).
pub type BuildError = Diagnostics;

/// Pipelines by name: the built-in `default` plus any loaded from files.
#[derive(Debug, Clone)]
pub struct PipelineSet {
    specs: HashMap<String, PipelineSpec>,
}

impl PipelineSet {
    /// Only the built-in default pipeline.
    ///
    /// # Errors
    /// Never for a correct build (the embedded file is checked by the tests).
    pub fn builtin() -> Result<Self, Diagnostics> {
        let spec = pipeline::builtin()?;
        Ok(Self {
            specs: HashMap::from([(spec.name.clone(), spec)]),
        })
    }

    /// The built-in default plus every `*.yaml` in `dir` (a file may replace
    /// `default`), loaded as one set so they may include each other.
    ///
    /// # Errors
    /// Every problem of every file.
    pub fn load_dir(dir: &Path) -> Result<Self, Diagnostics> {
        let mut set = Self::builtin()?;
        let mut errors = Diagnostics::new(dir.display().to_string());
        let entries = std::fs::read_dir(dir).map_err(|e| {
            let mut errors = Diagnostics::new(dir.display().to_string());
            errors.push(
                Pos::default(),
                format!("cannot read the pipelines directory: {e}"),
            );
            errors
        })?;
        let mut files: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        files.sort();
        for loaded in pipeline::load_set(&files) {
            match loaded {
                Ok(spec) => {
                    set.specs.insert(spec.name.clone(), spec);
                }
                Err(problems) => errors.extend(problems),
            }
        }
        errors.into_result(set)
    }

    pub fn get(&self, name: &str) -> Option<&PipelineSpec> {
        self.specs.get(name)
    }
}

/// The sandbox limits of each tenant's components, from `tenants[].limits`.
#[derive(Debug, Clone, Default)]
pub struct SandboxLimits(HashMap<u32, Limits>);

impl SandboxLimits {
    pub fn of(config: &GatewayConfig) -> Self {
        let limits = |t: crate::config::TenantLimits| Limits {
            memory_bytes: usize::try_from(t.memory_mb << 20).unwrap_or(usize::MAX),
            fuel_per_call: t.fuel_per_call,
            instances: t.instances,
        };
        Self(
            config
                .tenants
                .iter()
                .map(|t| (t.tenant_id, limits(t.limits)))
                .collect(),
        )
    }

    /// The limits of `tenant`'s components (the defaults without a tenant).
    pub fn get(&self, tenant: u32) -> Limits {
        self.0.get(&tenant).copied().unwrap_or_default()
    }
}

/// The codec component that speaks `protocol`.
pub fn codec_name(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::ModbusTcp => "modbus_tcp",
        Protocol::S7 => "s7",
        Protocol::Mc => "mc",
    }
}

/// Lease of a device with no `stateTimeout` and nothing polled.
const UNPOLLED_LEASE_SECONDS: u64 = 900;

/// A device's lease length and where it came from, in priority order: its own
/// `stateTimeout`; its product's `stateTimeout`; else (no codec reports a lease of
/// its own yet) the system default: three polling periods of its fastest tag plus
/// one round's timeout (the seed's 3-5 periods for polled devices, with room for a
/// slow round), or 15 minutes for a device with nothing polled.
pub fn lease_length(
    device: &DeviceConfig,
    product_timeout_s: Option<u64>,
    tags: &[&TagConfig],
    round_timeout_ms: u64,
) -> (u64, TimeoutSource) {
    if let Some(seconds) = device.state_timeout_s {
        return (seconds, TimeoutSource::Device);
    }
    if let Some(seconds) = product_timeout_s {
        return (seconds, TimeoutSource::Profile);
    }
    match tags.iter().map(|t| t.period_ms).filter(|p| *p > 0).min() {
        Some(period) => (
            (3 * period + round_timeout_ms).div_ceil(1000),
            TimeoutSource::System,
        ),
        None => (UNPOLLED_LEASE_SECONDS, TimeoutSource::System),
    }
}

/// The tag as components see it, with its valid range as settings.
pub fn component_tag(tag: &TagConfig) -> TagSpec {
    let mut spec = tag.spec.clone();
    for (key, bound) in [("min", tag.min), ("max", tag.max)] {
        if let Some(value) = bound {
            spec.settings.push(Setting {
                key: key.into(),
                value: SettingValue::Float(value),
            });
        }
    }
    spec
}

/// Reports a component's refusal at the positions of the tags it names.
fn report_call(errors: &mut Diagnostics, error: &CallError, at: Pos, tags: &[&TagConfig]) {
    match error {
        CallError::Config { component, issues } => {
            for issue in issues {
                let (pos, what) = match issue.tag.and_then(|t| tags.get(t as usize)) {
                    Some(tag) if issue.key == "address" => {
                        (tag.address_pos, format!("tag `{}`", tag.spec.key))
                    }
                    Some(tag) => (tag.pos, format!("tag `{}`", tag.spec.key)),
                    None => (at, "channel".to_owned()),
                };
                errors.push(pos, format!("{what}: {component}: {}", issue.message));
            }
        }
        other => errors.push(at, other.to_string()),
    }
}

/// What a link connects to. Channels with the same endpoint share the link; a
/// channel with `sharedConnection: false` names itself as the owner of its own.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    protocol: Protocol,
    host: String,
    port: u16,
    /// The device and channel of an unshared connection.
    owner: Option<(String, String)>,
}

impl Endpoint {
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    fn of(device: &DeviceConfig, channel: &ChannelConfig) -> Self {
        Self {
            protocol: channel.protocol,
            host: channel.host.clone(),
            port: channel.port,
            owner: (!channel.shared_connection)
                .then(|| (device.device_id.clone(), channel.channel_id.clone())),
        }
    }
}

/// How a channel's link connects; a shared link takes the settings of the first
/// channel (in file order) that uses it.
fn link_settings(config: &GatewayConfig, channel: &ChannelConfig) -> LinkSettings {
    LinkSettings {
        host: channel.host.clone(),
        port: channel.port,
        connect_timeout: Duration::from_millis(channel.connect_timeout_ms),
        read_timeout: Duration::from_millis(channel.read_timeout_ms),
        backoff: config.collector.backoff.clone(),
        failed_after: FAILED_AFTER_ATTEMPTS,
    }
}

/// The link each endpoint of `config`'s enabled devices gets: its endpoint and
/// the settings of its first channel.
pub(super) fn wanted_links(config: &GatewayConfig) -> HashMap<Endpoint, LinkSettings> {
    let mut wanted = HashMap::new();
    for device in config.devices.iter().filter(|d| d.enabled) {
        for channel in &device.channels {
            wanted
                .entry(Endpoint::of(device, channel))
                .or_insert_with(|| link_settings(config, channel));
        }
    }
    wanted
}

/// Whether every link `device` uses in `roster` is the one `wanted` asks for
/// (same endpoint, same settings), so the device can be kept as it is.
pub(super) fn links_fit(
    device: &Device,
    roster: &Roster,
    wanted: &HashMap<Endpoint, LinkSettings>,
) -> bool {
    device.channels.iter().all(|channel| {
        roster
            .links()
            .iter()
            .find(|info| Arc::ptr_eq(&info.link, &channel.link))
            .is_some_and(|info| wanted.get(&info.endpoint) == Some(&info.settings))
    })
}

/// The engine services devices report to.
#[derive(Debug)]
pub struct Services {
    pub uplink: Uplink,
    pub seq: Arc<SeqAllocator>,
    pub leases: Arc<Leases>,
    /// Runs each device's alarm rules over its samples.
    pub alarms: Option<Arc<Alarms>>,
    /// Each tenant's sandbox.
    pub limits: SandboxLimits,
}

/// Builds devices for one configuration. Links and codec pools of devices built
/// earlier (`previous`) are reused where they fit, so rebuilding some devices
/// does not touch the connections of the others.
pub(super) struct Builder<'a> {
    config: &'a GatewayConfig,
    registry: &'a Registry,
    services: &'a Services,
    budget: &'a Budget,
    errors: Diagnostics,
    links: HashMap<Endpoint, usize>,
    link_infos: Vec<LinkInfo>,
    /// Links of the previous build, not (yet) taken into this one.
    reusable: HashMap<Endpoint, LinkInfo>,
    codecs: HashMap<(u32, &'static str), Arc<CodecPool>>,
    cache: PipelineCache<'a>,
    /// Seeds the reconnect jitter of new links.
    links_made: u64,
}

impl<'a> Builder<'a> {
    pub(super) fn new(
        (file, config): (&str, &'a GatewayConfig),
        (registry, pipelines): (&'a Registry, &'a PipelineSet),
        (services, budget): (&'a Services, &'a Budget),
        previous: Option<&Roster>,
        links_made: u64,
    ) -> Self {
        let mut reusable = HashMap::new();
        let mut codecs = HashMap::new();
        if let Some(previous) = previous {
            for info in previous.links() {
                reusable.insert(info.endpoint.clone(), info.clone());
            }
            for device in previous.devices() {
                for channel in &device.channels {
                    let session = channel.session.get();
                    let name = Protocol::NAMES
                        .iter()
                        .map(|(_, protocol)| codec_name(*protocol))
                        .find(|name| *name == session.health().component);
                    if let Some(name) = name {
                        codecs.insert((device.tenant_id, name), session.pool());
                    }
                }
            }
        }
        Self {
            config,
            registry,
            services,
            budget,
            errors: Diagnostics::new(file),
            links: HashMap::new(),
            link_infos: Vec::new(),
            reusable,
            codecs,
            cache: PipelineCache::new(registry, pipelines, &services.limits),
            links_made,
        }
    }

    /// The links the devices built (or kept) use, how many links were ever made,
    /// and every problem found.
    pub(super) fn finish(self) -> (Vec<LinkInfo>, u64, Diagnostics) {
        (self.link_infos, self.links_made, self.errors)
    }

    pub(super) fn errors(&mut self) -> &mut Diagnostics {
        &mut self.errors
    }

    /// Takes a device of the previous build as it is, with its links.
    pub(super) fn keep(&mut self, device: &Device) {
        for channel in &device.channels {
            let known = self
                .link_infos
                .iter()
                .any(|info| Arc::ptr_eq(&info.link, &channel.link));
            if known {
                continue;
            }
            let endpoint = self
                .reusable
                .iter()
                .find(|(_, info)| Arc::ptr_eq(&info.link, &channel.link))
                .map(|(endpoint, _)| endpoint.clone());
            if let Some(info) = endpoint.and_then(|e| self.reusable.remove(&e)) {
                self.links
                    .insert(info.endpoint.clone(), self.link_infos.len());
                self.link_infos.push(info);
            }
        }
    }

    pub(super) fn device(&mut self, device: &DeviceConfig) -> Option<Arc<Device>> {
        let tag_configs: Vec<&TagConfig> = device.tags().collect();
        let tags: Vec<TagSpec> = tag_configs.iter().map(|t| component_tag(t)).collect();
        let mut channels = Vec::new();
        let mut next_tag = 0u32;
        for channel in &device.channels {
            let indexes: Vec<u32> = (next_tag..next_tag + channel.tags.len() as u32).collect();
            next_tag += channel.tags.len() as u32;
            channels.push(self.channel(device, channel, &tags, &tag_configs, indexes)?);
        }
        let pipeline = self.pipeline(device, &tags)?;
        let writable = if tag_configs.iter().any(|t| t.spec.access != Access::Read) {
            Some(Writable {
                readback: tag_configs.iter().map(|t| t.readback).collect(),
                decoder: Swappable::new(self.pipeline(device, &tags)?),
            })
        } else {
            None
        };
        let reporter = Reporter::new(
            self.config.collector.report_mode,
            self.services.uplink.device_topic(
                &device.product_id,
                &device.device_num,
                "property/post",
            ),
            tags.len(),
        );
        let product_timeout = self
            .config
            .product(&device.product_id)
            .and_then(|p| p.state_timeout_s);
        let (timeout_seconds, timeout_source) = lease_length(
            device,
            product_timeout,
            &tag_configs,
            self.config.collector.per_device_timeout_ms,
        );
        let driver = device
            .channels
            .first()
            .map_or_else(String::new, |c| codec_name(c.protocol).to_owned());
        Some(Arc::new(Device::new(DeviceParts {
            id: device.device_id.clone(),
            product_id: device.product_id.clone(),
            device_num: device.device_num.clone(),
            tenant_id: device.tenant_id,
            pipeline_name: device.pipeline.clone(),
            tags,
            periods: tag_configs.iter().map(|t| t.period_ms).collect(),
            channels,
            pipeline,
            reporter,
            lease: LeaseTerms {
                leases: Arc::clone(&self.services.leases),
                tenant_id: device.tenant_id,
                driver,
                timeout_seconds,
                timeout_source,
            },
            alarms: self.services.alarms.clone(),
            writable,
        })))
    }

    fn channel(
        &mut self,
        device: &DeviceConfig,
        channel: &ChannelConfig,
        tags: &[TagSpec],
        tag_configs: &[&TagConfig],
        indexes: Vec<u32>,
    ) -> Option<Channel> {
        let codec = self.codec(device, channel)?;
        let channel_tags: Vec<TagSpec> =
            indexes.iter().map(|i| tags[*i as usize].clone()).collect();
        let channel_configs: Vec<&TagConfig> =
            indexes.iter().map(|i| tag_configs[*i as usize]).collect();
        let session = match codec.session(&channel.settings, &channel_tags) {
            Ok(session) => session,
            Err(error) => {
                report_call(&mut self.errors, &error, channel.pos, &channel_configs);
                return None;
            }
        };
        let link = self.link(device, channel);
        // Probe the first polled tag of the channel (any tag if none is polled).
        let probe = (channel.heartbeat_ms > 0).then(|| Probe {
            every: Duration::from_millis(channel.heartbeat_ms),
            tag: channel
                .tags
                .iter()
                .position(|t| t.period_ms > 0)
                .unwrap_or(0) as u32,
        });
        Some(Channel::new(
            channel.channel_id.clone(),
            link,
            (session, channel.settings.clone()),
            (indexes, probe),
        ))
    }

    /// The channel's link: one already taken into this build for its endpoint, else
    /// the previous build's with the same endpoint and settings, else a new one.
    fn link(&mut self, device: &DeviceConfig, channel: &ChannelConfig) -> Arc<AsyncMutex<Link>> {
        let endpoint = Endpoint::of(device, channel);
        if let Some(index) = self.links.get(&endpoint) {
            return Arc::clone(&self.link_infos[*index].link);
        }
        let settings = link_settings(self.config, channel);
        let reused = self
            .reusable
            .remove(&endpoint)
            .filter(|info| info.settings == settings);
        let info = reused.unwrap_or_else(|| {
            let seed = self.links_made * 0x9E37_79B9 + u64::from(channel.port);
            self.links_made += 1;
            LinkInfo {
                endpoint: endpoint.clone(),
                settings: settings.clone(),
                link: Arc::new(AsyncMutex::new(Link::new(
                    settings,
                    self.budget.clone(),
                    seed,
                ))),
            }
        });
        let link = Arc::clone(&info.link);
        self.links.insert(endpoint, self.link_infos.len());
        self.link_infos.push(info);
        link
    }

    fn codec(&mut self, device: &DeviceConfig, channel: &ChannelConfig) -> Option<Arc<CodecPool>> {
        let name = codec_name(channel.protocol);
        let key = (device.tenant_id, name);
        if let Some(pool) = self.codecs.get(&key) {
            return Some(Arc::clone(pool));
        }
        let Some(component) = self.registry.active(name) else {
            self.errors.push(
                channel.pos,
                format!(
                    "no codec component `{name}` is installed for protocol {}",
                    channel.protocol.name()
                ),
            );
            return None;
        };
        match self
            .registry
            .runtime()
            .codec_pool(&component, self.services.limits.get(device.tenant_id))
        {
            Ok(pool) => {
                self.codecs.insert(key, Arc::clone(&pool));
                Some(pool)
            }
            Err(error) => {
                self.errors.push(channel.pos, error.to_string());
                None
            }
        }
    }

    fn pipeline(
        &mut self,
        device: &DeviceConfig,
        tags: &[TagSpec],
    ) -> Option<crate::pipeline::DevicePipeline> {
        self.cache.for_device(
            (device.tenant_id, &device.pipeline),
            (&device.device_id, tags),
            device.pos,
            &mut self.errors,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load_str;

    #[test]
    fn lease_length_priority_device_then_product_then_polling() {
        let config = load_str(
            "t.yaml",
            "products:\n  - { productId: P, stateTimeout: 40 }\ndevices:\n  - deviceId: own\n    productId: P\n    deviceNum: A\n    stateTimeout: 7\n    channels:\n      - channelId: c\n        protocol: modbus-tcp\n        host: 127.0.0.1\n        tags: [{ key: t, address: '40001', dataType: INT16, periodMs: 1000 }]\n  - deviceId: product\n    productId: P\n    deviceNum: B\n    channels:\n      - channelId: c\n        protocol: modbus-tcp\n        host: 127.0.0.1\n        tags: [{ key: t, address: '40001', dataType: INT16, periodMs: 1000 }]\n  - deviceId: polled\n    productId: Q\n    deviceNum: C\n    channels:\n      - channelId: c\n        protocol: modbus-tcp\n        host: 127.0.0.1\n        tags: [{ key: t, address: '40001', dataType: INT16, periodMs: 500 }, { key: w, address: '40002', dataType: INT16, periodMs: 0, access: W }]\n  - deviceId: idle\n    productId: Q\n    deviceNum: D\n    channels:\n      - channelId: c\n        protocol: modbus-tcp\n        host: 127.0.0.1\n        tags: [{ key: w, address: '40002', dataType: INT16, periodMs: 0, access: W }]\n",
        )
        .expect("valid");
        let length = |id: &str| {
            let device = config.device(id).expect("device");
            let tags: Vec<&TagConfig> = device.tags().collect();
            let product = config
                .product(&device.product_id)
                .and_then(|p| p.state_timeout_s);
            lease_length(device, product, &tags, 3000)
        };
        assert_eq!(length("own"), (7, TimeoutSource::Device));
        assert_eq!(length("product"), (40, TimeoutSource::Profile));
        assert_eq!(
            length("polled"),
            (5, TimeoutSource::System),
            "3 x 500 ms + 3 s, rounded up"
        );
        assert_eq!(
            length("idle"),
            (UNPOLLED_LEASE_SECONDS, TimeoutSource::System)
        );
    }
}
