//! A channel whose device publishes by itself (`protocol: mqtt`): the broker
//! its messages arrive on, the topic it publishes to (with the device's
//! placeholders), the period it declares, and the decoder that reads them.
//! Every key the engine does not own goes to the decoder as a setting, which
//! the decoder checks when the device is built.

use std::sync::Arc;

use super::network::parse_broker_url;
use super::protocol::{ChannelContext, ChannelOption, ChannelProtocol, options};
use super::read::{ranged, read_at, text_at};
use super::secret_text::secret_at;
use crate::model::{ByteOrder, ProtocolInfo, Secret, Setting, Transport};
use crate::yaml::{self, Diagnostics, Fields};

/// The `protocol` of a channel whose device publishes by itself.
pub const MQTT: &str = "mqtt";
/// The decoder of a channel that names none.
pub const DEFAULT_DECODER: &str = "json";
/// The placeholders a `topic` or `commandTopic` may hold.
const PLACEHOLDERS: [&str; 3] = ["{productId}", "{deviceNum}", "{deviceId}"];

/// What an MQTT channel says beyond its tags.
#[derive(Debug, Clone, PartialEq)]
pub struct PushChannel {
    pub broker: DeviceBroker,
    /// `topic`: where the device publishes, an MQTT topic filter (`+` and `#`
    /// allowed) with the placeholders `{productId}`, `{deviceNum}`, `{deviceId}`.
    pub topic: String,
    /// `commandTopic`: where writes to the device are published, with the same
    /// placeholders (no wildcard); none: the device takes no writes.
    pub command_topic: Option<String>,
    /// `reportPeriodMs`: how often the device says it publishes; its lease is
    /// three periods unless `stateTimeout` says otherwise.
    pub report_period_ms: u64,
    /// `decoder`: the decoder component (`json`, `binary`, or an upload).
    pub decoder: String,
    /// `maxMessagesPerSecond`: what the device may send before its messages
    /// are dropped (and counted), so a flood cannot starve the others.
    pub max_messages_per_second: u32,
}

impl PushChannel {
    /// `template` for one device: its placeholders filled in.
    pub fn resolve(template: &str, product_id: &str, device_num: &str, device_id: &str) -> String {
        template
            .replace("{productId}", product_id)
            .replace("{deviceNum}", device_num)
            .replace("{deviceId}", device_id)
    }
}

/// Which broker an MQTT channel's messages arrive on.
#[derive(Debug, Clone, PartialEq)]
pub enum DeviceBroker {
    /// The uplink's (`collector.mqtt`): its URL, credentials and TLS.
    Uplink,
    /// `broker: URL`, with its own `username` and `password`; over TLS
    /// (`mqtts://`) with the uplink's `tls` settings.
    Own {
        host: String,
        port: u16,
        tls: bool,
        username: Option<String>,
        password: Option<Secret>,
    },
}

/// An MQTT channel as the rest of the configuration sees a channel: its
/// protocol (named `mqtt`, spoken by its decoder), where it reaches (its own
/// broker, or nowhere of a tenant's for the uplink's), its decoder's settings.
pub(super) struct PushParts {
    pub push: PushChannel,
    pub protocol: ChannelProtocol,
    pub host: String,
    pub port: u16,
    pub byte_order: Option<ByteOrder>,
    pub settings: Vec<Setting>,
    pub options: Vec<ChannelOption>,
}

/// Reads the keys of an MQTT channel the engine owns from `f` (its
/// `channelId`, `protocol` and `tags` already read); the rest become the
/// decoder's settings. `None` (with the problems in `errors`) when a
/// required key is missing or wrong.
pub(super) fn read(
    mut f: Fields<'_>,
    context: &ChannelContext<'_>,
    errors: &mut Diagnostics,
) -> Option<PushParts> {
    let keys = read_keys(&mut f, context, errors);
    let options = options(f.rest());
    let mut settings: Vec<Setting> = Vec::new();
    for option in &options {
        match &option.value {
            Ok(value) => settings.push(Setting {
                key: option.key.clone(),
                value: value.clone(),
            }),
            Err(found) => errors.push(
                option.value_pos,
                format!(
                    "`{}`: a decoder setting is one value, found {found}",
                    option.key
                ),
            ),
        }
    }
    let (push, byte_order) = keys?;
    let (host, port) = match &push.broker {
        DeviceBroker::Own { host, port, .. } => (host.clone(), *port),
        DeviceBroker::Uplink => (String::new(), 0),
    };
    let protocol = ChannelProtocol(Arc::new(ProtocolInfo {
        name: MQTT.to_owned(),
        codec: push.decoder.clone(),
        transports: vec![Transport::Tcp],
        default_port: None,
        settings: Vec::new(),
        address_help: format!("where decoder `{}` finds the value", push.decoder),
    }));
    Some(PushParts {
        push,
        protocol,
        host,
        port,
        byte_order,
        settings,
        options,
    })
}

