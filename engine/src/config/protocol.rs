//! A channel's protocol settings, checked against what the protocol's codec
//! declares (its keys, their types and defaults): a protocol uploaded as a
//! codec is checked exactly as a built-in one. The engine's own channel keys
//! (`host`, `port`, the serial line's, timeouts) are read by `channel`; every
//! other key of a channel is kept here with where it is written, so a new
//! version of the codec can check it again.

use std::fmt;
use std::sync::Arc;

use crate::model::{ByteOrder, ProtocolInfo, Protocols, Setting, SettingValue};
use crate::yaml::{Diagnostics, Key, Kind, Node, Pos};

/// A channel key the engine does not own, as written.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelOption {
    pub key: String,
    /// The value, or what was written instead of one (a list, a mapping).
    pub value: Result<SettingValue, &'static str>,
    pub key_pos: Pos,
    pub value_pos: Pos,
}

/// Every channel key `entries` holds that the engine does not own.
pub(super) fn options(entries: Vec<&(Key, Node)>) -> Vec<ChannelOption> {
    entries
        .into_iter()
        .map(|(key, node)| ChannelOption {
            key: key.name.clone(),
            value: match &node.kind {
                Kind::Bool(v) => Ok(SettingValue::Bool(*v)),
                Kind::Int(v) => Ok(SettingValue::Int(*v)),
                Kind::Float(v) => Ok(SettingValue::Float(*v)),
                Kind::Str(v) => Ok(SettingValue::Text(v.clone())),
                other => Err(other.describe()),
            },
            key_pos: key.pos,
            value_pos: node.pos,
        })
        .collect()
}

/// Refuses, in a channel naming no protocol, each key that no protocol declares.
pub(super) fn refuse_undeclared(
    options: &[ChannelOption],
    protocols: &Protocols,
    errors: &mut Diagnostics,
) {
    for option in options {
        if protocols.declaring(&option.key).is_empty() {
            errors.push(
                option.key_pos,
                format!(
                    "unknown key `{}` in channel: no protocol has such a setting",
                    option.key
                ),
            );
        }
    }
}

/// The settings `protocol`'s codec gets from a channel with `options`: each
/// declared setting, as written or its default (a `mergeGap` without one the
/// collector's), in the order the protocol declares them. Every key it does
/// not declare, and every value not of its type, is an error at its position.
pub(super) fn bind(
    protocol: &ProtocolInfo,
    options: &[ChannelOption],
    context: &ChannelContext<'_>,
    errors: &mut Diagnostics,
) -> Vec<Setting> {
    for option in options {
        if protocol.setting(&option.key).is_some() {
            continue;
        }
        let owners = context.protocols.declaring(&option.key);
        let message = if owners.is_empty() {
            let declared: Vec<&str> = protocol.settings.iter().map(|s| s.name.as_str()).collect();
            format!(
                "unknown key `{}` in channel; protocol {} has the settings: {}",
                option.key,
                protocol.name,
                if declared.is_empty() {
                    "none".to_owned()
                } else {
                    declared.join(", ")
                }
            )
        } else {
            format!(
                "`{}` does not apply to protocol {}; it is a setting of {}",
                option.key,
                protocol.name,
                owners.join(", ")
            )
        };
        errors.push(option.key_pos, message);
    }
    let mut settings = Vec::new();
    for declared in &protocol.settings {
        let written = options.iter().find(|o| o.key == declared.name);
        let value = match written {
            Some(option) => {
                let checked = option
                    .value
                    .as_ref()
                    .map_err(|found| format!("expected a value, found {found}"))
                    .and_then(|value| declared.kind.admit(value).map(|()| value.clone()));
                match checked {
                    Ok(value) => Some(value),
                    Err(problem) => {
                        errors.push(
                            option.value_pos,
                            format!("`{}`: {problem} ({})", declared.name, declared.help),
                        );
                        None
                    }
                }
            }
            None if declared.default.is_none() && declared.name == "mergeGap" => {
                Some(SettingValue::Int(i64::from(context.merge_gap)))
            }
            None => declared.default.clone(),
        };
        if let Some(value) = value {
            settings.push(Setting {
                key: declared.name.clone(),
                value,
            });
        }
    }
    settings
}

/// The settings a channel of `protocol` writing the mapping `node` gives its
/// codec, checked as a gateway checks them (with the collector's default
/// `mergeGap`): for checking a codec without a gateway (`sluice test`).
pub fn channel_settings(
    protocol: &Arc<ProtocolInfo>,
    node: Option<&Node>,
    errors: &mut Diagnostics,
) -> Vec<Setting> {
    let entries: Vec<&(Key, Node)> = match node.map(|n| (n, &n.kind)) {
        Some((_, Kind::Map(entries))) => entries.iter().collect(),
        Some((_, Kind::Null)) | None => Vec::new(),
        Some((node, other)) => {
            errors.push(
                node.pos,
                format!("settings: expected a mapping, found {}", other.describe()),
            );
            Vec::new()
        }
    };
    let mut protocols = Protocols::default();
    // One protocol cannot clash with itself.
    let _ = protocols.add(std::slice::from_ref(protocol));
    let context = ChannelContext {
        merge_gap: super::CollectorConfig::default().merge_gap,
        protocols: &protocols,
        base: None,
    };
    bind(protocol, &options(entries), &context, errors)
}

