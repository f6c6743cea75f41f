//! Values of writes: an engineering value checked against its tag and scaled to
//! the raw value the device stores, and a value read back compared with the one
//! asked for.

use serde_json::Value as Json;

use crate::model::{DataType, Quality, Sample, SettingValue, TagSpec, Value};

/// The tag's `min`/`max` (engineering units), if set.
fn bound(spec: &TagSpec, key: &str) -> Option<f64> {
    spec.settings
        .iter()
        .find(|s| s.key == key)
        .and_then(|s| match s.value {
            SettingValue::Float(v) => Some(v),
            SettingValue::Int(v) => Some(v as f64),
            _ => None,
        })
}

/// The engineering value as the raw value the device stores: checked against the
/// tag's type and range, scaled back by `factor` and `offset`; for an array tag,
/// a JSON array of as many elements, each so.
///
/// # Errors
/// A value of the wrong type, out of `min`..`max`, not on the tag's scale, or not
/// fitting its data type; an array of another length, or a single value for an
/// array tag (and the other way round).
pub fn to_raw(spec: &TagSpec, value: &Json) -> Result<Value, String> {
    match (spec.array_len(), value) {
        (Some(len), Json::Array(elements)) if elements.len() == len as usize => {
            let raw = elements.iter().enumerate().map(|(i, element)| {
                element_to_raw(spec, element).map_err(|e| format!("element {i}: {e}"))
            });
            Ok(Value::Array(raw.collect::<Result<_, _>>()?))
        }
        (Some(len), Json::Array(elements)) => Err(format!(
            "tag `{}` is an array of {len} values: the write has {}",
            spec.key,
            elements.len()
        )),
        (Some(len), other) => Err(format!(
            "tag `{}` is an array of {len} values: write a JSON array, not {other}",
            spec.key
        )),
        (None, Json::Array(_)) => Err(format!(
            "tag `{}` holds one value: write it, not an array",
            spec.key
        )),
        (None, _) => element_to_raw(spec, value),
    }
}

/// [`to_raw`] of one value of the tag's type.
fn element_to_raw(spec: &TagSpec, value: &Json) -> Result<Value, String> {
    match spec.data_type {
        DataType::Bool => match value {
            Json::Bool(b) => Ok(Value::Bool(*b)),
            Json::Number(n) if n.as_u64() == Some(0) => Ok(Value::Bool(false)),
            Json::Number(n) if n.as_u64() == Some(1) => Ok(Value::Bool(true)),
            other => Err(format!(
                "tag `{}` is BOOL: write true/false or 0/1, not {other}",
                spec.key
            )),
        },
        DataType::String => match value {
            Json::String(text)
                if spec.length == 0 || text.chars().count() <= spec.length as usize =>
            {
                Ok(Value::Text(text.clone()))
            }
            Json::String(_) => Err(format!(
                "tag `{}` holds at most {} characters",
                spec.key, spec.length
            )),
            other => Err(format!(
                "tag `{}` is STRING: write a string, not {other}",
                spec.key
            )),
        },
        data_type => {
            let Some(v) = value.as_f64().filter(|v| v.is_finite()) else {
                return Err(format!(
                    "tag `{}` is {data_type:?}: write a number, not {value}",
                    spec.key
                ));
            };
            if let Some(min) = bound(spec, "min").filter(|min| v < *min) {
                return Err(format!(
                    "{v} is below the minimum {min} of tag `{}`",
                    spec.key
                ));
            }
            if let Some(max) = bound(spec, "max").filter(|max| v > *max) {
                return Err(format!(
                    "{v} is above the maximum {max} of tag `{}`",
                    spec.key
                ));
            }
            if spec.factor == 0.0 {
                return Err(format!(
                    "tag `{}` has factor 0: no raw value gives {v}",
                    spec.key
                ));
            }
            let raw = (v - spec.offset) / spec.factor;
            raw_number(spec, data_type, raw, v)
        }
    }
}

fn raw_number(spec: &TagSpec, data_type: DataType, raw: f64, v: f64) -> Result<Value, String> {
    let (low, high): (f64, f64) = match data_type {
        DataType::Int16 => (i16::MIN.into(), i16::MAX.into()),
        DataType::Uint16 => (0.0, u16::MAX.into()),
        DataType::Int32 => (i32::MIN.into(), i32::MAX.into()),
        DataType::Uint32 => (0.0, u32::MAX.into()),
        DataType::Int64 => (i64::MIN as f64, i64::MAX as f64),
        DataType::Uint64 => (0.0, u64::MAX as f64),
        DataType::Bcd16 => (0.0, 9_999.0),
        DataType::Bcd32 => (0.0, 99_999_999.0),
        DataType::Float32 => {
            let max = f64::from(f32::MAX);
            return if raw.abs() <= max {
                Ok(Value::Float(raw))
            } else {
                Err(format!("{v} does not fit tag `{}` (FLOAT32)", spec.key))
            };
        }
        // A finite value can still scale past f64's range (a factor below 1).
        DataType::Float64 | DataType::Bool | DataType::String => {
            return if raw.is_finite() {
                Ok(Value::Float(raw))
            } else {
                Err(format!("{v} does not fit tag `{}` (FLOAT64)", spec.key))
            };
        }
    };
    let whole = raw.round();
    if (raw - whole).abs() > 1e-6 * raw.abs().max(1.0) {
        return Err(format!(
            "{v} is not on the scale of tag `{}` (factor {}, offset {}): the nearest values are {} and {}",
            spec.key,
            spec.factor,
            spec.offset,
            raw.floor() * spec.factor + spec.offset,
            raw.ceil() * spec.factor + spec.offset
        ));
    }
    if whole < low || whole > high {
        return Err(format!(
            "{v} does not fit tag `{}`: its raw value {whole} is outside {low}..{high} ({data_type:?})",
            spec.key
        ));
    }
    Ok(if low < 0.0 {
        Value::Int(whole as i64)
    } else {
        Value::Uint(whole as u64)
    })
}

