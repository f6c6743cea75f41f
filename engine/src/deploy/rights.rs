//! What a push may change (CMD-P5 of `docs/commands.md`, SEC-5 of `docs/security.md`). The operator (the admin
//! token, the operator's signing key) may push anything the file could say. A
//! tenant (its token or key), and an unsigned push from a trusted broker, may
//! only tune what the operator allowed: never create a device, add a channel
//! or a tag, make a tag writable, widen what a write may set, or change where
//! a tag lives; a channel moves only inside its tenant's fence. Each refusal is
//! a problem at the JSON path of the field.

use crate::config::{ChannelConfig, DeviceConfig, TagConfig};
use crate::model::{Access, SettingValue};
use crate::mqtt::PushProblem;

/// What a push may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushRights {
    /// Anything: the operator's.
    Operator,
    /// Only what a tenant may tune, inside its fence.
    Limited,
}

/// The settings that say where a channel reaches; every other one is the
/// operator's to change.
const ENDPOINT_SETTINGS: [&str; 1] = ["unitId"];

/// Why a limited push may not create a device.
pub(super) fn creation_refused() -> PushProblem {
    PushProblem::new(
        "$.deviceId",
        "only the operator creates a device (the admin token, or the operator's key)",
    )
}

/// The changes from `before` to `after` a limited push may not make. `fenced`:
/// the device's tenant has a fence (a channel may then move inside it).
pub(super) fn widenings(
    before: &DeviceConfig,
    after: &DeviceConfig,
    fenced: bool,
) -> Vec<PushProblem> {
    let mut problems = Vec::new();
    for (i, channel) in after.channels.iter().enumerate() {
        let at = format!("$.channels[{i}]");
        let Some(old) = before
            .channels
            .iter()
            .find(|c| c.channel_id == channel.channel_id)
        else {
            problems.push(PushProblem::new(
                &format!("{at}.channelId"),
                format!(
                    "only the operator adds a channel (`{}` is new)",
                    channel.channel_id
                ),
            ));
            continue;
        };
        channel_widenings(old, channel, &at, fenced, &mut problems);
        for (j, tag) in channel.tags.iter().enumerate() {
            let at = format!("{at}.tags[{j}]");
            match old.tags.iter().find(|t| t.spec.key == tag.spec.key) {
                Some(old_tag) => tag_widenings(old_tag, tag, &at, &mut problems),
                None => problems.push(PushProblem::new(
                    &format!("{at}.key"),
                    format!(
                        "only the operator adds a tag (`{}` is new here)",
                        tag.spec.key
                    ),
                )),
            }
        }
    }
    problems
}

fn channel_widenings(
    old: &ChannelConfig,
    new: &ChannelConfig,
    at: &str,
    fenced: bool,
    problems: &mut Vec<PushProblem>,
) {
    if new.protocol.name() != old.protocol.name() {
        problems.push(PushProblem::new(
            &format!("{at}.protocol"),
            "only the operator changes a channel's protocol",
        ));
    }
    let moved = new.host != old.host
        || new.port != old.port
        || new.serial != old.serial
        || endpoint_settings(new) != endpoint_settings(old);
    if moved && !fenced {
        problems.push(PushProblem::new(
            at,
            "only the operator moves a channel (host, port, serial line, unit id): the \
             tenant has no fence to move it within",
        ));
    }
    let changed: Vec<&str> = other_settings(new)
        .chain(other_settings(old))
        .map(|(key, _)| key)
        .filter(|key| new.setting(key) != old.setting(key))
        .collect();
    if let Some(key) = changed.first() {
        problems.push(PushProblem::new(
            &format!("{at}.{key}"),
            format!("only the operator changes `{key}` of a channel"),
        ));
    }
}

fn endpoint_settings(channel: &ChannelConfig) -> Vec<Option<&SettingValue>> {
    ENDPOINT_SETTINGS
        .iter()
        .map(|key| channel.setting(key))
        .collect()
}

fn other_settings(channel: &ChannelConfig) -> impl Iterator<Item = (&str, &SettingValue)> {
    channel
        .settings
        .iter()
        .filter(|s| !ENDPOINT_SETTINGS.contains(&s.key.as_str()))
        .map(|s| (s.key.as_str(), &s.value))
}

fn writable(access: Access) -> bool {
    access != Access::Read
}

