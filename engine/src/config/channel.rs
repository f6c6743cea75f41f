//! One entry of a device's `channels`: a connection to a PLC over one protocol, and
//! the tags read through it.
//!
//! The engine is protocol-agnostic: protocol-specific keys (`unitId`, `plcType`,
//! `rack`, ...) are checked by the `protocol` module, then kept as plain [`Setting`]s,
//! defaults filled in, for the codec component of the protocol.

use std::fmt;
use std::sync::Arc;

use super::protocol::{self, Protocol};
use super::read::{Unique, at_least, list, ranged, read_at, required_name, required_text};
use super::tag::{self, TagConfig, TagPositions};
use crate::model::{ByteOrder, Parity, SerialLine, Setting, SettingValue, SharedLists};
use crate::yaml::{self, Diagnostics, Fields, Node, Pos};

/// One entry of a device's `channels`.
#[derive(Clone, PartialEq)]
pub struct ChannelConfig {
    /// `channelId`: unique within the device.
    pub channel_id: String,
    /// `protocol`: `modbus-tcp`, `s7` or `mc`.
    pub protocol: Protocol,
    /// `host`: the PLC's address or host name; for `modbus-rtu`, its `serialPort`.
    pub host: String,
    /// `port`: TCP port (default 502 for modbus-tcp, 102 for s7; required for mc and
    /// modbus-rtu-over-tcp); 0 for `modbus-rtu`.
    pub port: u16,
    /// For `modbus-rtu`: how the serial port is driven.
    pub serial: Option<SerialLine>,
    /// `connectTimeoutMs`: time allowed to open the connection (at least 1; default 3000).
    pub connect_timeout_ms: u64,
    /// `readTimeoutMs`: time allowed for one response (at least 1; default 2000).
    pub read_timeout_ms: u64,
    /// `heartbeatMs`: interval of the liveness probe; 0 (the default) turns it off.
    pub heartbeat_ms: u64,
    /// `byteOrder`: how multi-register values are laid out (default ABCD for modbus-tcp
    /// and s7; for mc `None`, the codec decides). Tags may override it.
    pub byte_order: Option<ByteOrder>,
    /// `sharedConnection`: channels of several devices naming the same protocol, host
    /// and port share one TCP connection (default true).
    pub shared_connection: bool,
    /// The protocol-specific keys, named as written (`unitId`, `plcType`, ...), with
    /// the protocol's defaults filled in; handed to the codec unchanged.
    pub settings: Vec<Setting>,
    /// `tags`, in file order (default none); channels with equal tags share one
    /// list (a fleet of one model keeps it once).
    pub tags: Arc<[TagConfig]>,
    /// Where each of `tags` is written, in the same order.
    pub tag_positions: Box<[TagPositions]>,
    /// Where the entry starts.
    pub pos: Pos,
}

/// Each tag with where it is written, as one list: the text
/// [`super::DeviceConfig::fingerprint`] digests, which pushed configurations keep
/// on disk, so it reads as it did before the positions moved beside the tags.
impl fmt::Debug for ChannelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tags: Vec<Placed<'_>> = self.placed_tags().map(|(t, at)| Placed(t, at)).collect();
        f.debug_struct("ChannelConfig")
            .field("channel_id", &self.channel_id)
            .field("protocol", &self.protocol)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("serial", &self.serial)
            .field("connect_timeout_ms", &self.connect_timeout_ms)
            .field("read_timeout_ms", &self.read_timeout_ms)
            .field("heartbeat_ms", &self.heartbeat_ms)
            .field("byte_order", &self.byte_order)
            .field("shared_connection", &self.shared_connection)
            .field("settings", &self.settings)
            .field("tags", &tags)
            .field("pos", &self.pos)
            .finish()
    }
}

/// A tag with its positions, shown as one entry.
struct Placed<'a>(&'a TagConfig, TagPositions);

impl fmt::Debug for Placed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Placed(tag, at) = self;
        f.debug_struct("TagConfig")
            .field("spec", &tag.spec)
            .field("period_ms", &tag.period_ms)
            .field("readback", &tag.readback)
            .field("min", &tag.min)
            .field("max", &tag.max)
            .field("unit", &tag.unit)
            .field("byte_order_override", &tag.byte_order_override)
            .field("pos", &at.entry)
            .field("address_pos", &at.address)
            .finish()
    }
}

impl ChannelConfig {
    /// The tags with where each is written.
    pub fn placed_tags(&self) -> impl Iterator<Item = (&TagConfig, TagPositions)> {
        self.tags.iter().zip(self.tag_positions.iter().copied())
    }

    /// The protocol-specific setting `key` (as written, e.g. `unitId`), if any.
    pub fn setting(&self, key: &str) -> Option<&SettingValue> {
        self.settings
            .iter()
            .find(|s| s.key == key)
            .map(|s| &s.value)
    }
}