pub(super) fn sample_json(sample: &Sample) -> Option<Json> {
    (sample.quality != Quality::Bad).then(|| sample.value.to_json())
}

/// The value read back equals the one asked for, within the tag's resolution.
pub(super) fn same(spec: &TagSpec, sample: &Sample, wanted: &Json) -> bool {
    if sample.quality == Quality::Bad {
        return false;
    }
    same_value(spec, &sample.value, wanted)
}

/// [`same`] of a value, or of each element of an array.
fn same_value(spec: &TagSpec, value: &Value, wanted: &Json) -> bool {
    match (value, wanted) {
        (Value::Array(got), Json::Array(want)) => {
            got.len() == want.len() && got.iter().zip(want).all(|(g, w)| same_value(spec, g, w))
        }
        (Value::Bool(got), Json::Bool(want)) => got == want,
        (Value::Bool(got), Json::Number(n)) => n.as_u64() == Some(u64::from(*got)),
        (Value::Text(got), Json::String(want)) => got.trim_end_matches('\0') == want,
        (value, want) => {
            let got = match value {
                Value::Int(v) => *v as f64,
                Value::Uint(v) => *v as f64,
                Value::Float(v) => *v,
                _ => return false,
            };
            let Some(want) = want.as_f64() else {
                return false;
            };
            let step = match spec.data_type {
                DataType::Float32 => want.abs() * 1e-6,
                DataType::Float64 => want.abs() * 1e-12,
                _ => spec.factor.abs() / 2.0,
            };
            (got - want).abs() <= step.max(1e-9)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_that_scales_past_the_type_s_range_is_refused() {
        let spec = TagSpec {
            factor: 0.5,
            ..TagSpec::plain("t", DataType::Float64)
        };
        assert_eq!(to_raw(&spec, &Json::from(3.0)), Ok(Value::Float(6.0)));
        let error = to_raw(&spec, &Json::from(-1.7e308)).expect_err("-inf");
        assert!(error.contains("does not fit"), "{error}");
        let spec = TagSpec {
            factor: 1e-300,
            ..TagSpec::plain("t", DataType::Float32)
        };
        assert!(to_raw(&spec, &Json::from(1e10)).is_err());
    }

    #[test]
    fn an_array_tag_takes_an_array_of_its_length_checked_element_by_element() {
        let spec = TagSpec {
            length: 3,
            factor: 0.5,
            ..TagSpec::plain("a", DataType::Int16)
        };
        let raw = to_raw(&spec, &serde_json::json!([1, -2.5, 0])).expect("fits");
        let expected = Value::Array(Box::new([Value::Int(2), Value::Int(-5), Value::Int(0)]));
        assert_eq!(raw, expected);
        let error = to_raw(&spec, &serde_json::json!([1, 2])).expect_err("two of three");
        assert_eq!(error, "tag `a` is an array of 3 values: the write has 2");
        let error = to_raw(&spec, &serde_json::json!(1)).expect_err("a number");
        assert_eq!(
            error,
            "tag `a` is an array of 3 values: write a JSON array, not 1"
        );
        let error = to_raw(&spec, &serde_json::json!([1, 0.1, 1e9])).expect_err("off scale");
        assert!(
            error.starts_with("element 1: 0.1 is not on the scale"),
            "{error}"
        );
        let single = TagSpec::plain("s", DataType::Int16);
        assert!(to_raw(&single, &serde_json::json!([1])).is_err());

        let read_back = |value: Value| Sample {
            tag: 0,
            value,
            quality: Quality::Good,
            ts_ms: 0,
        };
        let got = read_back(Value::Array(Box::new([
            Value::Float(1.0),
            Value::Float(-2.5),
            Value::Float(0.0),
        ])));
        assert!(same(&spec, &got, &serde_json::json!([1, -2.5, 0])));
        assert!(!same(&spec, &got, &serde_json::json!([1, -2.5, 1])));
        assert!(!same(&spec, &got, &serde_json::json!([1, -2.5])));
    }
}
