//! The protocols a channel can speak, and their own channel keys: which key belongs
//! to which protocol, what a valid value is, and the default when it is absent.

use crate::model::{Setting, SettingValue};
use crate::yaml::{self, Diagnostics, Fields, Kind, Node, Pos};
use Protocol::{Mc, ModbusRtu, ModbusRtuOverTcp, ModbusTcp, S7};

/// The protocols a channel can speak (`protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// `modbus-tcp`: Modbus over TCP.
    ModbusTcp,
    /// `s7`: Siemens S7 communication (ISO-on-TCP).
    S7,
    /// `mc`: Mitsubishi MELSEC communication protocol (MC protocol).
    Mc,
    /// `modbus-rtu`: Modbus RTU on a serial line (`serialPort`).
    ModbusRtu,
    /// `modbus-rtu-over-tcp`: Modbus RTU frames through a TCP connection (serial
    /// servers and gateways that tunnel RTU).
    ModbusRtuOverTcp,
}

impl Protocol {
    /// Names as the file writes them.
    pub const NAMES: &'static [(&'static str, Protocol)] = &[
        ("modbus-tcp", Protocol::ModbusTcp),
        ("s7", Protocol::S7),
        ("mc", Protocol::Mc),
        ("modbus-rtu", Protocol::ModbusRtu),
        ("modbus-rtu-over-tcp", Protocol::ModbusRtuOverTcp),
    ];

    /// The name as the file writes it: `modbus-tcp`, `s7`, `mc`, `modbus-rtu` or
    /// `modbus-rtu-over-tcp`.
    pub fn name(&self) -> &'static str {
        match self {
            Protocol::ModbusTcp => "modbus-tcp",
            Protocol::S7 => "s7",
            Protocol::Mc => "mc",
            Protocol::ModbusRtu => "modbus-rtu",
            Protocol::ModbusRtuOverTcp => "modbus-rtu-over-tcp",
        }
    }

    /// Whether it carries one request at a time with no transaction id (Modbus
    /// RTU, on a line or tunnelled): a lost or broken answer leaves the line to
    /// fall silent and be drained, not the connection to be dropped.
    pub fn is_line(&self) -> bool {
        matches!(self, Protocol::ModbusRtu | Protocol::ModbusRtuOverTcp)
    }

    /// The codec component that speaks it.
    pub fn codec(&self) -> &'static str {
        match self {
            Protocol::ModbusTcp => "modbus_tcp",
            Protocol::S7 => "s7",
            Protocol::Mc => "mc",
            Protocol::ModbusRtu | Protocol::ModbusRtuOverTcp => "modbus_rtu",
        }
    }

    /// The port used when a channel names none; MC and RTU tunnels have no
    /// standard port (a serial line has none at all).
    pub fn default_port(&self) -> Option<u16> {
        match self {
            Protocol::ModbusTcp => Some(502),
            Protocol::S7 => Some(102),
            Protocol::Mc | Protocol::ModbusRtu | Protocol::ModbusRtuOverTcp => None,
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A protocol-specific channel key.
struct ProtocolKey {
    /// The key as written.
    name: &'static str,
    /// The protocols it belongs to, each with the value used when it is absent.
    protocols: &'static [(Protocol, Fallback)],
    /// What a valid value is.
    value: KeyValue,
}

/// The value of an absent protocol key.
#[derive(Clone, Copy)]
enum Fallback {
    Int(i64),
    Name(&'static str),
    /// The collector's `mergeGap`.
    MergeGap,
    /// No setting at all: the codec chooses.
    Codec,
}

/// What a valid protocol key value is.
enum KeyValue {
    /// An integer in `min..=max`; `why` explains the bounds.
    Int {
        min: i64,
        max: i64,
        why: &'static str,
    },
    /// One of these names.
    Name(&'static [&'static str]),
}

/// Every protocol-specific channel key. A key present for a protocol not listed here
/// is an error naming the protocol.
const PROTOCOL_KEYS: &[ProtocolKey] = &[
    ProtocolKey {
        name: "unitId",
        protocols: &[
            (ModbusTcp, Fallback::Int(1)),
            (ModbusRtu, Fallback::Int(1)),
            (ModbusRtuOverTcp, Fallback::Int(1)),
        ],
        value: KeyValue::Int {
            min: 0,
            max: 255,
            why: "",
        },
    },
    ProtocolKey {
        name: "byteOrder",
        protocols: &[
            (ModbusTcp, Fallback::Name("ABCD")),
            (ModbusRtu, Fallback::Name("ABCD")),
            (ModbusRtuOverTcp, Fallback::Name("ABCD")),
            (S7, Fallback::Name("ABCD")),
            (Mc, Fallback::Codec),
        ],
        value: KeyValue::Name(&["ABCD", "BADC", "CDAB", "DCBA"]),
    },
    ProtocolKey {
        name: "mergeGap",
        protocols: &[
            (ModbusTcp, Fallback::MergeGap),
            (ModbusRtu, Fallback::MergeGap),
            (ModbusRtuOverTcp, Fallback::MergeGap),
        ],
        value: KeyValue::Int {
            min: 0,
            max: u32::MAX as i64,
            why: "",
        },
    },
    ProtocolKey {
        name: "plcType",
        protocols: &[(S7, Fallback::Name("S1200"))],
        value: KeyValue::Name(&[
            "S200",
            "S200_SMART",
            "S300",
            "S400",
            "S1200",
            "S1500",
            "SINUMERIK_828D",
        ]),
    },
    ProtocolKey {
        name: "rack",
        protocols: &[(S7, Fallback::Int(0))],
        value: KeyValue::Int {
            min: 0,
            max: 7,
            why: " (the S7 connection address has 3 bits for the rack)",
        },
    },
    ProtocolKey {
        name: "slot",
        protocols: &[(S7, Fallback::Int(1))],
        value: KeyValue::Int {
            min: 0,
            max: 31,
            why: " (the S7 connection address has 5 bits for the slot)",
        },
    },
    ProtocolKey {
        name: "series",
        protocols: &[(Mc, Fallback::Name("Q_L"))],
        value: KeyValue::Name(&["A", "QnA", "Q_L", "IQ_R"]),
    },
    ProtocolKey {
        name: "frameType",
        protocols: &[(Mc, Fallback::Name("FRAME_3E"))],
        value: KeyValue::Name(&["FRAME_1E", "FRAME_3E", "FRAME_4E"]),
    },
    ProtocolKey {
        name: "monitorTimer",
        protocols: &[(Mc, Fallback::Int(4))],
        value: KeyValue::Int {
            min: 1,
            max: u16::MAX as i64,
            why: " (units of 250 ms; 0 would let the PLC wait forever)",
        },
    },
];

impl ProtocolKey {
    /// The value used for `protocol` when the key is absent; `None` when the key does
    /// not belong to `protocol`.
    fn fallback(&self, protocol: Protocol) -> Option<Fallback> {
        self.protocols
            .iter()
            .find(|(p, _)| *p == protocol)
            .map(|(_, fallback)| *fallback)
    }

    /// The names of the protocols the key belongs to, for messages.
    fn owners(&self) -> String {
        let names: Vec<_> = self.protocols.iter().map(|(p, _)| p.name()).collect();
        names.join(", ")
    }
}

impl KeyValue {
    fn check(&self, node: &Node) -> Result<SettingValue, String> {
        match *self {
            KeyValue::Int { min, max, why } => match node.kind {
                Kind::Int(value) if (min..=max).contains(&value) => Ok(SettingValue::Int(value)),
                Kind::Int(value) => Err(format!(
                    "{value} is out of range: expected {min} to {max}{why}"
                )),
                ref other => Err(format!("expected an integer, found {}", other.describe())),
            },
            KeyValue::Name(names) => {
                let choices: Vec<(&str, &str)> = names.iter().map(|n| (*n, *n)).collect();
                yaml::enum_value(node, &choices).map(|name| SettingValue::Text(name.to_owned()))
            }
        }
    }
}

impl Fallback {
    fn value(self, merge_gap: u32) -> Option<SettingValue> {
        match self {
            Fallback::Int(value) => Some(SettingValue::Int(value)),
            Fallback::Name(name) => Some(SettingValue::Text(name.to_owned())),
            Fallback::MergeGap => Some(SettingValue::Int(i64::from(merge_gap))),
            Fallback::Codec => None,
        }
    }
}

/// Checks the protocol-specific keys of the channel mapping `node` and returns them as
/// settings, with the protocol's defaults for those absent. When the protocol is
/// unknown, values are still checked but nothing is said about which keys apply.
pub(super) fn read_settings(
    node: &Node,
    f: &mut Fields<'_>,
    protocol: Option<Protocol>,
    merge_gap: u32,
    errors: &mut Diagnostics,
) -> Vec<Setting> {
    let mut settings = Vec::new();
    for key in PROTOCOL_KEYS {
        let fallback = protocol.map(|p| key.fallback(p));
        let value = match (f.node(key.name), fallback) {
            (Some(_), Some(None)) => {
                let protocol = protocol.map_or("", |p| p.name());
                errors.push(
                    key_pos(node, key.name),
                    format!(
                        "`{}` does not apply to protocol {protocol}; it is a setting of {}",
                        key.name,
                        key.owners()
                    ),
                );
                None
            }
            (Some(value), _) => match key.value.check(value) {
                Ok(value) => Some(value),
                Err(message) => {
                    errors.push(value.pos, format!("`{}`: {message}", key.name));
                    None
                }
            },
            (None, Some(Some(fallback))) => fallback.value(merge_gap),
            (None, _) => None,
        };
        if let Some(value) = value {
            settings.push(Setting {
                key: key.name.to_owned(),
                value,
            });
        }
    }
    settings
}

/// Where `key` is written in the mapping `node` (the mapping's own position if absent).
fn key_pos(node: &Node, key: &str) -> Pos {
    node.as_map()
        .and_then(|entries| entries.iter().find(|(k, _)| k.name == key))
        .map_or(node.pos, |(k, _)| k.pos)
}

#[cfg(test)]
mod tests {
    use super::super::channel::tests::doc;
    use super::super::tests::errors_of;

    #[test]
    fn foreign_protocol_keys_are_errors_at_the_key() {
        let errors = errors_of(&doc(
            "        protocol: modbus-tcp\n        host: plc1\n        rack: 0\n        series: A\n",
        ));
        assert_eq!(
            errors.to_string(),
            "gw.yaml:9:9: `rack` does not apply to protocol modbus-tcp; it is a setting of s7\n\
             gw.yaml:10:9: `series` does not apply to protocol modbus-tcp; it is a setting of mc"
        );
        let errors = errors_of(&doc(
            "        protocol: s7\n        host: plc1\n        unitId: 3\n",
        ));
        assert!(
            errors
                .to_string()
                .contains("`unitId` does not apply to protocol s7"),
            "{errors}"
        );
    }

    #[test]
    fn bad_protocol_values() {
        let errors = errors_of(&doc(
            "        protocol: s7\n        host: plc1\n        plcType: S7_1200\n        rack: 8\n        slot: x\n        byteOrder: ABDC\n        port: 0\n",
        ));
        let text = errors.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert!(
            lines[0]
                .starts_with("gw.yaml:9:18: `plcType`: unknown value `S7_1200`: expected S200 |")
        );
        assert_eq!(
            lines[1],
            "gw.yaml:10:15: `rack`: 8 is out of range: expected 0 to 7 (the S7 connection address has 3 bits for the rack)"
        );
        assert_eq!(
            lines[2],
            "gw.yaml:11:15: `slot`: expected an integer, found a string"
        );
        assert!(lines[3].starts_with("gw.yaml:12:20: `byteOrder`: unknown value `ABDC`"));
        assert_eq!(
            lines[4],
            "gw.yaml:13:15: `port`: must be at least 1, found 0"
        );

        let errors = errors_of(&doc(
            "        protocol: mc\n        host: plc1\n        port: 1\n        monitorTimer: 0\n",
        ));
        assert!(
            errors
                .to_string()
                .contains("0 would let the PLC wait forever"),
            "{errors}"
        );
        let errors = errors_of(&doc(
            "        protocol: modbus-tcp\n        host: plc1\n        unitId: 256\n",
        ));
        assert!(
            errors
                .to_string()
                .contains("`unitId`: 256 is out of range: expected 0 to 255"),
            "{errors}"
        );
    }

    #[test]
    fn unknown_protocol_checks_values_but_not_ownership() {
        let errors = errors_of(&doc(
            "        protocol: opcua\n        host: plc1\n        rack: 1\n",
        ));
        assert_eq!(
            errors.to_string(),
            "gw.yaml:7:19: `protocol`: unknown value `opcua`: expected modbus-tcp | s7 | mc | modbus-rtu | modbus-rtu-over-tcp"
        );
    }
}
