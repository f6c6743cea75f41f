//! Links and what they connect to. Channels of several devices naming the same
//! protocol, host and port share one link (one connection, requests serialised on
//! it) unless a channel sets `sharedConnection: false`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{ChannelConfig, DeviceConfig, GatewayConfig};
use crate::io::{LinkSettings, SharedLink};

/// Failed connection attempts in a row after which a link is reported FAILED.
const FAILED_AFTER_ATTEMPTS: u32 = 10;

/// What a link connects to. Channels with the same endpoint share the link; a
/// channel with `sharedConnection: false` names itself as the owner of its own.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// The protocol's name.
    protocol: Arc<str>,
    host: String,
    port: u16,
    /// The device and channel of an unshared connection.
    owner: Option<(String, String)>,
}

impl Endpoint {
    pub fn protocol(&self) -> &str {
        &self.protocol
    }

    pub(super) fn of(device: &DeviceConfig, channel: &ChannelConfig) -> Self {
        Self {
            protocol: Arc::from(channel.protocol.name()),
            host: channel.host.clone(),
            port: channel.port,
            owner: (!channel.shared_connection)
                .then(|| (device.device_id.clone(), channel.channel_id.clone())),
        }
    }
}

/// A link, what it connects to and how.
#[derive(Debug, Clone)]
pub struct LinkInfo {
    pub endpoint: Endpoint,
    /// `DEVICE/CHANNEL` of the first channel using it: how metrics name it
    /// (without its address, which `/metrics` never shows).
    pub name: String,
    pub settings: LinkSettings,
    pub link: Arc<SharedLink>,
}

impl LinkInfo {
    pub fn protocol(&self) -> &str {
        self.endpoint.protocol()
    }
}

/// How a channel's link connects; a shared link takes the settings of the first
/// channel (in file order) that uses it.
pub(super) fn link_settings(config: &GatewayConfig, channel: &ChannelConfig) -> LinkSettings {
    LinkSettings {
        host: channel.host.clone(),
        port: channel.port,
        connect_timeout: Duration::from_millis(channel.connect_timeout_ms),
        read_timeout: Duration::from_millis(channel.read_timeout_ms),
        backoff: config.collector.backoff.clone(),
        failed_after: FAILED_AFTER_ATTEMPTS,
        line: channel.is_line().then(|| {
            channel
                .serial
                .map_or(Duration::ZERO, |line| line.frame_silence())
        }),
        serial: channel.serial,
    }
}

/// The link each endpoint of `config`'s enabled devices gets: its endpoint and
/// the settings of its first channel.
pub(super) fn wanted_links(config: &GatewayConfig) -> HashMap<Endpoint, LinkSettings> {
    let mut wanted = HashMap::new();
    for device in config.devices.iter().filter(|d| d.enabled) {
        // An MQTT channel has no link: its messages come through the broker.
        for channel in device.channels.iter().filter(|c| c.push.is_none()) {
            wanted
                .entry(Endpoint::of(device, channel))
                .or_insert_with(|| link_settings(config, channel));
        }
    }
    wanted
}
