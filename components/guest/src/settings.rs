//! Reading stage and codec settings without string parsing on the hot path: a
//! component reads its settings once, when it is created.

use alloc::format;
use alloc::string::String;

/// A setting's value, mirroring the WIT `setting-value` variant.
#[derive(Debug, Clone, PartialEq)]
pub enum SettingValue<'a> {
    Boolean(bool),
    Int(i64),
    Float(f64),
    Text(&'a str),
}

impl SettingValue<'_> {
    /// The value as a number, accepting integers and floats.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            SettingValue::Int(v) => Some(*v as f64),
            SettingValue::Float(v) => Some(*v),
            _ => None,
        }
    }

    /// The value as a non-negative integer that fits in `u32`.
    pub fn as_u32(&self) -> Option<u32> {
        match self {
            SettingValue::Int(v) => u32::try_from(*v).ok(),
            _ => None,
        }
    }

    /// Words for error messages: what kind of value this is.
    pub fn kind(&self) -> &'static str {
        match self {
            SettingValue::Boolean(_) => "a boolean",
            SettingValue::Int(_) => "an integer",
            SettingValue::Float(_) => "a number",
            SettingValue::Text(_) => "a string",
        }
    }
}

/// The message for a setting key a component does not know.
pub fn unknown_key(key: &str, known: &[&str]) -> String {
    if known.is_empty() {
        format!("unknown setting `{key}`: this component takes no settings")
    } else {
        format!(
            "unknown setting `{key}`; expected one of: {}",
            known.join(", ")
        )
    }
}

/// The message for a setting whose value has the wrong shape.
pub fn wrong_type(key: &str, expected: &str, got: &SettingValue<'_>) -> String {
    format!("setting `{key}` must be {expected}, got {}", got.kind())
}
