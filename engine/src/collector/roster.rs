//! The devices of one configuration and the links they use, replaced whole when
//! the configuration changes.

use std::collections::HashMap;
use std::sync::Arc;

use super::device::Device;
use super::links::{Endpoint, LinkInfo};
use crate::io::LinkSettings;
use crate::runtime::{CodecPool, DecoderPool};

/// The devices of one configuration and the links they use.
#[derive(Debug, Default)]
pub struct Roster {
    devices: Vec<Arc<Device>>,
    links: Vec<LinkInfo>,
    by_id: HashMap<String, usize>,
    by_key: HashMap<u64, usize>,
}

impl Roster {
    pub(super) fn new(devices: Vec<Arc<Device>>, links: Vec<LinkInfo>) -> Self {
        let by_id = devices
            .iter()
            .enumerate()
            .map(|(i, d)| (d.id.clone(), i))
            .collect();
        let by_key = devices
            .iter()
            .enumerate()
            .map(|(i, d)| (d.key, i))
            .collect();
        Self {
            devices,
            links,
            by_id,
            by_key,
        }
    }

    /// The polled devices, in configuration order.
    pub fn devices(&self) -> &[Arc<Device>] {
        &self.devices
    }

    /// The links the devices use, each once.
    pub fn links(&self) -> &[LinkInfo] {
        &self.links
    }

    /// The device with this `deviceId`.
    pub fn get(&self, id: &str) -> Option<&Arc<Device>> {
        self.by_id.get(id).map(|i| &self.devices[*i])
    }

    /// The device built with this [`Device::key`].
    pub fn by_key(&self, key: u64) -> Option<&Arc<Device>> {
        self.by_key.get(&key).map(|i| &self.devices[*i])
    }

    /// The device with this MQTT identity.
    pub fn by_identity(&self, product_id: &str, device_num: &str) -> Option<&Arc<Device>> {
        self.devices
            .iter()
            .find(|d| d.product_id == product_id && d.device_num == device_num)
    }

    /// The codec pools the devices' channels use, with each device's tenant.
    pub fn codec_pools(&self) -> Vec<(u32, Arc<CodecPool>)> {
        self.devices
            .iter()
            .flat_map(|device| {
                device
                    .channels
                    .iter()
                    .map(|channel| (device.tenant_id, channel.session.get().pool()))
            })
            .collect()
    }

    /// The decoder pools the devices that publish by themselves use, with
    /// each device's tenant.
    pub fn decoder_pools(&self) -> Vec<(u32, Arc<DecoderPool>)> {
        self.devices
            .iter()
            .filter_map(|device| {
                let push = device.push.as_ref()?;
                Some((device.tenant_id, push.decoder.get().pool()))
            })
            .collect()
    }

    /// Whether every link `device` uses is the one `wanted` asks for (same
    /// endpoint, same settings), so the device can be kept as it is.
    pub(super) fn links_fit(
        &self,
        device: &Device,
        wanted: &HashMap<Endpoint, LinkSettings>,
    ) -> bool {
        device.channels.iter().all(|channel| {
            self.links
                .iter()
                .find(|info| Arc::ptr_eq(&info.link, &channel.link))
                .is_some_and(|info| wanted.get(&info.endpoint) == Some(&info.settings))
        })
    }
}
