//! Compiled devices wired to the engine: their links (shared by endpoint, and
//! those of an earlier build reused where they fit), reporters, lease terms and
//! liveness probes. Everything a component could refuse was checked by the
//! compiler, so wiring cannot fail.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::device::{Channel, Device, DeviceParts, LeaseTerms, Probe, Writable};
use super::latest::{RoundsDone, TagDisplay};
use super::links::{Endpoint, LinkInfo, link_settings};
use super::metrics::DeviceMetrics;
use super::ownership::Ownership;
use super::push::{PushInput, PushSetup};
use super::reporter::{Encoding, Reporter};
use super::roster::Roster;
use super::sink::SampleSink;
use super::trend::points_per_tag;
use crate::compile::{CompiledDevice, CompiledPush, DeviceRules};
use crate::config::{
    ChannelConfig, DeviceBroker, DeviceConfig, GatewayConfig, PushChannel, TagConfig,
};
use crate::intake::BrokerTarget;
use crate::io::{Budget, Link, SharedLink};
use crate::lease::Leases;
use crate::model::Access;
use crate::mqtt::DeviceTopic;
use crate::mqtt::sparkplug::MetricTable;
use crate::store::SeqAllocator;
use crate::sync::Swappable;
use crate::uplink::Uplink;

/// The engine services devices report to.
#[derive(Debug)]
pub struct Services {
    pub uplink: Uplink,
    pub seq: Arc<SeqAllocator>,
    pub leases: Arc<Leases>,
    /// Who else hears of every round's samples (the alarm rules).
    pub sink: Option<Arc<dyn SampleSink>>,
    /// The families each device counts in.
    pub metrics: DeviceMetrics,
    /// The devices this engine may poll.
    pub ownership: Arc<Ownership>,
    /// Told of every round that brought samples.
    pub rounds_done: Arc<RoundsDone>,
    /// The connections to the brokers devices publish to, for writes to them.
    pub device_brokers: Arc<super::push::DeviceBrokers>,
}

/// Wires devices for one configuration. Links of devices wired earlier
/// (`previous`) are reused where they fit, so rebuilding some devices does not
/// touch the connections of the others.
pub(super) struct Wiring<'a> {
    config: &'a GatewayConfig,
    services: &'a Services,
    budget: &'a Budget,
    links: HashMap<Endpoint, usize>,
    link_infos: Vec<LinkInfo>,
    /// Links of the previous build, not (yet) taken into this one.
    reusable: HashMap<Endpoint, LinkInfo>,
    /// Seeds the reconnect jitter of new links.
    links_made: u64,
    /// Points of the last hour each numeric tag keeps, the configuration's
    /// tags sharing the budget.
    trend_points: usize,
}

/// How the console shows `device`'s tags: empty when none of them says.
fn display(device: &DeviceConfig) -> Box<[TagDisplay]> {
    if device
        .tags()
        .all(|t| t.unit.is_none() && t.precision.is_none())
    {
        return Box::default();
    }
    device
        .tags()
        .map(|t| TagDisplay {
            unit: t.unit.as_deref().map(Box::from),
            precision: t.precision,
        })
        .collect()
}