/// The byte order `settings` give a channel's tags (`byteOrder`), if any.
pub(super) fn byte_order(settings: &[Setting]) -> Option<ByteOrder> {
    settings
        .iter()
        .find(|s| s.key == "byteOrder")
        .and_then(|s| match &s.value {
            SettingValue::Text(name) => ByteOrder::NAMES
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, order)| *order),
            _ => None,
        })
}

/// What reading a channel needs beyond the channel itself.
#[derive(Debug, Clone, Copy)]
pub(super) struct ChannelContext<'a> {
    /// The collector's `mergeGap`.
    pub merge_gap: u32,
    /// The protocols a channel may name.
    pub protocols: &'a Protocols,
    /// Where secrets named by a file are read from (the configuration file's
    /// directory); none for a pushed configuration, which may name no file.
    pub base: Option<&'a std::path::Path>,
}

/// A channel's protocol: its name as the file writes it, and what its codec declares.
#[derive(Clone, PartialEq)]
pub struct ChannelProtocol(pub Arc<ProtocolInfo>);

impl ChannelProtocol {
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The codec component that speaks it.
    pub fn codec(&self) -> &str {
        &self.0.codec
    }
}

impl fmt::Display for ChannelProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The name in upper camel case (`ModbusTcp`): how configurations digested by
/// earlier versions showed it, so their fingerprints still match.
impl fmt::Debug for ChannelProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for word in self.name().split('-') {
            let mut chars = word.chars();
            if let Some(first) = chars.next() {
                write!(f, "{}{}", first.to_ascii_uppercase(), chars.as_str())?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::channel::tests::doc;
    use super::super::tests::{errors_of, load_ok};

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
            errors.to_string().contains(
                "`unitId` does not apply to protocol s7; it is a setting of modbus-rtu, modbus-rtu-over-tcp, modbus-tcp"
            ),
            "{errors}"
        );
        let errors = errors_of(&doc(
            "        protocol: s7\n        host: plc1\n        rak: 3\n",
        ));
        assert_eq!(
            errors.to_string(),
            "gw.yaml:9:9: unknown key `rak` in channel; protocol s7 has the settings: plcType, rack, slot, byteOrder"
        );
    }

    #[test]
    fn bad_protocol_values_are_errors_at_the_value_with_the_codecs_words() {
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
            "gw.yaml:10:15: `rack`: 8 is out of range: expected 0 to 7 (the CPU's rack: 3 bits of the S7 connection address)"
        );
        assert_eq!(
            lines[2],
            "gw.yaml:11:15: `slot`: expected an integer, found a string (the CPU's slot: 5 bits of the S7 connection address)"
        );
        assert!(lines[3].starts_with("gw.yaml:12:20: `byteOrder`: unknown value `ABDC`"));
        assert_eq!(
            lines[4],
            "gw.yaml:13:15: `port`: must be at least 1, found 0"
        );

        let errors = errors_of(&doc(
            "        protocol: mc\n        host: plc1\n        port: 1\n        monitorTimer: 0\n        series: [A]\n",
        ));
        let text = errors.to_string();
        assert!(text.contains("0 would let it wait forever"), "{text}");
        assert!(
            text.contains("gw.yaml:11:17: `series`: expected a value, found a list"),
            "{text}"
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
    fn an_unknown_protocol_names_those_there_are_and_leaves_its_keys_alone() {
        let errors = errors_of(&doc(
            "        protocol: opcua\n        host: plc1\n        rack: 1\n",
        ));
        assert_eq!(
            errors.to_string(),
            "gw.yaml:7:19: `protocol`: unknown protocol `opcua`: this gateway speaks mc | modbus-rtu | modbus-rtu-over-tcp | modbus-tcp | s7 (built in, or uploaded as codecs)"
        );
    }

    #[test]
    fn declared_settings_get_their_defaults_and_the_collectors_merge_gap() {
        let config = load_ok(&format!(
            "collector: {{ mergeGap: 4 }}\n{}",
            doc("        protocol: modbus-tcp\n        host: plc1\n        maxRegisters: 60\n")
        ));
        let channel = &config.devices[0].channels[0];
        let settings: Vec<String> = channel
            .settings
            .iter()
            .map(|s| format!("{}={}", s.key, s.value))
            .collect();
        assert_eq!(
            settings,
            [
                "unitId=1",
                "byteOrder=ABCD",
                "mergeGap=4",
                "maxRegisters=60"
            ]
        );
        assert_eq!(format!("{:?}", channel.protocol), "ModbusTcp");
    }
}
