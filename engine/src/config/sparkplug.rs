//! `collector.mqtt.payload` and `collector.mqtt.sparkplug`: the uplink's payload
//! format and the edge node's ids.

use super::read::{choice, read_at, required_text};
use crate::yaml::{Diagnostics, Fields};

/// How samples, births and deaths are written on the uplink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UplinkPayload {
    /// The engine's own JSON topics (`property/post`, `status/post`, ...).
    Json,
    /// Eclipse Sparkplug B: protobuf payloads under `spBv1.0/`.
    SparkplugB(SparkplugConfig),
}

/// `collector.mqtt.sparkplug`: who the engine is in the Sparkplug namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SparkplugConfig {
    /// `groupId`: the Sparkplug group the edge node belongs to.
    pub group_id: String,
    /// `edgeNodeId`: the edge node's id within its group. Engines sharing a
    /// database append their node id, like the client id.
    pub edge_node_id: String,
    /// `int16AsInt32` (default false): publish `INT16` tags as Int32 metrics.
    /// Negative Int8/Int16 values are sign-extended to 32 bits, as Eclipse
    /// Tahu writes and reads them; hosts that take only the width-sized form
    /// (`pysparkplug` 0.6) read an Int32 alike.
    pub int16_as_int32: bool,
}

impl UplinkPayload {
    /// Whether `INT16` tags are published as Int32 (Sparkplug B's
    /// `int16AsInt32`).
    pub fn int16_as_int32(&self) -> bool {
        matches!(self, Self::SparkplugB(spb) if spb.int16_as_int32)
    }
}

/// The choices of `payload`; `sparkplug-b` needs its block, so it is read apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PayloadName {
    Json,
    SparkplugB,
}

const PAYLOAD_NAMES: &[(&str, PayloadName)] = &[
    ("json", PayloadName::Json),
    ("sparkplug-b", PayloadName::SparkplugB),
];

/// Reads `payload` and, for Sparkplug B, the `sparkplug` block it needs.
pub(super) fn read_payload(f: &mut Fields<'_>, errors: &mut Diagnostics) -> UplinkPayload {
    let name = choice(f, "payload", PAYLOAD_NAMES, PayloadName::Json, errors);
    let block = f.node("sparkplug");
    match (name, block) {
        (PayloadName::Json, None) => UplinkPayload::Json,
        (PayloadName::Json, Some(node)) => {
            errors.push(
                node.pos,
                "`sparkplug`: only read with `payload: sparkplug-b`; set it or remove the block",
            );
            UplinkPayload::Json
        }
        (PayloadName::SparkplugB, None) => {
            errors.push(
                f.pos(),
                "`payload: sparkplug-b` needs a `sparkplug` block with `groupId` and `edgeNodeId`",
            );
            UplinkPayload::Json
        }
        (PayloadName::SparkplugB, Some(node)) => {
            let Some(mut block) = Fields::of(node, "collector.mqtt.sparkplug", errors) else {
                return UplinkPayload::Json;
            };
            let group_id = sparkplug_id(&mut block, "groupId", errors);
            let edge_node_id = sparkplug_id(&mut block, "edgeNodeId", errors);
            let int16_as_int32 =
                read_at::<bool>(&mut block, "int16AsInt32", errors).is_some_and(|(v, _)| v);
            block.finish(errors);
            match (group_id, edge_node_id) {
                (Some(group_id), Some(edge_node_id)) => {
                    UplinkPayload::SparkplugB(SparkplugConfig {
                        group_id,
                        edge_node_id,
                        int16_as_int32,
                    })
                }
                _ => UplinkPayload::Json,
            }
        }
    }
}

/// A required Sparkplug id: one topic level, so not empty and without `/`, `+`, `#`.
fn sparkplug_id(f: &mut Fields<'_>, key: &'static str, errors: &mut Diagnostics) -> Option<String> {
    let (id, pos) = required_text(f, key, errors)?;
    match sparkplug_id_problem(&id) {
        Some(problem) => {
            errors.push(pos, format!("`{key}`: {problem}"));
            None
        }
        None => Some(id),
    }
}