/// Reads one channel. `channel_ids` and `tag_keys` are the names already used in the
/// device; `merge_gap` is the collector's; `tag_lists` the tag lists read so far.
pub(super) fn read(
    node: &Node,
    merge_gap: u32,
    channel_ids: &mut Unique,
    tag_keys: &mut Unique,
    tag_lists: &mut SharedLists<TagConfig>,
    errors: &mut Diagnostics,
) -> Option<ChannelConfig> {
    let mut f = Fields::of(node, "channel", errors)?;
    let channel_id = required_name(&mut f, "channelId", errors).map(|(id, pos)| {
        if id.trim().is_empty() {
            errors.push(pos, "`channelId`: must not be empty");
        } else if let Some(first) = channel_ids.first(&id, pos) {
            errors.push(
                pos,
                format!("duplicate channelId `{id}` in this device (first at {first})"),
            );
        }
        id
    });
    let protocol = f
        .required_with("protocol", errors, |node| {
            yaml::enum_value(node, Protocol::NAMES)
        })
        .map(|(protocol, _)| protocol);
    let (host, port, serial) = if protocol == Some(Protocol::ModbusRtu) {
        let (port, serial) = read_serial(&mut f, errors);
        (port, Some(0), serial)
    } else {
        refuse_serial_keys(&mut f, errors);
        let host = read_host(&mut f, errors);
        (host, read_port(&mut f, protocol, errors), None)
    };
    let connect_timeout_ms = at_least(&mut f, "connectTimeoutMs", 1, 3000, errors);
    let read_timeout_ms = at_least(&mut f, "readTimeoutMs", 1, 2000, errors);
    let heartbeat_ms = at_least(&mut f, "heartbeatMs", 0, 0, errors);
    let shared_connection =
        read_at::<bool>(&mut f, "sharedConnection", errors).is_none_or(|(shared, _)| shared);
    let settings = protocol::read_settings(node, &mut f, protocol, merge_gap, errors);
    let byte_order = settings
        .iter()
        .find(|s| s.key == "byteOrder")
        .and_then(|s| match &s.value {
            SettingValue::Text(name) => ByteOrder::NAMES
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, order)| *order),
            _ => None,
        });
    let items = f.node("tags").map_or(&[][..], |n| list(n, "tags", errors));
    let (tags, tag_positions): (Vec<_>, Vec<_>) = items
        .iter()
        .filter_map(|item| tag::read(item, byte_order, tag_keys, errors))
        .unzip();
    f.finish(errors);
    Some(ChannelConfig {
        channel_id: channel_id?,
        protocol: protocol?,
        host: host?,
        port: port?,
        serial,
        connect_timeout_ms,
        read_timeout_ms,
        heartbeat_ms,
        byte_order,
        shared_connection,
        settings,
        tags: tag_lists.share(tags),
        tag_positions: tag_positions.into_boxed_slice(),
        pos: node.pos,
    })
}

/// The serial keys, for a channel of another protocol: each is a mistake.
const SERIAL_KEYS: [&str; 5] = ["serialPort", "baudRate", "parity", "dataBits", "stopBits"];

fn refuse_serial_keys(f: &mut Fields<'_>, errors: &mut Diagnostics) {
    for key in SERIAL_KEYS {
        if let Some(node) = f.node(key) {
            errors.push(
                node.pos,
                format!("`{key}`: only a modbus-rtu channel has a serial line"),
            );
        }
    }
}

fn read_host(f: &mut Fields<'_>, errors: &mut Diagnostics) -> Option<String> {
    match required_text(f, "host", errors) {
        Some((host, pos)) if host.trim().is_empty() || host.contains(char::is_whitespace) => {
            errors.push(
                pos,
                format!("`host`: `{host}` is not a host name or address"),
            );
            None
        }
        other => other.map(|(host, _)| host),
    }
}

/// The serial port of a `modbus-rtu` channel and how it is driven; `host` and
/// `port` have no place there.
fn read_serial(
    f: &mut Fields<'_>,
    errors: &mut Diagnostics,
) -> (Option<String>, Option<SerialLine>) {
    for key in ["host", "port"] {
        if let Some(node) = f.node(key) {
            errors.push(
                node.pos,
                format!("`{key}`: a modbus-rtu channel names its line with `serialPort`"),
            );
        }
    }
    let port = match required_text(f, "serialPort", errors) {
        Some((port, pos)) if port.trim().is_empty() => {
            errors.push(pos, "`serialPort`: must not be empty");
            None
        }
        other => other.map(|(port, _)| port),
    };
    let baud_rate = ranged(f, "baudRate", 50..=4_000_000, 9600, errors);
    let parity = f
        .optional_with("parity", errors, parity_of)
        .unwrap_or(Parity::Even);
    let data_bits = ranged(f, "dataBits", 7..=8, 8, errors);
    let stop_bits = ranged(f, "stopBits", 1..=2, 1, errors);
    let line = SerialLine {
        baud_rate,
        parity,
        data_bits,
        stop_bits,
    };
    (port, Some(line))
}