fn tag_widenings(old: &TagConfig, new: &TagConfig, at: &str, problems: &mut Vec<PushProblem>) {
    let (o, n) = (&old.spec, &new.spec);
    let mut refuse = |field: &str, what: &str| {
        problems.push(PushProblem::new(
            &format!("{at}.{field}"),
            format!("only the operator {what}"),
        ));
    };
    if n.address != o.address || n.settings != o.settings {
        refuse("address", "changes where a tag lives");
    }
    if n.data_type != o.data_type || n.length != o.length {
        refuse("dataType", "changes a tag's data type");
    }
    if !writable(n.access) {
        return;
    }
    if !writable(o.access) {
        refuse("access", "makes a tag writable");
        return;
    }
    // What a write sets on the device follows from these.
    if n.factor != o.factor || n.offset != o.offset {
        refuse("factor", "changes how a writable tag's values are scaled");
    }
    if n.byte_order != o.byte_order {
        refuse(
            "byteOrder",
            "changes how a writable tag's values are laid out",
        );
    }
    let below = |new: Option<f64>, old: Option<f64>| match (new, old) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(new), Some(old)) => new < old,
    };
    if below(new.min, old.min) {
        refuse("min", "lowers the smallest value a write may set");
    }
    if below(new.max.map(|v| -v), old.max.map(|v| -v)) {
        refuse("max", "raises the largest value a write may set");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::load_str;

    fn device(channel: &str, tags: &str) -> DeviceConfig {
        let text = format!(
            "devices:\n  - deviceId: d\n    productId: P\n    deviceNum: D\n    channels:\n      - channelId: main\n        protocol: modbus-tcp\n{channel}        tags:\n{tags}"
        );
        load_str("t.yaml", &text).expect("valid").devices.remove(0)
    }

    const HOST: &str = "        host: 10.0.1.5\n        unitId: 1\n";
    const TAGS: &str = "          - { key: temp, address: '40001', dataType: INT16, factor: 0.1 }\n          - { key: sp, address: '40002', dataType: INT16, access: RW, min: 0, max: 100 }\n";

    fn paths(problems: &[PushProblem]) -> Vec<&str> {
        problems.iter().map(|p| p.path.as_str()).collect()
    }

    #[test]
    fn tuning_is_allowed_and_narrowing_too() {
        let before = device(HOST, TAGS);
        let after = device(
            &format!("{HOST}        readTimeoutMs: 500\n"),
            "          - { key: temp, address: '40001', dataType: INT16, factor: 0.01, periodMs: 200, deadband: 1 }\n          - { key: sp, address: '40002', dataType: INT16, access: RW, min: 10, max: 90, readback: true }\n",
        );
        assert_eq!(
            paths(&widenings(&before, &after, false)),
            Vec::<&str>::new()
        );
        let read_only = device(
            HOST,
            "          - { key: sp, address: '40002', dataType: INT16 }\n",
        );
        assert!(
            widenings(&before, &read_only, false).is_empty(),
            "a tag removed, one made read-only"
        );
    }

    #[test]
    fn widening_is_refused_at_the_field() {
        let before = device(HOST, TAGS);
        let after = device(
            "        host: 10.0.1.6\n        unitId: 1\n        byteOrder: CDAB\n",
            "          - { key: temp, address: '40001', dataType: INT16, factor: 0.1, access: RW }\n          - { key: sp, address: '40003', dataType: INT32, access: RW, factor: 2, max: 1000 }\n          - { key: new, address: '40009', dataType: INT16 }\n",
        );
        assert_eq!(
            paths(&widenings(&before, &after, false)),
            [
                "$.channels[0]",
                "$.channels[0].byteOrder",
                "$.channels[0].tags[0].access",
                "$.channels[0].tags[1].address",
                "$.channels[0].tags[1].dataType",
                "$.channels[0].tags[1].factor",
                "$.channels[0].tags[1].byteOrder",
                "$.channels[0].tags[1].min",
                "$.channels[0].tags[1].max",
                "$.channels[0].tags[2].key",
            ]
        );
        // Inside a fence a channel may move; the rest stays refused.
        let moved = device("        host: 10.0.1.6\n        unitId: 2\n", TAGS);
        assert!(widenings(&before, &moved, true).is_empty());
        assert_eq!(paths(&widenings(&before, &moved, false)), ["$.channels[0]"]);
    }
}