/// The keys of an MQTT channel the engine owns, and its tags' byte order.
fn read_keys(
    f: &mut Fields<'_>,
    context: &ChannelContext<'_>,
    errors: &mut Diagnostics,
) -> Option<(PushChannel, Option<ByteOrder>)> {
    let broker = read_broker(f, context, errors);
    let topic = read_topic(f, "topic", true, errors);
    let command_topic = match f.node("commandTopic") {
        Some(_) => Some(read_topic(f, "commandTopic", false, errors)?),
        None => None,
    };
    let report_period_ms = match read_at::<u64>(f, "reportPeriodMs", errors) {
        Some((period, _)) if period >= 100 => Some(period),
        Some((period, pos)) => {
            errors.push(
                pos,
                format!("`reportPeriodMs`: {period} ms is below the 100 ms minimum"),
            );
            None
        }
        None if f.node("reportPeriodMs").is_none() => {
            errors.push(
                f.pos(),
                "channel: missing required key `reportPeriodMs` (how often the device says it \
                 publishes; its lease is three of them)",
            );
            None
        }
        None => None,
    };
    let decoder = text_at(f, "decoder", errors).map_or(DEFAULT_DECODER.to_owned(), |(d, _)| d);
    let max_messages_per_second = ranged(f, "maxMessagesPerSecond", 1..=100_000, 100, errors);
    let byte_order = f.optional_with("byteOrder", errors, |node| {
        yaml::enum_value(node, ByteOrder::NAMES)
    });
    for key in [
        "host",
        "port",
        "serialPort",
        "connectTimeoutMs",
        "readTimeoutMs",
        "heartbeatMs",
        "sharedConnection",
    ] {
        if let Some(node) = f.node(key) {
            errors.push(
                node.pos,
                format!(
                    "`{key}`: an MQTT device is not connected to; its messages arrive on `broker`"
                ),
            );
        }
    }
    let push = PushChannel {
        broker: broker?,
        topic: topic?,
        command_topic,
        report_period_ms: report_period_ms?,
        decoder,
        max_messages_per_second,
    };
    Some((push, byte_order))
}

fn read_broker(
    f: &mut Fields<'_>,
    context: &ChannelContext<'_>,
    errors: &mut Diagnostics,
) -> Option<DeviceBroker> {
    let url = f.optional_with("broker", errors, |node| match &node.kind {
        yaml::Kind::Str(url) => parse_broker_url(url),
        other => Err(format!("expected a URL, found {}", other.describe())),
    });
    let username = text_at(f, "username", errors);
    let password = match (f.node("password"), context.base) {
        (Some(_), Some(base)) => {
            secret_at(f, "password", base, errors).map(|(p, _)| Secret::new(&p))
        }
        (Some(node), None) => {
            errors.push(
                node.pos,
                "`password`: a pushed configuration names no broker password; write it in the file",
            );
            None
        }
        (None, _) => None,
    };
    match (url, f.node("broker")) {
        (Some((host, port, tls)), _) => Some(DeviceBroker::Own {
            host,
            port,
            tls,
            username: username.map(|(u, _)| u),
            password,
        }),
        // Written but wrong: already said.
        (None, Some(_)) => None,
        (None, None) => {
            if let Some((_, pos)) = username {
                errors.push(
                    pos,
                    "`username`: the uplink's broker is used with the uplink's credentials; \
                     name a `broker` to give others",
                );
            }
            Some(DeviceBroker::Uplink)
        }
    }
}

/// `key`, a topic with placeholders: a filter (`+` and `#` allowed) when
/// `filter`, else a topic to publish to.
fn read_topic(
    f: &mut Fields<'_>,
    key: &'static str,
    filter: bool,
    errors: &mut Diagnostics,
) -> Option<String> {
    let Some((topic, pos)) = text_at(f, key, errors) else {
        if filter && f.node(key).is_none() {
            errors.push(
                f.pos(),
                format!("channel: missing required key `{key}` (where the device publishes, e.g. `sensors/{{deviceNum}}/up`)"),
            );
        }
        return None;
    };
    if let Err(problem) = check_topic(&topic, filter) {
        errors.push(pos, format!("`{key}`: {problem}"));
        return None;
    }
    Some(topic)
}

/// A topic (filter) with placeholders: not empty, no unknown `{...}`, and
/// wildcards only where MQTT allows them (only in a filter).
fn check_topic(topic: &str, filter: bool) -> Result<(), String> {
    if topic.is_empty() {
        return Err("must not be empty".into());
    }
    let mut rest = topic;
    while let Some(start) = rest.find('{') {
        let Some(end) = rest[start..].find('}') else {
            return Err(format!("`{topic}` opens a `{{` it does not close"));
        };
        let placeholder = &rest[start..start + end + 1];
        if !PLACEHOLDERS.contains(&placeholder) {
            return Err(format!(
                "`{placeholder}` is no placeholder: use {}",
                PLACEHOLDERS.join(", ")
            ));
        }
        rest = &rest[start + end + 1..];
    }
    let levels: Vec<&str> = topic.split('/').collect();
    for (i, level) in levels.iter().enumerate() {
        let wild = level.contains(['+', '#']);
        if wild && !filter {
            return Err(format!(
                "`{topic}`: a topic to publish to has no `+` or `#`"
            ));
        }
        if wild && *level != "+" && *level != "#" {
            return Err(format!("`{topic}`: `+` and `#` stand alone in a level"));
        }
        if *level == "#" && i + 1 != levels.len() {
            return Err(format!("`{topic}`: `#` is the last level"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