/// `parity`: `N`, `E` or `O`. YAML 1.1 reads a bare `N` as false, so false is
/// taken as `N` too.
fn parity_of(node: &Node) -> Result<Parity, String> {
    match node.kind {
        yaml::Kind::Bool(false) => Ok(Parity::None),
        _ => yaml::enum_value(node, Parity::NAMES),
    }
}

/// `port`, or the protocol's standard port; an error when the protocol has none.
fn read_port(
    f: &mut Fields<'_>,
    protocol: Option<Protocol>,
    errors: &mut Diagnostics,
) -> Option<u16> {
    match read_at::<u16>(f, "port", errors) {
        Some((0, pos)) => {
            errors.push(pos, "`port`: must be at least 1, found 0");
            None
        }
        Some((port, _)) => Some(port),
        None if f.node("port").is_some() => None, // present but invalid: already reported
        None => match protocol?.default_port() {
            Some(port) => Some(port),
            None => {
                errors.push(
                    f.pos(),
                    format!(
                        "channel: missing required key `port` (protocol {} has no standard port)",
                        protocol?.name()
                    ),
                );
                None
            }
        },
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::tests::{errors_of, load_ok};
    use super::*;

    /// A one-device document whose only channel has the given extra lines.
    pub(in super::super) fn doc(channel: &str) -> String {
        format!(
            "devices:\n  - deviceId: d\n    productId: P\n    deviceNum: D\n    channels:\n      - channelId: c\n{channel}"
        )
    }

    fn channel_of(channel: &str) -> ChannelConfig {
        let mut config = load_ok(&doc(channel));
        config.devices.remove(0).channels.remove(0)
    }

    #[test]
    fn modbus_defaults() {
        let ch = channel_of("        protocol: modbus-tcp\n        host: plc1\n");
        assert_eq!(ch.port, 502);
        assert_eq!(
            (ch.connect_timeout_ms, ch.read_timeout_ms, ch.heartbeat_ms),
            (3000, 2000, 0)
        );
        assert!(ch.shared_connection);
        assert_eq!(ch.byte_order, Some(ByteOrder::Abcd));
        assert_eq!(ch.setting("unitId"), Some(&SettingValue::Int(1)));
        assert_eq!(ch.setting("mergeGap"), Some(&SettingValue::Int(16)));
        assert_eq!(
            ch.setting("byteOrder"),
            Some(&SettingValue::Text("ABCD".into()))
        );
        assert_eq!(ch.settings.len(), 3);
        assert!(ch.tags.is_empty());
    }

    #[test]
    fn modbus_overrides() {
        let ch = channel_of(
            "        protocol: modbus-tcp\n        host: plc1\n        port: 5020\n        unitId: 17\n        mergeGap: 4\n        sharedConnection: false\n",
        );
        assert_eq!(ch.port, 5020);
        assert!(!ch.shared_connection);
        assert_eq!(ch.setting("unitId"), Some(&SettingValue::Int(17)));
        assert_eq!(ch.setting("mergeGap"), Some(&SettingValue::Int(4)));
    }

    #[test]
    fn a_modbus_rtu_channel_names_its_serial_line() {
        let ch = channel_of("        protocol: modbus-rtu\n        serialPort: /dev/ttyUSB0\n");
        assert_eq!((ch.host.as_str(), ch.port), ("/dev/ttyUSB0", 0));
        assert_eq!(
            ch.serial,
            Some(SerialLine {
                baud_rate: 9600,
                parity: Parity::Even,
                data_bits: 8,
                stop_bits: 1,
            })
        );
        assert_eq!(ch.setting("unitId"), Some(&SettingValue::Int(1)));
        // A bare N is a YAML 1.1 boolean; it still means no parity.
        let ch = channel_of(
            "        protocol: modbus-rtu\n        serialPort: /dev/ttyS1\n        baudRate: 115200\n        parity: N\n        dataBits: 7\n        stopBits: 2\n",
        );
        let line = ch.serial.expect("a line");
        assert_eq!(
            (line.baud_rate, line.parity, line.data_bits, line.stop_bits),
            (115_200, Parity::None, 7, 2)
        );
        let tunnel = channel_of(
            "        protocol: modbus-rtu-over-tcp\n        host: gw\n        port: 4001\n",
        );
        assert_eq!((tunnel.port, tunnel.serial), (4001, None));
    }

    #[test]
    fn serial_keys_belong_to_modbus_rtu_only() {
        let text = errors_of(&doc(
            "        protocol: modbus-rtu\n        host: plc\n        serialPort: /dev/ttyS0\n        parity: X\n        dataBits: 9\n",
        )).to_string();
        for expected in [
            "gw.yaml:8:15: `host`: a modbus-rtu channel names its line with `serialPort`",
            "gw.yaml:10:17: `parity`: unknown value `X`: expected N | E | O",
            "gw.yaml:11:19: `dataBits`: must be at most 8, found 9",
        ] {
            assert!(text.contains(expected), "{expected} in {text}");
        }
        let text = errors_of(&doc(
            "        protocol: modbus-tcp\n        host: plc\n        baudRate: 9600\n",
        ))
        .to_string();
        assert!(
            text.contains("gw.yaml:9:19: `baudRate`: only a modbus-rtu channel has a serial line"),
            "{text}"
        );
        let text = errors_of(&doc("        protocol: modbus-rtu\n")).to_string();
        assert!(text.contains("missing required key `serialPort`"), "{text}");
        let text = errors_of(&doc(
            "        protocol: modbus-rtu-over-tcp\n        host: gw\n",
        ))
        .to_string();
        assert!(
            text.contains("protocol modbus-rtu-over-tcp has no standard port"),
            "{text}"
        );
    }

    #[test]
    fn channels_on_one_serial_port_drive_it_alike() {
        let unit = |id: &str, baud: u32, shared: bool| {
            format!(
                "  - deviceId: {id}\n    productId: P\n    deviceNum: {id}\n    channels:\n      - channelId: c\n        protocol: modbus-rtu\n        serialPort: /dev/ttyS0\n        baudRate: {baud}\n        sharedConnection: {shared}\n"
            )
        };
        let ok = format!(
            "devices:\n{}{}",
            unit("a", 9600, true),
            unit("b", 9600, true)
        );
        assert_eq!(load_ok(&ok).devices.len(), 2);
        let text = errors_of(&format!(
            "devices:\n{}{}{}",
            unit("a", 9600, true),
            unit("b", 19200, true),
            unit("c", 9600, false)
        ))
        .to_string();
        for expected in [
            "gw.yaml:15:9: serial port `/dev/ttyS0` is driven otherwise by the channel at 6:9",
            "gw.yaml:24:9: serial port `/dev/ttyS0` is used by the channel at 6:9 too",
        ] {
            assert!(text.contains(expected), "{expected} in {text}");
        }
    }

    #[test]
    fn s7_defaults() {
        let ch = channel_of("        protocol: s7\n        host: plc1\n");
        assert_eq!(ch.port, 102);
        assert_eq!(ch.byte_order, Some(ByteOrder::Abcd));
        assert_eq!(
            ch.setting("plcType"),
            Some(&SettingValue::Text("S1200".into()))
        );
        assert_eq!(ch.setting("rack"), Some(&SettingValue::Int(0)));
        assert_eq!(ch.setting("slot"), Some(&SettingValue::Int(1)));
        assert_eq!(ch.setting("unitId"), None);
    }

    #[test]
    fn mc_defaults_and_required_port() {
        let ch = channel_of("        protocol: mc\n        host: plc1\n        port: 5000\n");
        assert_eq!(ch.byte_order, None);
        assert_eq!(ch.setting("byteOrder"), None);
        assert_eq!(
            ch.setting("series"),
            Some(&SettingValue::Text("Q_L".into()))
        );
        assert_eq!(
            ch.setting("frameType"),
            Some(&SettingValue::Text("FRAME_3E".into()))
        );
        assert_eq!(ch.setting("monitorTimer"), Some(&SettingValue::Int(4)));

        let errors = errors_of(&doc("        protocol: mc\n        host: plc1\n"));
        assert_eq!(
            errors.to_string(),
            "gw.yaml:6:9: channel: missing required key `port` (protocol mc has no standard port)"
        );
        let ch = channel_of(
            "        protocol: mc\n        host: plc1\n        port: 1\n        byteOrder: DCBA\n",
        );
        assert_eq!(ch.byte_order, Some(ByteOrder::Dcba));
    }

    #[test]
    fn missing_channel_keys() {
        let errors = errors_of(&doc("        hots: plc1\n"));
        let text = errors.to_string();
        assert!(
            text.contains("gw.yaml:6:9: channel: missing required key `protocol`"),
            "{text}"
        );
        assert!(
            text.contains("gw.yaml:6:9: channel: missing required key `host`"),
            "{text}"
        );
        assert!(
            text.contains("gw.yaml:7:9: unknown key `hots` in channel"),
            "{text}"
        );
        assert_eq!(errors.len(), 3, "{text}");
    }
}
