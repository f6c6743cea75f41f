//! What a host asks of the edge node: NCMD (the rebirth control) and DCMD
//! (writes to a device's metrics, by name or by alias).

use prost::Message as _;
use serde_json::Value as Json;

use super::messages::REBIRTH;
use super::metric::MetricType;
use super::proto::{Metric, MetricValue, Payload};

/// Why a command payload is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CommandError {
    #[error("not a Sparkplug B payload: {0}")]
    Decode(String),
    #[error("metric {0} names neither a name nor an alias")]
    Unnamed(usize),
    #[error("metric `{0}` carries no value")]
    NoValue(String),
    #[error("metric `{0}`: not a finite number")]
    NotFinite(String),
}

/// Whether an NCMD payload sets `Node Control/Rebirth` to true.
///
/// # Errors
/// The payload is not a Sparkplug B payload.
pub fn asks_rebirth(payload: &[u8]) -> Result<bool, CommandError> {
    let payload = Payload::decode(payload).map_err(|e| CommandError::Decode(e.to_string()))?;
    Ok(payload
        .metrics
        .iter()
        .any(|m| m.name.as_deref() == Some(REBIRTH) && m.value == Some(MetricValue::Boolean(true))))
}

/// Which metric a write is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricRef {
    Name(String),
    Alias(u64),
}

/// One metric write of a DCMD.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricWrite {
    pub metric: MetricRef,
    pub value: Json,
}

/// A DCMD: its timestamp (ms, 0 without one) and its writes.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceCommand {
    pub timestamp: u64,
    pub writes: Vec<MetricWrite>,
}

/// Reads a DCMD payload.
///
/// # Errors
/// The payload is not a Sparkplug B payload, or a metric names nothing or
/// carries no usable value.
pub fn device_command(payload: &[u8]) -> Result<DeviceCommand, CommandError> {
    let payload = Payload::decode(payload).map_err(|e| CommandError::Decode(e.to_string()))?;
    let writes = payload
        .metrics
        .into_iter()
        .enumerate()
        .map(|(index, metric)| write(index, metric))
        .collect::<Result<_, _>>()?;
    Ok(DeviceCommand {
        timestamp: payload.timestamp.unwrap_or(0),
        writes,
    })
}

fn write(index: usize, metric: Metric) -> Result<MetricWrite, CommandError> {
    let reference = match (metric.name, metric.alias) {
        (Some(name), _) => MetricRef::Name(name),
        (None, Some(alias)) => MetricRef::Alias(alias),
        (None, None) => return Err(CommandError::Unnamed(index)),
    };
    let label = match &reference {
        MetricRef::Name(name) => name.clone(),
        MetricRef::Alias(alias) => format!("alias {alias}"),
    };
    let Some(value) = metric.value.filter(|_| metric.is_null != Some(true)) else {
        return Err(CommandError::NoValue(label));
    };
    let datatype = metric.datatype.and_then(MetricType::from_code);
    let json = match (value, datatype) {
        (MetricValue::Boolean(b), _) => Json::from(b),
        (MetricValue::Int(v), Some(MetricType::Int8 | MetricType::Int16 | MetricType::Int32)) => {
            Json::from(v as i32)
        }
        (MetricValue::Int(v), _) => Json::from(v),
        (MetricValue::Long(v), Some(MetricType::Int64)) => Json::from(v as i64),
        (MetricValue::Long(v), _) => Json::from(v),
        (MetricValue::Float(v), _) => Json::from(f64::from(v)),
        (MetricValue::Double(v), _) => Json::from(v),
        (MetricValue::String(v), _) => Json::from(v),
    };
    if json.is_null() {
        return Err(CommandError::NotFinite(label));
    }
    Ok(MetricWrite {
        metric: reference,
        value: json,
    })
}
