//! A tenant's `fence` (SEC-6 of `docs/security.md`): the endpoints its devices
//! may reach. Every channel of
//! every device of a fenced tenant, whether from the file, an HTTP push or an
//! MQTT push, must fit one entry; the config compiler refuses one that does
//! not, so the gateway never becomes a tenant's way into the rest of the plant
//! network. A tenant without `fence` keeps its devices where the operator's
//! file puts them: its pushes may not move them (`docs/security.md`).
//!
//! ```yaml
//! tenants:
//!   - tenantId: 1
//!     name: plant-a
//!     fence:
//!       - { host: 10.0.1.0/24, ports: 502 }               # a network
//!       - { host: plc-7.plant.local, ports: 500-510, unitIds: 1-10 }
//!       - { serialPort: /dev/ttyUSB0, unitIds: 1-5 }
//! ```
//!
//! A host name matches only the same name (never what it resolves to: names
//! can be made to resolve anywhere); an address matches an entry that is it or
//! a network holding it.

use std::net::IpAddr;
use std::ops::RangeInclusive;

use ipnet::IpNet;

use super::ChannelConfig;
use super::read::{list, required_text, text_at};
use crate::model::SettingValue;
use crate::yaml::{Diagnostics, Fields, Kind, Node, Pos};

/// One entry of a `fence`.
#[derive(Debug, Clone, PartialEq)]
pub struct FenceEntry {
    pub target: FenceTarget,
    /// `unitIds`: the unit ids a channel may address there (default all).
    pub unit_ids: Option<(i64, i64)>,
}

/// What a fence entry lets devices reach.
#[derive(Debug, Clone, PartialEq)]
pub enum FenceTarget {
    /// `host` (an address, a network, or a name) and `ports` (a port or a range).
    Host { host: FenceHost, ports: (u16, u16) },
    /// `serialPort`: a serial line.
    Serial(String),
}

/// The `host` of a fence entry.
#[derive(Debug, Clone, PartialEq)]
pub enum FenceHost {
    Network(IpNet),
    Name(String),
}

/// Why a channel is outside a fence.
pub fn outside(fence: &[FenceEntry], channel: &ChannelConfig) -> Option<String> {
    if fence.iter().any(|entry| entry.admits(channel)) {
        return None;
    }
    let unit = unit_id(channel)
        .map(|u| format!(" unit {u}"))
        .unwrap_or_default();
    Some(if channel.serial.is_some() {
        format!("serial port {}{unit}", channel.host)
    } else {
        format!("{}:{}{unit}", channel.host, channel.port)
    })
}

impl FenceEntry {
    fn admits(&self, channel: &ChannelConfig) -> bool {
        let place = match &self.target {
            FenceTarget::Serial(port) => channel.serial.is_some() && channel.host == *port,
            FenceTarget::Host { host, ports } => {
                channel.serial.is_none()
                    && (ports.0..=ports.1).contains(&channel.port)
                    && host.admits(&channel.host)
            }
        };
        let unit = match (self.unit_ids, unit_id(channel)) {
            (Some((low, high)), Some(unit)) => (low..=high).contains(&unit),
            _ => true,
        };
        place && unit
    }
}

impl FenceHost {
    fn admits(&self, host: &str) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        match self {
            FenceHost::Network(net) => host.parse::<IpAddr>().is_ok_and(|ip| net.contains(&ip)),
            FenceHost::Name(name) => name.eq_ignore_ascii_case(host),
        }
    }
}

/// The unit id a channel addresses, if its protocol has one.
fn unit_id(channel: &ChannelConfig) -> Option<i64> {
    match channel.setting("unitId") {
        Some(SettingValue::Int(unit)) => Some(*unit),
        _ => None,
    }
}

/// Reads a tenant's `fence`.
pub(super) fn read(node: &Node, errors: &mut Diagnostics) -> Vec<FenceEntry> {
    let mut entries = Vec::new();
    for item in list(node, "fence", errors) {
        let Some(mut f) = Fields::of(item, "fence entry", errors) else {
            continue;
        };
        let host = text_at(&mut f, "host", errors);
        let serial = text_at(&mut f, "serialPort", errors);
        let ports = f.node("ports").map(|n| (range_of(n, 1..=65_535), n.pos));
        let unit_ids = f
            .node("unitIds")
            .and_then(|n| report(range_of(n, 0..=255), n.pos, "unitIds", errors));
        let target = match (host, serial) {
            (Some((host, pos)), None) => {
                let ports = match ports {
                    Some((ports, at)) => report(ports, at, "ports", errors),
                    None => {
                        errors.push(pos, "a fence entry with `host` needs `ports` (a port or a range, e.g. 502 or 500-510)");
                        None
                    }
                };
                let host = report(host_of(&host), pos, "host", errors);
                host.zip(ports).map(|(host, ports)| FenceTarget::Host {
                    host,
                    ports: (ports.0 as u16, ports.1 as u16),
                })
            }
            (None, Some((port, _))) => {
                if let Some((_, at)) = ports {
                    errors.push(at, "`ports`: a serial line has no ports");
                }
                Some(FenceTarget::Serial(port))
            }
            (Some(_), Some((_, pos))) => {
                errors.push(
                    pos,
                    "a fence entry names a `host` or a `serialPort`, not both",
                );
                None
            }
            (None, None) => {
                let _ = required_text(&mut f, "host", errors);
                None
            }
        };
        f.finish(errors);
        if let Some(target) = target {
            entries.push(FenceEntry { target, unit_ids });
        }
    }
    entries
}

