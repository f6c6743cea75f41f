//! The `devices` section: one entry per device the gateway collects from, each with
//! its channels and tags, plus the checks that span several devices (unique
//! `deviceId`, unique MQTT identity, known tenant).

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use super::TenantConfig;
use super::channel::{self, ChannelConfig};
use super::collector::CollectorConfig;
use super::fence;
use super::protocol::ChannelContext;
use super::read::{Unique, at_least, choice, entry_name, list, read_at, required_name, text};
use super::sparkplug::{UplinkPayload, sparkplug_id_problem};
use super::tag::{TagConfig, TagPositions};
use crate::model::{EntityState, Protocols, SerialLine, SharedLists};
use crate::mqtt::sparkplug;
use crate::yaml::{Diagnostics, Fields, Node, Pos};

/// One entry of `devices`.
#[derive(Clone, PartialEq)]
pub struct DeviceConfig {
    /// `deviceId`: the gateway's own name for the device; unique (required).
    pub device_id: String,
    /// `productId`: the product the device belongs to on the IoT platform (required).
    /// With `deviceNum` it names the device's MQTT topics, so the pair is unique.
    pub product_id: String,
    /// `deviceNum`: the device's number on the IoT platform (required).
    pub device_num: String,
    /// `enabled`: collect from the device (default true). A disabled device is loaded
    /// and checked like the others, but not polled.
    pub enabled: bool,
    /// `tenantId`: the tenant owning the device, one of `tenants` (default 0: none).
    pub tenant_id: u32,
    /// `stateTimeout`: seconds without a successful read after which the device's
    /// state is considered stale (at least 1; default none).
    pub state_timeout_s: Option<u64>,
    /// `stateWhenExpired`: where the device's lease ends when nothing renews
    /// it: `offline` (the default) or `unknown`, for a device that reports
    /// seldom and whose silence is no alarm (seed 000's "to be confirmed").
    pub state_when_expired: EntityState,
    /// `pipeline`: the name of the pipeline the device's samples go through; when
    /// absent, its product's `pipeline`, else its tenant's, else `default`.
    pub pipeline: String,
    /// Whether the entry names its pipeline (else `pipeline` was resolved).
    pub pipeline_named: bool,
    /// `channels`: at least one.
    pub channels: Vec<ChannelConfig>,
    /// Where the entry starts.
    pub pos: Pos,
}

/// As derived, but `state_when_expired` only when it is not the default, so a
/// fingerprint stays the one earlier versions kept (see
/// [`DeviceConfig::fingerprint`]).
impl std::fmt::Debug for DeviceConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = f.debug_struct("DeviceConfig");
        s.field("device_id", &self.device_id)
            .field("product_id", &self.product_id)
            .field("device_num", &self.device_num)
            .field("enabled", &self.enabled)
            .field("tenant_id", &self.tenant_id)
            .field("state_timeout_s", &self.state_timeout_s);
        if self.state_when_expired != EntityState::Offline {
            s.field("state_when_expired", &self.state_when_expired);
        }
        s.field("pipeline", &self.pipeline)
            .field("pipeline_named", &self.pipeline_named)
            .field("channels", &self.channels)
            .field("pos", &self.pos)
            .finish()
    }
}

impl DeviceConfig {
    /// All the device's tags, channel by channel in file order. A tag's index in this
    /// iteration is its index in the device (the `tag` of a sample).
    pub fn tags(&self) -> impl Iterator<Item = &TagConfig> {
        self.channels.iter().flat_map(|channel| channel.tags.iter())
    }

    /// The tags of every channel with where each is written.
    pub fn placed_tags(&self) -> impl Iterator<Item = (&TagConfig, TagPositions)> {
        self.channels.iter().flat_map(ChannelConfig::placed_tags)
    }

    /// Whether both say the same of the device, wherever in the file they stand.
    pub fn same_as(&self, other: &DeviceConfig) -> bool {
        self.without_positions() == other.without_positions()
    }

