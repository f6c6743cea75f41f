//! Reading stage and codec settings without string parsing on the hot path: a
//! component reads its settings once, when it is created.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

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

/// The value as an integer from `min` to `max`.
///
/// # Errors
/// The message for a value of another kind or out of range.
pub fn integer(key: &str, value: &SettingValue<'_>, min: u32, max: u32) -> Result<u32, String> {
    value
        .as_u32()
        .filter(|v| (min..=max).contains(v))
        .ok_or_else(|| wrong_type(key, &format!("an integer from {min} to {max}"), value))
}

/// Reads every item with `read` (given its index), keeping the errors after
/// those found before: the items read, or all the errors.
///
/// # Errors
/// Every error, when there is one.
pub fn read_all<S, T, E>(
    items: Vec<S>,
    mut errors: Vec<E>,
    mut read: impl FnMut(usize, S) -> Result<T, E>,
) -> Result<Vec<T>, Vec<E>> {
    let mut parsed = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        match read(index, item) {
            Ok(item) => parsed.push(item),
            Err(error) => errors.push(error),
        }
    }
    if errors.is_empty() {
        Ok(parsed)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn integers_in_range() {
        assert_eq!(integer("k", &SettingValue::Int(7), 0, 7), Ok(7));
        assert_eq!(
            integer("k", &SettingValue::Int(8), 0, 7),
            Err("setting `k` must be an integer from 0 to 7, got an integer".into())
        );
        assert!(integer("k", &SettingValue::Text("1"), 0, 7).is_err());
    }

    #[test]
    fn every_error_is_kept() {
        let half = |_, n: u32| {
            if n.is_multiple_of(2) {
                Ok(n / 2)
            } else {
                Err(n)
            }
        };
        assert_eq!(read_all(vec![2, 4], Vec::new(), half), Ok(vec![1, 2]));
        assert_eq!(read_all(vec![1, 2, 3], vec![9], half), Err(vec![9, 1, 3]));
    }
}
