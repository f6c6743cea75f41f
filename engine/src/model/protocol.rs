//! What a codec component declares it speaks (WIT `describe`), and the
//! gateway's protocols: every declaration of the active codecs, by name.
//!
//! A channel's `protocol` picks one declaration; the configuration is checked
//! against it (the keys it declares, their types and defaults, the transport,
//! the default port), so an uploaded protocol is checked exactly as a built-in
//! one. The engine keeps only the channel keys it owns ([`ENGINE_CHANNEL_KEYS`]).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::SettingValue;

/// The channel keys the engine owns, whatever the protocol: a codec may not
/// declare a setting of these names.
pub const ENGINE_CHANNEL_KEYS: &[&str] = &[
    "channelId",
    "protocol",
    "host",
    "port",
    "serialPort",
    "baudRate",
    "parity",
    "dataBits",
    "stopBits",
    "connectTimeoutMs",
    "readTimeoutMs",
    "heartbeatMs",
    "sharedConnection",
    "tags",
];

/// How a protocol's frames reach its devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// A TCP connection (`host`, `port`).
    Tcp,
    /// A serial line (`serialPort`) shared by its devices, one request at a time.
    SerialLine,
    /// Serial-line frames through a TCP connection, one request at a time.
    LineOverTcp,
}

impl Transport {
    /// Whether it carries one request at a time with no transaction id: a lost
    /// or broken answer leaves the line to fall silent and be drained, not the
    /// connection to be dropped.
    pub fn is_line(self) -> bool {
        matches!(self, Transport::SerialLine | Transport::LineOverTcp)
    }

    /// How messages name it.
    pub fn describe(self) -> &'static str {
        match self {
            Transport::Tcp => "a TCP connection (`host`)",
            Transport::SerialLine => "a serial line (`serialPort`)",
            Transport::LineOverTcp => "a serial server's TCP port (`host`)",
        }
    }
}

/// What a valid value of a declared setting is.
#[derive(Debug, Clone, PartialEq)]
pub enum SettingType {
    Boolean,
    Integer {
        min: i64,
        max: i64,
    },
    Float,
    Text,
    /// One of these names.
    Choice(Vec<String>),
}

impl SettingType {
    /// `value` if it is one of this type, else what was expected.
    ///
    /// # Errors
    /// What is wrong with `value`, in words for a message after the key.
    pub fn admit(&self, value: &SettingValue) -> Result<(), String> {
        let found = |what: &str| Err(format!("expected {what}, found {}", kind_of(value)));
        match (self, value) {
            (SettingType::Boolean, SettingValue::Bool(_))
            | (SettingType::Text, SettingValue::Text(_))
            | (SettingType::Float, SettingValue::Float(_) | SettingValue::Int(_)) => Ok(()),
            (SettingType::Integer { min, max }, SettingValue::Int(v))
                if (min..=max).contains(&v) =>
            {
                Ok(())
            }
            (SettingType::Integer { min, max }, SettingValue::Int(v)) => {
                Err(format!("{v} is out of range: expected {min} to {max}"))
            }
            (SettingType::Choice(names), SettingValue::Text(name)) if names.contains(name) => {
                Ok(())
            }
            (SettingType::Choice(names), SettingValue::Text(name)) => Err(format!(
                "unknown value `{name}`: expected {}",
                names.join(" | ")
            )),
            (SettingType::Boolean, _) => found("true or false"),
            (SettingType::Integer { .. }, _) => found("an integer"),
            (SettingType::Float, _) => found("a number"),
            (SettingType::Text, _) => found("a string"),
            (SettingType::Choice(names), _) => found(&format!("one of {}", names.join(" | "))),
        }
    }
}

fn kind_of(value: &SettingValue) -> &'static str {
    match value {
        SettingValue::Bool(_) => "a boolean",
        SettingValue::Int(_) => "an integer",
        SettingValue::Float(_) => "a number",
        SettingValue::Text(_) => "a string",
    }
}

/// A channel setting a protocol declares.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingDecl {
    pub name: String,
    pub kind: SettingType,
    /// What a channel that leaves it out gets; `None`: the codec does without.
    pub default: Option<SettingValue>,
    /// One line on what it is.
    pub help: String,
}