    /// A digest of what the entry says, positions aside: equal for entries that
    /// are [`DeviceConfig::same_as`] each other, in this engine version.
    pub fn fingerprint(&self) -> String {
        let digest = Sha256::digest(format!("{:?}", self.without_positions()).as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn without_positions(&self) -> DeviceConfig {
        let mut device = self.clone();
        device.pos = Pos::default();
        for channel in &mut device.channels {
            channel.pos = Pos::default();
            channel.tag_positions.fill(TagPositions::default());
            for option in &mut channel.options {
                option.key_pos = Pos::default();
                option.value_pos = Pos::default();
            }
        }
        device
    }
}

/// Reads the `devices` list and checks names that must be unique across devices.
/// Channels on one serial port share its line: they must drive it alike, and
/// none may ask for a connection of its own (a port opens once).
fn check_serial_lines(devices: &[DeviceConfig], errors: &mut Diagnostics) {
    let mut first: HashMap<&str, (&ChannelConfig, SerialLine)> = HashMap::new();
    for channel in devices.iter().flat_map(|d| &d.channels) {
        let Some(line) = channel.serial else {
            continue;
        };
        let Some((earlier, driven)) = first.get(channel.host.as_str()) else {
            first.insert(&channel.host, (channel, line));
            continue;
        };
        if *driven != line {
            errors.push(
                channel.pos,
                format!(
                    "serial port `{}` is driven otherwise by the channel at {}: every channel \
                     on one line needs the same baudRate, parity, dataBits and stopBits",
                    channel.host, earlier.pos
                ),
            );
        }
        if !channel.shared_connection || !earlier.shared_connection {
            errors.push(
                channel.pos,
                format!(
                    "serial port `{}` is used by the channel at {} too: a port opens once, \
                     so its channels cannot set `sharedConnection: false`",
                    channel.host, earlier.pos
                ),
            );
        }
    }
}

/// Reads the `devices` section; `base` is where secrets named by a file are
/// read from (none for a pushed device).
pub(super) fn read_all(
    node: &Node,
    collector: &CollectorConfig,
    tenants: &[TenantConfig],
    protocols: &Protocols,
    base: Option<&std::path::Path>,
    errors: &mut Diagnostics,
) -> Vec<DeviceConfig> {
    let context = ChannelContext {
        merge_gap: collector.merge_gap,
        protocols,
        base,
    };
    let mut ids = Unique::default();
    let mut topics: HashMap<(String, String), Pos> = HashMap::new();
    let mut tag_lists = SharedLists::default();
    let mut devices = Vec::new();
    for item in list(node, "devices", errors) {
        let mark = errors.len();
        let Some(mut f) = Fields::of(item, "device", errors) else {
            continue;
        };
        let device_id = required_name(&mut f, "deviceId", errors).map(|(id, pos)| {
            if id.trim().is_empty() {
                errors.push(pos, "`deviceId`: must not be empty");
            } else if let Some(first) = ids.first(&id, pos) {
                errors.push(pos, format!("duplicate deviceId `{id}` (first at {first})"));
            }
            id
        });
        let product_id = topic_part(&mut f, "productId", errors);
        let device_num = topic_part(&mut f, "deviceNum", errors);
        if let (Some((product, pos)), Some((num, _))) = (&product_id, &device_num) {
            let pair = (product.clone(), num.clone());
            if let Some(first) = topics.get(&pair) {
                errors.push(
                    *pos,
                    format!(
                        "productId `{product}` with deviceNum `{num}` is already used by the \
                         device at {first}: both would publish to the same MQTT topic"
                    ),
                );
            } else {
                topics.insert(pair, *pos);
            }
        }
        let enabled = read_at::<bool>(&mut f, "enabled", errors).is_none_or(|(enabled, _)| enabled);
        let tenant_id = match read_at::<u32>(&mut f, "tenantId", errors) {
            Some((id, pos)) if id != 0 && !tenants.iter().any(|t| t.tenant_id == id) => {
                errors.push(
                    pos,
                    format!("`tenantId`: no tenant {id} is configured under `tenants`"),
                );
                id
            }
            other => other.map_or(0, |(id, _)| id),
        };
        let state_timeout_s = f
            .node("stateTimeout")
            .map(|_| at_least(&mut f, "stateTimeout", 1, 1, errors));
        let state_when_expired = choice(
            &mut f,
            "stateWhenExpired",
            &[
                ("offline", EntityState::Offline),
                ("unknown", EntityState::Unknown),
            ],
            EntityState::Offline,
            errors,
        );
        // Empty until resolved from the product or tenant (see `resolve_pipelines`).
        let pipeline = text(&mut f, "pipeline", errors).unwrap_or_default();
        let pipeline_named = !pipeline.is_empty();
        let channels = read_channels(item, &mut f, &context, &mut tag_lists, errors);
        f.finish(errors);
        if let Some(id) = &device_id {
            errors.name_since(mark, &format!("device `{id}`"));
        }
        if let (Some(device_id), Some((product_id, _)), Some((device_num, _))) =
            (device_id, product_id, device_num)
        {
            devices.push(DeviceConfig {
                device_id,
                product_id,
                device_num,
                enabled,
                tenant_id,
                state_timeout_s,
                state_when_expired,
                pipeline,
                pipeline_named,
                channels,
                pos: item.pos,
            });
        }
    }
    check_serial_lines(&devices, errors);
    check_fences(&devices, tenants, errors);
    if matches!(collector.mqtt.payload, UplinkPayload::SparkplugB(_)) {
        check_sparkplug(&devices, errors);
    }
    devices
}

/// Every channel of a fenced tenant's device reaches inside the fence.
fn check_fences(devices: &[DeviceConfig], tenants: &[TenantConfig], errors: &mut Diagnostics) {
    for device in devices {
        let Some((tenant, entries)) = tenants
            .iter()
            .find(|t| t.tenant_id == device.tenant_id && device.tenant_id != 0)
            .and_then(|t| t.fence.as_ref().map(|f| (t, f)))
        else {
            continue;
        };
        // A device on the uplink's broker reaches only what the operator set up.
        let reaching = device.channels.iter().filter(|c| {
            !matches!(
                c.push.as_ref().map(|p| &p.broker),
                Some(super::DeviceBroker::Uplink)
            )
        });
        for channel in reaching {
            if let Some(reach) = fence::outside(entries, channel) {
                errors.push(
                    channel.pos,
                    format!(
                        "channel `{}` reaches {reach}, outside the fence of tenant {} (at {})",
                        channel.channel_id, tenant.tenant_id, tenant.pos
                    ),
                );
            }
        }
    }
}

/// With Sparkplug B a device id is a topic level, each tag's metric alias is
/// unique across the edge node, and no tag is an array (the engine publishes
/// no Sparkplug array datatype).
fn check_sparkplug(devices: &[DeviceConfig], errors: &mut Diagnostics) {
    let mut aliases: HashMap<u64, (&str, &str, Pos)> = HashMap::new();
    for device in devices {
        if let Some(problem) = sparkplug_id_problem(&device.device_id) {
            errors.push(
                device.pos,
                format!(
                    "`deviceId`: `{}` is the Sparkplug device id: {problem}",
                    device.device_id
                ),
            );
        }
        for (tag, at) in device.placed_tags() {
            if let Some(len) = tag.spec.array_len() {
                errors.push(
                    at.entry,
                    format!(
                        "tag `{}`: an array ({len} elements) has no Sparkplug metric here; \
                         read its elements as single tags, or publish JSON",
                        tag.spec.key
                    ),
                );
            }
            let alias = sparkplug::alias(&device.device_id, &tag.spec.key);
            if let Some((other, key, pos)) = aliases.get(&alias) {
                errors.push(
                    at.entry,
                    format!(
                        "tag `{}`: its Sparkplug alias {alias} is the alias of tag `{key}` of \
                         device `{other}` (at {pos}) too; rename one of them",
                        tag.spec.key
                    ),
                );
            } else {
                aliases.insert(alias, (&device.device_id, &tag.spec.key, at.entry));
            }
        }
    }
}

/// A required `productId` or `deviceNum`: part of MQTT topic names, so not empty and
/// free of `/`, `+`, `#` and spaces.
fn topic_part(
    f: &mut Fields<'_>,
    key: &'static str,
    errors: &mut Diagnostics,
) -> Option<(String, Pos)> {
    let (value, pos) = required_name(f, key, errors)?;
    if value.is_empty() {
        errors.push(pos, format!("`{key}`: must not be empty"));
    } else if value.contains(['/', '+', '#']) || value.contains(char::is_whitespace) {
        errors.push(
            pos,
            format!(
                "`{key}`: `{value}` is part of MQTT topics, so it may not contain `/`, `+`, `#` \
                 or spaces"
            ),
        );
    }
    Some((value, pos))
}

/// The device's `channels` (at least one) and the checks among them.
fn read_channels(
    device: &Node,
    f: &mut Fields<'_>,
    context: &ChannelContext<'_>,
    tag_lists: &mut SharedLists<TagConfig>,
    errors: &mut Diagnostics,
) -> Vec<ChannelConfig> {
    let Some(node) = f.node("channels") else {
        errors.push(
            device.pos,
            "device has no channels: add at least one under `channels`",
        );
        return Vec::new();
    };
    let items = list(node, "channels", errors);
    if items.is_empty() && node.as_seq().is_some() {
        errors.push(node.pos, "`channels`: a device needs at least one channel");
    }
    let mut channel_ids = Unique::default();
    let mut tag_keys = Unique::default();
    let channels: Vec<ChannelConfig> = items
        .iter()
        .filter_map(|item| {
            let mark = errors.len();
            let channel = channel::read(
                item,
                context,
                &mut channel_ids,
                &mut tag_keys,
                tag_lists,
                errors,
            );
            if let Some(id) = entry_name(item, "channelId") {
                errors.name_since(mark, &format!("channel `{id}`"));
            }
            channel
        })
        .collect();
    if channels.len() > 1
        && let Some(push) = channels.iter().find(|c| c.push.is_some())
    {
        errors.push(
            push.pos,
            "an MQTT channel is its device's only channel: a device that publishes by itself \
             is not polled too",
        );
    }
    channels
}

#[cfg(test)]
mod tests {
    use super::super::tests::{errors_of, load_ok};
    use crate::model::EntityState;

    /// A device entry (list item at column 3) with one modbus channel and one tag.
    fn device(id: &str, product: &str, num: &str, extra: &str) -> String {
        format!(
            "  - deviceId: {id}
    productId: {product}
    deviceNum: {num}
{extra}    channels:
      - channelId: c
        protocol: modbus-tcp
        host: plc
        tags:
          - {{key: t, address: '1', dataType: BOOL}}
"
        )
    }

    #[test]
    fn device_defaults() {
        let config = load_ok(&format!("devices:\n{}", device("d", "P", "D", "")));
        let d = &config.devices[0];
        assert!(d.enabled);
        assert_eq!(d.tenant_id, 0);
        assert_eq!(d.state_timeout_s, None);
        assert_eq!(d.pipeline, "default");
        assert_eq!(d.tags().count(), 1);
        assert_eq!(d.pos.line, 2);
    }

    #[test]
    fn a_device_is_the_same_wherever_it_stands_in_the_file() {
        let first = load_ok(&format!(
            "devices:\n{}{}",
            device("a", "P", "A", ""),
            device("b", "P", "B", "")
        ));
        let moved = load_ok(&format!(
            "# a comment shifts every line\ndevices:\n{}{}",
            device("b", "P", "B", ""),
            device("a", "P", "A", "")
        ));
        let changed = load_ok(&format!(
            "devices:\n{}",
            device("a", "P", "A", "    stateTimeout: 9\n")
        ));
        let a = |config: &super::super::GatewayConfig| config.device("a").cloned().expect("a");
        assert_ne!(a(&first).pos, a(&moved).pos);
        assert!(a(&first).same_as(&a(&moved)));
        assert!(!a(&first).same_as(&a(&changed)));
    }

    #[test]
    fn a_device_may_end_its_lease_unknown() {
        let doc = |extra: &str| format!("devices:\n{}", device("a", "P", "A", extra));
        let a = |config: &super::super::GatewayConfig| config.device("a").cloned().expect("a");
        let plain = a(&load_ok(&doc("")));
        assert_eq!(plain.state_when_expired, EntityState::Offline);
        let offline = a(&load_ok(&doc("    stateWhenExpired: offline\n")));
        assert_eq!(
            plain.fingerprint(),
            offline.fingerprint(),
            "the default changes nothing"
        );
        let unknown = a(&load_ok(&doc("    stateWhenExpired: unknown\n")));
        assert_eq!(unknown.state_when_expired, EntityState::Unknown);
        assert_ne!(plain.fingerprint(), unknown.fingerprint());
        let wrong = errors_of(&doc("    stateWhenExpired: gone\n"));
        assert!(wrong.to_string().contains("stateWhenExpired"), "{wrong}");
    }

    /// Pushed configurations keep the fingerprint of the file entry they
    /// replaced: an engine that digested the same entry differently would report
    /// every such entry as edited since its push.
    #[test]
    fn the_fingerprint_is_the_one_earlier_versions_kept() {
        let doc = "devices:\n  - deviceId: d\n    productId: P\n    deviceNum: D\n    channels:\n      - channelId: c\n        protocol: modbus-tcp\n        host: plc\n        tags:\n          - {key: t, address: '40001', dataType: FLOAT32, factor: 0.5, unit: C}\n          - {key: u, address: '40003', dataType: UINT16}\n";
        assert_eq!(
            load_ok(doc).devices[0].fingerprint(),
            "75333e127e1ac7ba35c3830628b38ac3447fc1964bfdf7e02931736a2224f04e"
        );
    }

    #[test]
    fn devices_with_equal_tags_share_one_list_and_keep_their_own_positions() {
        let other_tag = device("c", "P", "C", "").replace("dataType: BOOL", "dataType: UINT16");
        let config = load_ok(&format!(
            "devices:\n{}{}{other_tag}",
            device("a", "P", "A", ""),
            device("b", "P", "B", "")
        ));
        let channel = |id: &str| &config.device(id).expect("device").channels[0];
        assert!(std::sync::Arc::ptr_eq(
            &channel("a").tags,
            &channel("b").tags
        ));
        assert!(!std::sync::Arc::ptr_eq(
            &channel("a").tags,
            &channel("c").tags
        ));
        let line = |id: &str| channel(id).tag_positions[0].entry.line;
        assert_eq!((line("a"), line("b"), line("c")), (10, 19, 28));
    }

    #[test]
    fn device_options_and_disabled_device() {
        let config = load_ok(&format!(
            "tenants: [{{tenantId: 7, name: seven}}]\ndevices:\n{}",
            device(
                "d",
                "P",
                "D",
                "    enabled: false\n    tenantId: 7\n    stateTimeout: 30\n    pipeline: fast\n"
            )
        ));
        let d = &config.devices[0];
        assert!(!d.enabled);
        assert_eq!(d.tenant_id, 7);
        assert_eq!(d.state_timeout_s, Some(30));
        assert_eq!(d.pipeline, "fast");
    }

    #[test]
    fn tags_iterate_across_channels_in_order() {
        let config = load_ok(
            "devices:
  - deviceId: d
    productId: P
    deviceNum: D
    channels:
      - channelId: c1
        protocol: modbus-tcp
        host: plc1
        tags:
          - {key: a, address: '1', dataType: BOOL}
          - {key: b, address: '2', dataType: BOOL}
      - channelId: c2
        protocol: s7
        host: plc2
        tags:
          - {key: c, address: DB1.0, dataType: BOOL}
",
        );
        let keys: Vec<_> = config.devices[0]
            .tags()
            .map(|t| t.spec.key.as_str())
            .collect();
        assert_eq!(keys, ["a", "b", "c"]);
    }

    #[test]
    fn duplicate_device_id() {
        let text = format!(
            "devices:\n{}{}",
            device("d", "P", "N1", ""),
            device("d", "P", "N2", "")
        );
        assert_eq!(
            errors_of(&text).to_string(),
            "gw.yaml:11:15: duplicate deviceId `d` (first at 2:15)"
        );
    }

    #[test]
    fn duplicate_mqtt_identity() {
        let text = format!(
            "devices:\n{}{}",
            device("d1", "P", "D", ""),
            device("d2", "P", "D", "")
        );
        assert_eq!(
            errors_of(&text).to_string(),
            "gw.yaml:12:16: productId `P` with deviceNum `D` is already used by the device at \
             3:16: both would publish to the same MQTT topic"
        );
    }

    #[test]
    fn duplicate_channel_id() {
        let text = "devices:
  - deviceId: d
    productId: P
    deviceNum: D
    channels:
      - {channelId: c, protocol: s7, host: a}
      - {channelId: c, protocol: s7, host: b}
";
        assert_eq!(
            errors_of(text).to_string(),
            "gw.yaml:7:21: duplicate channelId `c` in this device (first at 6:21)"
        );
    }

    #[test]
    fn device_without_channels() {
        let text = "devices:
  - {deviceId: d1, productId: P, deviceNum: N1}
  - {deviceId: d2, productId: P, deviceNum: N2, channels: []}
";
        assert_eq!(
            errors_of(text).to_string(),
            "gw.yaml:2:5: device has no channels: add at least one under `channels`\n\
             gw.yaml:3:59: `channels`: a device needs at least one channel"
        );
    }

    #[test]
    fn unknown_tenant() {
        let text = format!(
            "tenants: [{{tenantId: 1, name: one}}]\ndevices:\n{}",
            device("d", "P", "D", "    tenantId: 2\n")
        );
        assert_eq!(
            errors_of(&text).to_string(),
            "gw.yaml:6:15: `tenantId`: no tenant 2 is configured under `tenants`"
        );
    }

    #[test]
    fn identity_checks() {
        let text = format!(
            "devices:\n{}",
            device(
                "''",
                "'P/1'",
                "D",
                "    stateTimeout: 0\n    pipeline: ''\n"
            )
        );
        let text = errors_of(&text).to_string();
        let expected = [
            "gw.yaml:2:15: `deviceId`: must not be empty",
            "gw.yaml:3:16: `productId`: `P/1` is part of MQTT topics",
            "gw.yaml:5:19: `stateTimeout`: must be at least 1, found 0",
            "gw.yaml:6:15: `pipeline`: must not be empty",
        ];
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), expected.len(), "{text}");
        for (line, want) in lines.iter().zip(expected) {
            assert!(line.starts_with(want), "got  {line}\nwant {want}");
        }
    }

    #[test]
    fn missing_required_device_keys() {
        let text = errors_of("devices:\n  - channels: [{channelId: c, protocol: s7, host: a}]\n")
            .to_string();
        assert_eq!(
            text,
            "gw.yaml:2:5: device: missing required key `deviceId`\n\
             gw.yaml:2:5: device: missing required key `productId`\n\
             gw.yaml:2:5: device: missing required key `deviceNum`"
        );
    }

    #[test]
    fn unquoted_yaml_booleans_and_numbers_get_a_hint() {
        let text = format!(
            "devices:\n{}",
            device("d", "P", "N", "").replace("'1'", "00001")
        );
        let text = errors_of(&text).to_string();
        assert_eq!(
            text,
            "gw.yaml:4:16: `deviceNum`: expected a string, found a boolean: write it in quotes \
             (unquoted, YAML reads y, n, yes, no, on, off, true and false as booleans)\n\
             gw.yaml:10:31: `address`: expected a string, found a number: write it in quotes \
             so that it is kept exactly as written"
        );
    }
}
