//! What a codec declares it speaks (WIT `describe`), asked once when it is
//! loaded, in a sandbox with the default limits: a codec that traps, loops or
//! runs out of memory there, or declares nothing usable, is refused at load.

use std::sync::Arc;

use super::bindings::codec::Codec;
use super::bindings::codec::exports::sluice::dataflow::protocol as wit_protocol;
use super::bindings::wit;
use super::pool::Pool;
use crate::model::{ProtocolInfo, SettingDecl, SettingType, SettingValue, Transport};

/// The protocols of the codec `name`, checked.
///
/// # Errors
/// Why the declaration cannot be used: the call failed, or what it says.
pub(super) fn describe(pool: &Pool<Codec>, name: &str) -> Result<Vec<Arc<ProtocolInfo>>, String> {
    let declared = pool
        .call_instance("describe", |live| {
            live.bindings
                .sluice_dataflow_protocol()
                .call_describe(&mut live.store)
        })
        .map_err(|error| error.to_string())?;
    if declared.is_empty() {
        return Err("it declares no protocol".into());
    }
    let mut protocols = Vec::with_capacity(declared.len());
    for protocol in declared {
        let info = protocol_from_wit(protocol, name);
        info.check()?;
        if protocols
            .iter()
            .any(|p: &Arc<ProtocolInfo>| p.name == info.name)
        {
            return Err(format!("it declares protocol {} twice", info.name));
        }
        protocols.push(Arc::new(info));
    }
    Ok(protocols)
}

fn protocol_from_wit(protocol: wit_protocol::ProtocolDeclaration, codec: &str) -> ProtocolInfo {
    ProtocolInfo {
        name: protocol.name,
        codec: codec.to_owned(),
        transports: protocol
            .transports
            .into_iter()
            .map(|t| match t {
                wit_protocol::Transport::Tcp => Transport::Tcp,
                wit_protocol::Transport::SerialLine => Transport::SerialLine,
                wit_protocol::Transport::LineOverTcp => Transport::LineOverTcp,
            })
            .collect(),
        default_port: protocol.default_port,
        settings: protocol
            .settings
            .into_iter()
            .map(|s| SettingDecl {
                name: s.name,
                kind: match s.type_ {
                    wit_protocol::SettingType::Boolean => SettingType::Boolean,
                    wit_protocol::SettingType::Integer(range) => SettingType::Integer {
                        min: range.min,
                        max: range.max,
                    },
                    wit_protocol::SettingType::Float => SettingType::Float,
                    wit_protocol::SettingType::Text => SettingType::Text,
                    wit_protocol::SettingType::Choice(names) => SettingType::Choice(names),
                },
                default: s.default.map(|value| match value {
                    wit::SettingValue::Boolean(v) => SettingValue::Bool(v),
                    wit::SettingValue::Int(v) => SettingValue::Int(v),
                    wit::SettingValue::Float(v) => SettingValue::Float(v),
                    wit::SettingValue::Text(v) => SettingValue::Text(v),
                }),
                help: s.help,
            })
            .collect(),
        address_help: protocol.address_help,
    }
}