/// A protocol as its codec declares it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtocolInfo {
    /// The name a channel's `protocol` gives.
    pub name: String,
    /// The codec component that speaks it.
    pub codec: String,
    pub transports: Vec<Transport>,
    pub default_port: Option<u16>,
    pub settings: Vec<SettingDecl>,
    /// One line on what a tag's address is.
    pub address_help: String,
}

impl ProtocolInfo {
    /// The declared setting `name`.
    pub fn setting(&self, name: &str) -> Option<&SettingDecl> {
        self.settings.iter().find(|s| s.name == name)
    }

    /// The transport a channel gets: on a serial line when it names a
    /// `serialPort`, else the TCP one it declares; `None` when it has none such.
    pub fn transport(&self, serial_port: bool) -> Option<Transport> {
        self.transports
            .iter()
            .copied()
            .find(|t| (*t == Transport::SerialLine) == serial_port)
    }

    /// Checks what the codec declared: a usable name, transports, settings
    /// that are not the engine's and whose defaults fit them.
    ///
    /// # Errors
    /// The first thing wrong, in words naming the protocol.
    pub fn check(&self) -> Result<(), String> {
        let name = &self.name;
        let fine_name = (1..=32).contains(&name.len())
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !fine_name {
            return Err(format!(
                "protocol name `{name}`: use 1 to 32 lower-case letters, digits and `-`, starting with a letter"
            ));
        }
        let at = |problem: String| Err(format!("protocol {name}: {problem}"));
        if self.transports.is_empty() {
            return at("declares no transport".into());
        }
        for (i, transport) in self.transports.iter().enumerate() {
            if self.transports[..i].contains(transport) {
                return at(format!("declares {} twice", transport.describe()));
            }
        }
        if self.transports.contains(&Transport::Tcp)
            && self.transports.contains(&Transport::LineOverTcp)
        {
            return at(
                "declares both a TCP connection and a serial server's TCP port: a channel with `host` could be either"
                    .into(),
            );
        }
        if self.default_port == Some(0) {
            return at("declares port 0 as its default".into());
        }
        if self.default_port.is_some() && self.transports == [Transport::SerialLine] {
            return at("declares a default port but runs on a serial line only".into());
        }
        for (i, setting) in self.settings.iter().enumerate() {
            let key = &setting.name;
            let fine_key = (1..=64).contains(&key.len())
                && key.starts_with(|c: char| c.is_ascii_alphabetic())
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !fine_key {
                return at(format!(
                    "setting name `{key}`: use 1 to 64 letters, digits and `_`, starting with a letter"
                ));
            }
            if ENGINE_CHANNEL_KEYS.contains(&key.as_str()) {
                return at(format!(
                    "declares a setting `{key}`, which is the engine's channel key"
                ));
            }
            if self.settings[..i].iter().any(|s| s.name == *key) {
                return at(format!("declares the setting `{key}` twice"));
            }
            match &setting.kind {
                SettingType::Integer { min, max } if min > max => {
                    return at(format!(
                        "setting `{key}`: its range {min} to {max} is empty"
                    ));
                }
                SettingType::Choice(names) if names.is_empty() => {
                    return at(format!("setting `{key}`: no value to choose from"));
                }
                _ => {}
            }
            if let Some(default) = &setting.default
                && let Err(problem) = setting.kind.admit(default)
            {
                return at(format!("setting `{key}`: its default: {problem}"));
            }
        }
        Ok(())
    }
}

/// A protocol name that two codecs declare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolTaken {
    pub protocol: String,
    /// The codec that speaks it already.
    pub codec: String,
}

impl fmt::Display for ProtocolTaken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "protocol {}, which codec `{}` speaks already",
            self.protocol, self.codec
        )
    }
}

/// The protocols a gateway speaks, by name: the declarations of its active codecs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Protocols {
    by_name: BTreeMap<String, Arc<ProtocolInfo>>,
}

impl Protocols {
    /// Adds what one codec speaks.
    ///
    /// # Errors
    /// A protocol another codec speaks already; nothing is added then.
    pub fn add(&mut self, declared: &[Arc<ProtocolInfo>]) -> Result<(), ProtocolTaken> {
        for info in declared {
            if let Some(known) = self.by_name.get(&info.name)
                && known.codec != info.codec
            {
                return Err(ProtocolTaken {
                    protocol: info.name.clone(),
                    codec: known.codec.clone(),
                });
            }
        }
        for info in declared {
            self.by_name.insert(info.name.clone(), Arc::clone(info));
        }
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&Arc<ProtocolInfo>> {
        self.by_name.get(name)
    }

    /// Every protocol, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<ProtocolInfo>> {
        self.by_name.values()
    }

