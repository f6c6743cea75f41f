//! What the platform sends down: `property/set` and `function/invoke` payloads
//! (JSON requests), Sparkplug B DCMD and NCMD payloads, and `config/push`
//! device entries. Byte 0 picks the kind, the rest is the payload; every
//! payload is also taken apart as a signed message and put to the downlink's
//! guard, as each one is before anything else reads it.

use serde_json::Value as Json;
use sluice::command::values::to_raw;
use sluice::config::KeyFile;
use sluice::model::Secret;
use sluice::model::{Access, ByteOrder, DataType, Setting, SettingValue, TagSpec, Value};
use sluice::mqtt::signature;
use sluice::mqtt::{CommandRequest, request_id_of};
use sluice::uplink::DownlinkGuard;

use crate::documents::check_refusal;

/// A writable tag of every type, scaled, with a range on the numeric ones.
fn tags() -> Vec<TagSpec> {
    let types = [
        DataType::Bool,
        DataType::Int16,
        DataType::Uint16,
        DataType::Int32,
        DataType::Uint32,
        DataType::Int64,
        DataType::Uint64,
        DataType::Float32,
        DataType::Float64,
        DataType::Bcd16,
        DataType::Bcd32,
        DataType::String,
    ];
    types
        .into_iter()
        .enumerate()
        .map(|(i, data_type)| TagSpec {
            key: format!("t{i}").into(),
            address: format!("4{:04}", i * 4 + 1).into(),
            data_type,
            length: if data_type == DataType::String { 8 } else { 0 },
            byte_order: ByteOrder::Abcd,
            factor: if i % 2 == 0 { 0.5 } else { 1.0 },
            offset: if i % 3 == 0 { 10.0 } else { 0.0 },
            deadband: 0.0,
            access: Access::ReadWrite,
            settings: if i % 4 == 1 {
                vec![
                    Setting {
                        key: "min".into(),
                        value: SettingValue::Int(-100),
                    },
                    Setting {
                        key: "max".into(),
                        value: SettingValue::Float(1e4),
                    },
                ]
            } else {
                Vec::new()
            },
        })
        .collect()
}

/// The raw value of a write fits the tag's data type, or is refused with a reason.
fn check_write(spec: &TagSpec, value: &Json) {
    let (low, high): (f64, f64) = match spec.data_type {
        DataType::Int16 => (i16::MIN.into(), i16::MAX.into()),
        DataType::Uint16 => (0.0, u16::MAX.into()),
        DataType::Int32 => (i32::MIN.into(), i32::MAX.into()),
        DataType::Uint32 => (0.0, u32::MAX.into()),
        DataType::Bcd16 => (0.0, 9_999.0),
        DataType::Bcd32 => (0.0, 99_999_999.0),
        DataType::Float32 => (f32::MIN.into(), f32::MAX.into()),
        _ => (f64::NEG_INFINITY, f64::INFINITY),
    };
    match to_raw(spec, value) {
        Ok(Value::Int(v)) => assert!((low..=high).contains(&(v as f64)), "{v} for {spec:?}"),
        Ok(Value::Uint(v)) => assert!((low..=high).contains(&(v as f64)), "{v} for {spec:?}"),
        Ok(Value::Float(v)) => assert!(v.is_finite() && (low..=high).contains(&v), "{v}"),
        Ok(Value::Bool(_)) => assert_eq!(spec.data_type, DataType::Bool),
        Ok(Value::Text(text)) => {
            assert_eq!(spec.data_type, DataType::String);
            assert!(text.chars().count() <= spec.length as usize, "{text:?}");
        }
        Ok(other) => panic!("{other:?} to write to {spec:?}"),
        Err(reason) => assert!(!reason.is_empty(), "a write refused without a reason"),
    }
}

/// `property/set` or `function/invoke`: a JSON request, then its value for
/// each tag; a payload that is not a request still gives its request id, if any.
fn request(payload: &[u8], tags: &[TagSpec]) {
    match serde_json::from_slice::<CommandRequest>(payload) {
        Ok(request) => {
            for spec in tags {
                check_write(spec, &request.value);
            }
        }
        Err(error) => {
            assert!(!error.to_string().is_empty());
            let _ = request_id_of(payload);
        }
    }
}

/// A Sparkplug B DCMD: each metric write becomes a request of the tag it names.
fn device_command(payload: &[u8], tags: &[TagSpec]) {
    match sluice::command::sparkplug::requests("press-1", tags, payload, 1) {
        Ok(requests) => {
            for request in requests {
                match request {
                    Ok(request) => {
                        let spec = tags.iter().find(|t| t.key == request.key);
                        let spec = spec.expect("a request names one of the device's tags");
                        check_write(spec, &request.value);
                    }
                    Err(reason) => assert!(!reason.is_empty()),
                }
            }
        }
        Err(error) => assert!(!error.to_string().is_empty()),
    }
}

/// A `config/push` payload: a device entry in JSON, read as the file's entries are.
fn config_push(payload: &[u8]) {
    let Ok(text) = std::str::from_utf8(payload) else {
        return;
    };
    let Ok(Json::Object(_)) = serde_json::from_str::<Json>(text) else {
        return;
    };
    let node = match sluice::yaml::parse("push", text) {
        Ok(node) => node,
        Err(errors) => return check_refusal("a pushed device", &errors),
    };
    let protocols = crate::documents::protocols();
    let context =
        sluice::config::load_str("context", "", protocols).expect("the empty configuration");
    if let Err(errors) = sluice::config::read_device("push", &node, &context, protocols) {
        check_refusal("a pushed device", &errors);
    }
}

/// The signature split off and checked: what is left is the signed body; the
/// guard (an operator's and a tenant's key) lets it in or says why not, and
/// never for a key that did not sign it.
fn signed(payload: &[u8]) {
    const TOPIC: &str = "P/D1/property/set";
    match signature::split(payload) {
        Ok(Some(signed)) => {
            assert!(signed.body.ends_with(b"}") && signed.body.len() < payload.len());
            assert!(!signature::verify(
                b"a key nobody signs with",
                TOPIC,
                &signed
            ));
        }
        Ok(None) => {}
        Err(error) => assert!(!error.to_string().is_empty()),
    }
    let mut config = sluice::config::GatewayConfig::default();
    config.collector.downlink.operator_keys = Some(KeyFile {
        source: sluice::config::KeySource::File("operator.key".into()),
        pos: sluice::yaml::Pos::default(),
        keys: vec![Secret::new("the-operator-key-0123456789")],
    });
    let guard = DownlinkGuard::new(&config, None);
    match guard.admit(TOPIC, payload, Some(1), 1_800_000_000_000) {
        Ok(admitted) => panic!("let in without its key: {:?}", admitted.authority),
        Err(reason) => assert!(!reason.is_empty() && reason.len() < 1024, "{reason}"),
    }
}

pub fn payload(data: &[u8]) {
    let Some((&kind, payload)) = data.split_first() else {
        return;
    };
    signed(payload);
    let tags = tags();
    match kind % 4 {
        0 => request(payload, &tags),
        1 => device_command(payload, &tags),
        2 => {
            if let Err(error) = sluice::mqtt::sparkplug::asks_rebirth(payload) {
                assert!(!error.to_string().is_empty());
            }
        }
        _ => config_push(payload),
    }
}