fn report<T>(value: Result<T, String>, pos: Pos, key: &str, errors: &mut Diagnostics) -> Option<T> {
    value
        .map_err(|message| errors.push(pos, format!("`{key}`: {message}")))
        .ok()
}

/// `10.0.1.0/24`, `10.0.1.5` or a host name.
fn host_of(text: &str) -> Result<FenceHost, String> {
    let bare = text.trim().trim_start_matches('[').trim_end_matches(']');
    if let Ok(net) = bare.parse::<IpNet>() {
        return Ok(FenceHost::Network(net.trunc()));
    }
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(FenceHost::Network(IpNet::from(ip)));
    }
    if bare.contains('/') {
        return Err(format!(
            "`{text}` is not a network (ADDRESS/PREFIX, e.g. 10.0.1.0/24)"
        ));
    }
    if bare.is_empty()
        || !bare
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    {
        return Err(format!(
            "`{text}` is not an address, a network or a host name"
        ));
    }
    Ok(FenceHost::Name(bare.to_owned()))
}

/// A number, or `LOW-HIGH`, within `bounds`.
fn range_of(node: &Node, bounds: RangeInclusive<i64>) -> Result<(i64, i64), String> {
    let (low, high) = match &node.kind {
        Kind::Int(n) => (*n, *n),
        Kind::Str(text) => {
            let (low, high) = text
                .split_once('-')
                .ok_or_else(|| format!("`{text}` is not a number or a range LOW-HIGH"))?;
            let number = |part: &str| {
                part.trim()
                    .parse::<i64>()
                    .map_err(|_| format!("`{text}` is not a number or a range LOW-HIGH"))
            };
            (number(low)?, number(high)?)
        }
        other => {
            return Err(format!(
                "expected a number or a range LOW-HIGH, found {}",
                other.describe()
            ));
        }
    };
    let (min, max) = bounds.into_inner();
    if low > high || low < min || high > max {
        return Err(format!("{low}-{high} is not a range within {min}-{max}"));
    }
    Ok((low, high))
}

#[cfg(test)]
mod tests {
    use crate::config::tests::load_str;

    fn config(fence: &str, channel: &str) -> String {
        format!(
            "tenants:\n  - tenantId: 1\n    name: t\n    fence:\n{fence}devices:\n  - deviceId: d\n    productId: P\n    deviceNum: D\n    tenantId: 1\n    channels:\n      - channelId: main\n{channel}        tags:\n          - {{ key: t, address: '40001', dataType: UINT16 }}\n"
        )
    }

    const FENCE: &str = "      - { host: 10.0.1.0/24, ports: 502 }\n      - { host: PLC-7.plant.local, ports: 500-510, unitIds: 1-10 }\n      - { serialPort: /dev/ttyUSB0, unitIds: 1-5 }\n";

    fn tcp(host: &str, port: u16, unit: u8) -> String {
        format!(
            "        protocol: modbus-tcp\n        host: {host}\n        port: {port}\n        unitId: {unit}\n"
        )
    }

    #[test]
    fn channels_inside_the_fence_pass_and_the_rest_are_refused_at_the_channel() {
        for inside in [
            tcp("10.0.1.77", 502, 1),
            tcp("plc-7.plant.local", 505, 10),
            "        protocol: modbus-rtu\n        serialPort: /dev/ttyUSB0\n        unitId: 5\n"
                .to_owned(),
        ] {
            let text = config(FENCE, &inside);
            assert!(load_str("t.yaml", &text).is_ok(), "{inside}");
        }
        for (outside, said) in [
            (tcp("10.0.2.1", 502, 1), "10.0.2.1:502 unit 1"),
            (tcp("10.0.1.77", 1883, 1), "10.0.1.77:1883"),
            (tcp("plc-7.plant.local", 505, 11), "unit 11"),
            (tcp("plc-8.plant.local", 505, 1), "plc-8.plant.local:505"),
            (
                "        protocol: modbus-rtu\n        serialPort: /dev/ttyUSB1\n        unitId: 1\n".to_owned(),
                "serial port /dev/ttyUSB1",
            ),
        ] {
            let text = config(FENCE, &outside);
            let errors = load_str("t.yaml", &text).expect_err(&outside).to_string();
            assert!(
                errors.contains("t.yaml:14:9:") && errors.contains(said) && errors.contains("fence of tenant 1"),
                "{errors}"
            );
        }
    }

    #[test]
    fn fence_entries_are_checked() {
        let bad = "      - { host: 10.0.1.0/33, ports: 502 }\n      - { host: plc }\n      - { host: a, serialPort: b }\n      - { serialPort: /dev/x, ports: 1 }\n      - { host: x, ports: 9-1 }\n      - { ports: 1 }\n";
        let errors = load_str("t.yaml", &config(bad, &tcp("10.0.1.1", 502, 1)))
            .expect_err("bad fence")
            .to_string();
        for expected in [
            "is not a network",
            "needs `ports`",
            "not both",
            "a serial line has no ports",
            "9-1 is not a range",
            "missing required key `host`",
        ] {
            assert!(errors.contains(expected), "{expected}: {errors}");
        }
    }
}