    /// The names, for messages: `dlt645 | mc | modbus-rtu | ...`.
    pub fn names(&self) -> String {
        let names: Vec<&str> = self.by_name.keys().map(String::as_str).collect();
        names.join(" | ")
    }

    /// The protocols that declare a setting `key`, for messages.
    pub fn declaring(&self, key: &str) -> Vec<&str> {
        self.by_name
            .values()
            .filter(|p| p.setting(key).is_some())
            .map(|p| p.name.as_str())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str, codec: &str) -> ProtocolInfo {
        ProtocolInfo {
            name: name.into(),
            codec: codec.into(),
            transports: vec![Transport::Tcp],
            default_port: Some(502),
            settings: vec![SettingDecl {
                name: "unit".into(),
                kind: SettingType::Integer { min: 0, max: 255 },
                default: Some(SettingValue::Int(1)),
                help: "the unit".into(),
            }],
            address_help: String::new(),
        }
    }

    #[test]
    fn a_declaration_is_checked_whole() {
        assert_eq!(info("fins", "fins").check(), Ok(()));
        let refused = |change: &dyn Fn(&mut ProtocolInfo)| {
            let mut info = info("fins", "fins");
            change(&mut info);
            info.check().expect_err("refused")
        };
        for (change, expected) in [
            (
                &(|i: &mut ProtocolInfo| i.name = "Fins".into()) as &dyn Fn(&mut ProtocolInfo),
                "protocol name `Fins`: use 1 to 32 lower-case letters",
            ),
            (
                &|i: &mut ProtocolInfo| i.transports.clear(),
                "protocol fins: declares no transport",
            ),
            (
                &|i: &mut ProtocolInfo| i.transports.push(Transport::LineOverTcp),
                "could be either",
            ),
            (
                &|i: &mut ProtocolInfo| i.settings[0].name = "host".into(),
                "declares a setting `host`, which is the engine's channel key",
            ),
            (
                &|i: &mut ProtocolInfo| i.settings.push(i.settings[0].clone()),
                "declares the setting `unit` twice",
            ),
            (
                &|i: &mut ProtocolInfo| i.settings[0].default = Some(SettingValue::Int(300)),
                "setting `unit`: its default: 300 is out of range: expected 0 to 255",
            ),
            (
                &|i: &mut ProtocolInfo| i.settings[0].kind = SettingType::Choice(Vec::new()),
                "setting `unit`: no value to choose from",
            ),
            (
                &|i: &mut ProtocolInfo| i.default_port = Some(0),
                "declares port 0",
            ),
        ] {
            let problem = refused(change);
            assert!(problem.contains(expected), "{expected} in {problem}");
        }
    }

    #[test]
    fn a_protocol_has_one_codec() {
        let mut protocols = Protocols::default();
        protocols
            .add(&[Arc::new(info("fins", "fins"))])
            .expect("new");
        // The same codec again (a new version) replaces its declaration.
        protocols
            .add(&[Arc::new(info("fins", "fins"))])
            .expect("same codec");
        let taken = protocols
            .add(&[
                Arc::new(info("other", "omron")),
                Arc::new(info("fins", "omron")),
            ])
            .expect_err("taken");
        assert_eq!(
            taken.to_string(),
            "protocol fins, which codec `fins` speaks already"
        );
        assert!(protocols.get("other").is_none(), "nothing added");
        assert_eq!(protocols.names(), "fins");
        assert_eq!(protocols.declaring("unit"), ["fins"]);
    }

    #[test]
    fn setting_types_admit_their_values() {
        let choice = SettingType::Choice(vec!["A".into(), "B".into()]);
        assert_eq!(choice.admit(&SettingValue::Text("A".into())), Ok(()));
        assert_eq!(
            choice.admit(&SettingValue::Text("C".into())),
            Err("unknown value `C`: expected A | B".into())
        );
        assert_eq!(
            SettingType::Boolean.admit(&SettingValue::Int(1)),
            Err("expected true or false, found an integer".into())
        );
        assert_eq!(SettingType::Float.admit(&SettingValue::Int(1)), Ok(()));
    }
}