/// Why `id` cannot be a Sparkplug topic level (group, edge node or device id).
pub(super) fn sparkplug_id_problem(id: &str) -> Option<&'static str> {
    if id.trim().is_empty() {
        Some("must not be empty")
    } else if id.contains(['/', '+', '#']) {
        Some("a Sparkplug id is one topic level: it must not contain `/`, `+` or `#`")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{errors_of, load_ok};
    use super::*;

    const DEVICE: &str = "devices:
  - deviceId: DEVICE
    productId: P
    deviceNum: M1
    channels:
      - { channelId: c, protocol: modbus-tcp, host: 127.0.0.1, port: 502, tags: [{ key: t, address: '40001', dataType: UINT16 }] }
";

    #[test]
    fn sparkplug_b_is_read_with_its_ids() {
        let c = load_ok(
            "collector:\n  mqtt:\n    payload: sparkplug-b\n    sparkplug: { groupId: plant, edgeNodeId: edge-1 }\n",
        );
        assert_eq!(
            c.collector.mqtt.payload,
            UplinkPayload::SparkplugB(SparkplugConfig {
                group_id: "plant".into(),
                edge_node_id: "edge-1".into(),
                int16_as_int32: false,
            })
        );
        let widened = load_ok(
            "collector:\n  mqtt:\n    payload: sparkplug-b\n    sparkplug: { groupId: plant, edgeNodeId: edge-1, int16AsInt32: true }\n",
        );
        assert!(matches!(
            widened.collector.mqtt.payload,
            UplinkPayload::SparkplugB(SparkplugConfig {
                int16_as_int32: true,
                ..
            })
        ));
        assert_eq!(
            load_ok("collector:\n  mqtt: {}\n").collector.mqtt.payload,
            UplinkPayload::Json
        );
    }

    #[test]
    fn sparkplug_mistakes_are_named() {
        let errors = errors_of("collector:\n  mqtt:\n    payload: sparkplug-b\n");
        assert!(
            errors.to_string().contains("needs a `sparkplug` block"),
            "{errors}"
        );
        let errors =
            errors_of("collector:\n  mqtt:\n    sparkplug: { groupId: g, edgeNodeId: e }\n");
        assert!(
            errors
                .to_string()
                .contains("only read with `payload: sparkplug-b`"),
            "{errors}"
        );
        let errors = errors_of(
            "collector:\n  mqtt:\n    payload: sparkplug-b\n    sparkplug: { groupId: a/b, edgeNodeId: '#' }\n",
        );
        let text = errors.to_string();
        assert!(
            text.contains("`groupId`: a Sparkplug id is one topic level"),
            "{text}"
        );
        assert!(
            text.contains("`edgeNodeId`: a Sparkplug id is one topic level"),
            "{text}"
        );
        let errors = errors_of(
            "collector:\n  mqtt:\n    payload: sparkplug-b\n    sparkplug: { groupId: g }\n",
        );
        assert!(
            errors
                .to_string()
                .contains("missing required key `edgeNodeId`"),
            "{errors}"
        );
        let errors = errors_of("collector:\n  mqtt:\n    payload: protobuf\n");
        assert!(errors.to_string().contains("`payload`"), "{errors}");
    }

    #[test]
    fn a_device_id_must_be_a_topic_level_with_sparkplug_only() {
        let sparkplug = "collector:\n  mqtt:\n    payload: sparkplug-b\n    sparkplug: { groupId: g, edgeNodeId: e }\n";
        let devices = DEVICE.replace("DEVICE", "line+1");
        let errors = errors_of(&format!("{sparkplug}{devices}"));
        assert!(
            errors
                .to_string()
                .contains("`deviceId`: `line+1` is the Sparkplug device id"),
            "{errors}"
        );
        load_ok(&devices);
    }
}
