//! One entry of a device's `channels`: a connection to a PLC over one protocol, and
//! the tags read through it.
//!
//! The engine is protocol-agnostic: it reads the keys it owns (where to connect,
//! timeouts) and checks every other key against what the protocol's codec
//! declares (the `protocol` module), then keeps them as plain [`Setting`]s,
//! defaults filled in, for that codec.

use std::fmt;
use std::sync::Arc;

use super::protocol::{self, ChannelContext, ChannelOption, ChannelProtocol};
use super::push_channel::{self, PushChannel};
use super::read::{Unique, at_least, list, ranged, read_at, required_name, required_text};
use super::tag::{self, TagConfig, TagPositions};
use crate::model::{
    ByteOrder, Parity, ProtocolInfo, SerialLine, Setting, SettingValue, SharedLists, Transport,
};
use crate::yaml::{self, Diagnostics, Fields, Node, Pos};

/// One entry of a device's `channels`.
#[derive(Clone, PartialEq)]
pub struct ChannelConfig {
    /// `channelId`: unique within the device.
    pub channel_id: String,
    /// `protocol`: a protocol a codec declares (`modbus-tcp`, `s7`, `mc`,
    /// `modbus-rtu`, `modbus-rtu-over-tcp` built in), with its declaration.
    pub protocol: ChannelProtocol,
    /// How its frames travel: a serial line when the channel names a
    /// `serialPort`, else the TCP transport its protocol declares.
    pub transport: Transport,
    /// `host`: the PLC's address or host name; on a serial line, its `serialPort`.
    pub host: String,
    /// `port`: TCP port (default the protocol's standard port, when it has
    /// one); 0 on a serial line.
    pub port: u16,
    /// On a serial line: how the serial port is driven.
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
    /// The protocol's settings, named as written (`unitId`, `plcType`, ...), with
    /// its defaults filled in; handed to the codec unchanged.
    pub settings: Vec<Setting>,
    /// Every key the engine does not own, as written: what `settings` were
    /// made from, checked again against a new version of the codec.
    pub options: Vec<ChannelOption>,
    /// `tags`, in file order (default none); channels with equal tags share one
    /// list (a fleet of one model keeps it once).
    pub tags: Arc<[TagConfig]>,
    /// Where each of `tags` is written, in the same order.
    pub tag_positions: Box<[TagPositions]>,
    /// Where the entry starts.
    pub pos: Pos,
    /// For a device that publishes by itself (`protocol: mqtt`): where its
    /// messages arrive and how they are read. Its `protocol` is then `mqtt`
    /// spoken by its decoder, `host` and `port` its own broker's (empty and 0
    /// on the uplink's), its `settings` the decoder's; it has no link.
    pub push: Option<PushChannel>,
}

/// Each tag with where it is written, as one list: the text
/// [`super::DeviceConfig::fingerprint`] digests, which pushed configurations keep
/// on disk, so it reads as it did before the positions moved beside the tags.
impl fmt::Debug for ChannelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tags: Vec<Placed<'_>> = self.placed_tags().map(|(t, at)| Placed(t, at)).collect();
        let mut entry = f.debug_struct("ChannelConfig");
        entry
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
            .field("pos", &self.pos);
        // Left out when absent, so polled channels digest as before.
        if let Some(push) = &self.push {
            entry.field("push", push);
        }
        entry.finish()
    }
}

/// A tag with its positions, shown as one entry.
struct Placed<'a>(&'a TagConfig, TagPositions);

impl fmt::Debug for Placed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Placed(tag, at) = self;
        let mut f = f.debug_struct("TagConfig");
        f.field("spec", &tag.spec)
            .field("period_ms", &tag.period_ms)
            // As earlier versions digested it, when absent meant off (now it
            // means on for RW tags, which the access says); a written `false`
            // is told apart.
            .field("readback", &Readback(tag.readback))
            .field("min", &tag.min)
            .field("max", &tag.max)
            .field("unit", &tag.unit)
            .field("byte_order_override", &tag.byte_order_override)
            .field("pos", &at.entry)
            .field("address_pos", &at.address);
        // Only when written: a tag without it digests as before it existed.
        if let Some(precision) = tag.precision {
            f.field("precision", &precision);
        }
        f.finish()
    }
}

/// A tag's `readback` as fingerprints show it: `false` when not written,
/// `true`, or `written false`.
struct Readback(Option<bool>);

impl fmt::Debug for Readback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("false"),
            Some(true) => f.write_str("true"),
            Some(false) => f.write_str("written false"),
        }
    }
}

impl ChannelConfig {
    /// The tags with where each is written.
    pub fn placed_tags(&self) -> impl Iterator<Item = (&TagConfig, TagPositions)> {
        self.tags.iter().zip(self.tag_positions.iter().copied())
    }

    /// Whether its link carries one request at a time with no transaction id.
    pub fn is_line(&self) -> bool {
        self.transport.is_line()
    }