impl<'a> Wiring<'a> {
    /// Wiring for `config`: devices report to `services`, links connect within
    /// `budget`. Links of `previous` are reused where they fit; `links_made`
    /// counts the links made before (it seeds a new link's reconnect jitter).
    pub(super) fn new(
        config: &'a GatewayConfig,
        services: &'a Services,
        budget: &'a Budget,
        previous: Option<&Roster>,
        links_made: u64,
    ) -> Self {
        let reusable = previous
            .map(|roster| {
                roster
                    .links()
                    .iter()
                    .map(|info| (info.endpoint.clone(), info.clone()))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            config,
            services,
            budget,
            links: HashMap::new(),
            link_infos: Vec::new(),
            reusable,
            links_made,
            trend_points: points_per_tag(config.devices.iter().map(|d| d.tags().count()).sum()),
        }
    }

    /// The links the devices wired (or kept) use, and how many links were ever made.
    pub(super) fn finish(self) -> (Vec<LinkInfo>, u64) {
        (self.link_infos, self.links_made)
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

    /// The device `compiled` describes, and its alarm rules.
    pub(super) fn device(
        &mut self,
        compiled: CompiledDevice,
    ) -> (Arc<Device>, Option<DeviceRules>) {
        let CompiledDevice {
            config: device,
            tags,
            channels,
            push,
            pipeline,
            decoder,
            rules,
            lease: (timeout_seconds, timeout_source),
        } = compiled;
        let push = push.and_then(|push| self.push_input(&device, &tags, push));
        let channels = device
            .channels
            .iter()
            .zip(channels)
            .map(|(config, compiled)| {
                Channel::new(
                    config.channel_id.clone(),
                    self.link(&device, config),
                    compiled.session,
                    compiled.tags,
                    probe(config),
                    std::time::Duration::from_millis(config.read_timeout_ms),
                )
            })
            .collect();
        let writable = decoder.map(|decoder| Writable {
            readback: device.tags().map(TagConfig::reads_back).collect(),
            decoder: Swappable::new(decoder),
        });
        let (topic, encoding) = match self.services.uplink.sparkplug() {
            Some(topics) => (
                topics.device_data(&device.device_id),
                Encoding::Sparkplug(MetricTable::new(
                    &device.device_id,
                    &tags,
                    self.config.collector.mqtt.payload.int16_as_int32(),
                )),
            ),
            None => (
                self.services.uplink.topics().device(
                    &device.product_id,
                    &device.device_num,
                    DeviceTopic::PropertyPost,
                ),
                Encoding::Json,
            ),
        };
        let mode = self.config.collector.report_mode;
        let raw = self.config.collector.raw_value;
        let reporter = Reporter::new(mode, topic, encoding, tags.len(), raw);
        let driver = device
            .channels
            .first()
            .map_or_else(String::new, |c| c.protocol.codec().to_owned());
        let built = Arc::new(Device::new(DeviceParts {
            id: device.device_id.clone(),
            product_id: device.product_id.clone(),
            device_num: device.device_num.clone(),
            tenant_id: device.tenant_id,
            pipeline_name: device.pipeline.clone(),
            periods: device.tags().map(|t| t.period_ms).collect(),
            tags,
            channels,
            pipeline,
            reporter,
            lease: LeaseTerms {
                leases: Arc::clone(&self.services.leases),
                tenant_id: device.tenant_id,
                driver,
                timeout_seconds,
                timeout_source,
                expired_state: device.state_when_expired,
            },
            sink: self.services.sink.clone(),
            writable,
            push,
            counters: self.services.metrics.device(&device.device_id),
            rounds_done: Arc::clone(&self.services.rounds_done),
            display: display(&device),
            trend_points: self.trend_points,
        }));
        (built, rules)
    }

    /// The input of a device that publishes by itself, from its MQTT channel.
    fn push_input(
        &self,
        device: &DeviceConfig,
        tags: &[crate::model::TagSpec],
        compiled: CompiledPush,
    ) -> Option<PushInput> {
        let push = device.channels.iter().find_map(|c| c.push.as_ref())?;
        let resolve = |template: &str| {
            PushChannel::resolve(
                template,
                &device.product_id,
                &device.device_num,
                &device.device_id,
            )
        };
        Some(PushInput::new(PushSetup {
            decoder: compiled.decoder,
            ingester: compiled.ingester,
            topic: resolve(&push.topic),
            command_topic: push.command_topic.as_deref().map(resolve),
            broker: self.broker(&push.broker),
            readable: (0..tags.len() as u32)
                .filter(|i| tags[*i as usize].access != Access::Write)
                .collect(),
            max_per_second: push.max_messages_per_second,
            counters: self.services.metrics.messages(&device.device_id),
            brokers: Arc::clone(&self.services.device_brokers),
        }))
    }

    /// Where an MQTT channel's messages arrive: the uplink's broker (its
    /// credentials and TLS), or its own (with the uplink's TLS settings).
    fn broker(&self, broker: &DeviceBroker) -> BrokerTarget {
        let mqtt = &self.config.collector.mqtt;
        let client_id = format!("{}-devices", self.services.uplink.client_id());
        match broker {
            DeviceBroker::Uplink => BrokerTarget {
                host: mqtt.broker_host.clone(),
                port: mqtt.broker_port,
                tls: mqtt.tls.clone(),
                username: mqtt.username.clone(),
                password: mqtt.password.as_deref().map(crate::model::Secret::new),
                client_id,
            },
            DeviceBroker::Own {
                host,
                port,
                tls,
                username,
                password,
            } => BrokerTarget {
                host: host.clone(),
                port: *port,
                tls: tls.then(|| mqtt.tls.clone().unwrap_or_default()),
                username: username.clone(),
                password: password.clone(),
                client_id,
            },
        }
    }

    /// The channel's link: one already taken into this build for its endpoint, else
    /// the previous build's with the same endpoint and settings, else a new one.
    fn link(&mut self, device: &DeviceConfig, channel: &ChannelConfig) -> Arc<SharedLink> {
        let endpoint = Endpoint::of(device, channel);
        if let Some(index) = self.links.get(&endpoint) {
            return Arc::clone(&self.link_infos[*index].link);
        }
        let settings = link_settings(self.config, channel);
        let reused = self
            .reusable
            .remove(&endpoint)
            .filter(|info| info.settings == settings);
        let mut info = reused.unwrap_or_else(|| {
            let seed = self.links_made * 0x9E37_79B9 + u64::from(channel.port);
            self.links_made += 1;
            LinkInfo {
                endpoint: endpoint.clone(),
                name: String::new(),
                settings: settings.clone(),
                link: Arc::new(SharedLink::new(Link::new(
                    settings,
                    self.budget.clone(),
                    seed,
                ))),
            }
        });
        info.name = format!("{}/{}", device.device_id, channel.channel_id);
        let link = Arc::clone(&info.link);
        self.links.insert(endpoint, self.link_infos.len());
        self.link_infos.push(info);
        link
    }
}

/// The liveness probe a channel asks for (`heartbeatMs`): its first polled tag
/// (any tag if none is polled).
fn probe(channel: &ChannelConfig) -> Option<Probe> {
    (channel.heartbeat_ms > 0).then(|| Probe {
        every: Duration::from_millis(channel.heartbeat_ms),
        tag: channel
            .tags
            .iter()
            .position(|t| t.period_ms > 0)
            .unwrap_or(0) as u32,
    })
}