    /// Checks the settings again against `protocol`, a new declaration of the
    /// channel's protocol (a new version of its codec), and takes them.
    pub(super) fn rebind(
        &mut self,
        protocol: &Arc<ProtocolInfo>,
        context: &ChannelContext<'_>,
        errors: &mut Diagnostics,
    ) {
        if protocol.transport(self.serial.is_some()) != Some(self.transport) {
            errors.push(
                self.pos,
                format!(
                    "protocol {} no longer runs on {}",
                    protocol.name,
                    self.transport.describe()
                ),
            );
        }
        self.settings = protocol::bind(protocol, &self.options, context, errors);
        self.byte_order = protocol::byte_order(&self.settings);
        self.protocol = ChannelProtocol(Arc::clone(protocol));
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
/// device; `tag_lists` the tag lists read so far.
pub(super) fn read(
    node: &Node,
    context: &ChannelContext<'_>,
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
    let pushes = f
        .node("protocol")
        .is_some_and(|n| matches!(&n.kind, yaml::Kind::Str(p) if p == push_channel::MQTT));
    if pushes {
        return read_push(node, f, channel_id?, context, tag_keys, tag_lists, errors);
    }
    let protocol = f
        .required_with("protocol", errors, |node| {
            protocol_of(node, context.protocols)
        })
        .map(|(protocol, _)| protocol);
    let serial_port = f.node("serialPort").map(|node| node.pos);
    let transport = protocol
        .as_ref()
        .and_then(|p| transport(p, serial_port, errors));
    let on_line = match transport {
        Some(transport) => transport == Transport::SerialLine,
        None => serial_port.is_some(),
    };
    let (host, port, serial) = if on_line {
        let (port, serial) = read_serial(&mut f, protocol.as_deref(), errors);
        (port, Some(0), serial)
    } else {
        refuse_serial_keys(&mut f, protocol.as_deref(), errors);
        let host = read_host(&mut f, errors);
        (host, read_port(&mut f, protocol.as_deref(), errors), None)
    };
    let connect_timeout_ms = at_least(&mut f, "connectTimeoutMs", 1, 3000, errors);
    let read_timeout_ms = at_least(&mut f, "readTimeoutMs", 1, 2000, errors);
    let heartbeat_ms = at_least(&mut f, "heartbeatMs", 0, 0, errors);
    let shared_connection =
        read_at::<bool>(&mut f, "sharedConnection", errors).is_none_or(|(shared, _)| shared);
    let items = f.node("tags").map_or(&[][..], |n| list(n, "tags", errors));
    let named = node
        .as_map()
        .is_some_and(|entries| entries.iter().any(|(k, _)| k.name == "protocol"));
    let options = protocol::options(f.rest());
    let settings = match &protocol {
        Some(p) => protocol::bind(p, &options, context, errors),
        // Without a protocol, a key no protocol has is a mistake; an unknown
        // protocol's keys are left alone: they may be its own.
        None if !named => {
            protocol::refuse_undeclared(&options, context.protocols, errors);
            Vec::new()
        }
        None => Vec::new(),
    };
    let byte_order = protocol::byte_order(&settings);
    let (tags, tag_positions): (Vec<_>, Vec<_>) = items
        .iter()
        .filter_map(|item| tag::read(item, byte_order, tag_keys, errors))
        .unzip();
    Some(ChannelConfig {
        channel_id: channel_id?,
        protocol: ChannelProtocol(protocol?),
        transport: transport?,
        // Without them the file is refused (their problems are reported), but
        // the channel's tags are still shown to its codec.
        host: host.unwrap_or_default(),
        port: port.unwrap_or_default(),
        serial,
        connect_timeout_ms,
        read_timeout_ms,
        heartbeat_ms,
        byte_order,
        shared_connection,
        settings,
        options,
        tags: tag_lists.share(tags),
        tag_positions: tag_positions.into_boxed_slice(),
        pos: node.pos,
        push: None,
    })
}

/// Reads an MQTT channel (`protocol: mqtt`) after its `channelId`: its
/// tags are not polled (`periodMs` has no place), and it has no link.
fn read_push(
    node: &Node,
    mut f: Fields<'_>,
    channel_id: String,
    context: &ChannelContext<'_>,
    tag_keys: &mut Unique,
    tag_lists: &mut SharedLists<TagConfig>,
    errors: &mut Diagnostics,
) -> Option<ChannelConfig> {
    let items = f.node("tags").map_or(&[][..], |n| list(n, "tags", errors));
    let parts = push_channel::read(f, context, errors);
    let byte_order = parts.as_ref().and_then(|p| p.byte_order);
    let mut tags = Vec::with_capacity(items.len());
    let mut tag_positions = Vec::with_capacity(items.len());
    for item in items {
        let period = item
            .as_map()
            .and_then(|entries| entries.iter().find(|(k, _)| k.name == "periodMs"));
        if let Some((key, _)) = period {
            errors.push(
                key.pos,
                "`periodMs`: an MQTT device's tags are not polled; its messages bring them \
                 (`reportPeriodMs` on the channel says how often)",
            );
            continue;
        }
        if let Some((tag, at)) = tag::read(item, byte_order, tag_keys, errors) {
            tags.push(TagConfig {
                period_ms: 0,
                ..tag
            });
            tag_positions.push(at);
        }
    }
    let parts = parts?;
    Some(ChannelConfig {
        channel_id,
        protocol: parts.protocol,
        transport: Transport::Tcp,
        host: parts.host,
        port: parts.port,
        serial: None,
        connect_timeout_ms: 3000,
        read_timeout_ms: 2000,
        heartbeat_ms: 0,
        byte_order,
        shared_connection: true,
        settings: parts.settings,
        options: parts.options,
        tags: tag_lists.share(tags),
        tag_positions: tag_positions.into_boxed_slice(),
        pos: node.pos,
        push: Some(parts.push),
    })
}

/// The protocol `node` names, among those the gateway speaks.
fn protocol_of(
    node: &Node,
    protocols: &crate::model::Protocols,
) -> Result<Arc<ProtocolInfo>, String> {
    let name = match &node.kind {
        yaml::Kind::Str(name) => name,
        other => {
            return Err(format!(
                "expected a protocol name, found {}",
                other.describe()
            ));
        }
    };
    protocols.get(name).cloned().ok_or_else(|| {
        format!(
            "unknown protocol `{name}`: this gateway speaks {} (built in, or uploaded as codecs)",
            protocols.names()
        )
    })
}

/// How `protocol`'s frames travel on a channel that names a serial port at
/// `serial_port` (or none); `None`, with the error, when it cannot.
fn transport(
    protocol: &ProtocolInfo,
    serial_port: Option<Pos>,
    errors: &mut Diagnostics,
) -> Option<Transport> {
    if let Some(transport) = protocol.transport(serial_port.is_some()) {
        return Some(transport);
    }
    match serial_port {
        // A serial-only protocol: `read_serial` asks for the port.
        None => protocol.transports.first().copied(),
        Some(pos) => {
            errors.push(
                pos,
                format!(
                    "`serialPort`: protocol {} does not run on a serial line; it runs on {}",
                    protocol.name,
                    protocol.transports[0].describe()
                ),
            );
            None
        }
    }
}

/// The serial keys, for a channel that is not on a serial line: each is a mistake.
const SERIAL_KEYS: [&str; 4] = ["baudRate", "parity", "dataBits", "stopBits"];

fn refuse_serial_keys(
    f: &mut Fields<'_>,
    protocol: Option<&ProtocolInfo>,
    errors: &mut Diagnostics,
) {
    let runs = match protocol {
        Some(p) if !p.transports.contains(&Transport::SerialLine) => {
            format!("protocol {} does not run on a serial line", p.name)
        }
        _ => "only a channel on a serial line (`serialPort`) has one".to_owned(),
    };
    for key in SERIAL_KEYS {
        if let Some(node) = f.node(key) {
            errors.push(node.pos, format!("`{key}`: {runs}"));
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

/// The serial port of a channel on a serial line and how it is driven; `host`
/// and `port` have no place there.
fn read_serial(
    f: &mut Fields<'_>,
    protocol: Option<&ProtocolInfo>,
    errors: &mut Diagnostics,
) -> (Option<String>, Option<SerialLine>) {
    for key in ["host", "port"] {
        if let Some(node) = f.node(key) {
            let runs = protocol.map_or_else(
                || "a channel on a serial line".to_owned(),
                |p| format!("protocol {} runs on a serial line", p.name),
            );
            errors.push(
                node.pos,
                format!("`{key}`: {runs}: name the line with `serialPort`"),
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
    protocol: Option<&ProtocolInfo>,
    errors: &mut Diagnostics,
) -> Option<u16> {
    match read_at::<u16>(f, "port", errors) {
        Some((0, pos)) => {
            errors.push(pos, "`port`: must be at least 1, found 0");
            None
        }
        Some((port, _)) => Some(port),
        None if f.node("port").is_some() => None, // present but invalid: already reported
        None => match protocol?.default_port {
            Some(port) => Some(port),
            None => {
                errors.push(
                    f.pos(),
                    format!(
                        "channel: missing required key `port` (protocol {} has no standard port)",
                        protocol?.name
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
            "gw.yaml:8:15: `host`: protocol modbus-rtu runs on a serial line: name the line with `serialPort`",
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
            text.contains(
                "gw.yaml:9:19: `baudRate`: protocol modbus-tcp does not run on a serial line"
            ),
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
        assert_eq!(ch.setting("monitorTimer"), Some(&SettingValue::Int(10)));

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
            text.contains(
                "gw.yaml:7:9: unknown key `hots` in channel: no protocol has such a setting"
            ),
            "{text}"
        );
        assert_eq!(errors.len(), 3, "{text}");
    }
}
