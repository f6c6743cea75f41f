//! Stage `scale`: engineering value = raw x factor + offset, per tag.
//!
//! Integers pass through unchanged when their tag has factor 1 and offset 0, so a
//! counter stays an exact integer. Any other numeric value becomes a float; a
//! result that is not finite makes the sample BAD. Booleans, text and undecoded
//! bytes pass through untouched.
//!
//! Settings: `decimals` (optional, 0-12): round results to that many decimals,
//! which hides binary noise such as `0.1 x 123 = 12.300000000000001`.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::format;
use alloc::vec::Vec;
use sluice_guest::settings::{unknown_key, wrong_type};

#[cfg(not(test))]
sluice_guest::guest_runtime!();

wit_bindgen::generate!({ world: "stage", path: "../../../wit" });

use exports::sluice::dataflow::transform::{Guest, GuestProcessor, Processor};
use sluice::dataflow::types::{Batch, ConfigError, Quality, Setting, TagSpec, Value};

struct Component;

impl Guest for Component {
    type Processor = Scale;
}

/// Largest `decimals` accepted: beyond it f64 has no digits left to round.
const MAX_DECIMALS: u32 = 12;

struct Scale {
    /// (factor, offset) per tag index.
    linear: Vec<(f64, f64)>,
    /// 10^decimals when rounding is on.
    rounding: Option<f64>,
}

/// Rounds half away from zero; values too large for i64 have no fraction left.
fn round_to(value: f64, scale: f64) -> f64 {
    let scaled = value * scale;
    if scaled.is_nan() || scaled.abs() >= 9.0e18 {
        return value;
    }
    let nudged = if scaled >= 0.0 {
        scaled + 0.5
    } else {
        scaled - 0.5
    };
    (nudged as i64) as f64 / scale
}

impl Scale {
    fn apply(&self, tag: u32, value: &Value) -> Option<Value> {
        let &(factor, offset) = self.linear.get(tag as usize)?;
        let identity = factor == 1.0 && offset == 0.0;
        let raw = match *value {
            Value::Int(_) | Value::Uint(_) if identity => return Some(value.clone()),
            Value::Int(v) => v as f64,
            Value::Uint(v) => v as f64,
            Value::Float(v) => v,
            _ => return Some(value.clone()),
        };
        let mut scaled = raw * factor + offset;
        if let Some(scale) = self.rounding {
            scaled = round_to(scaled, scale);
        }
        scaled.is_finite().then_some(Value::Float(scaled))
    }
}

impl GuestProcessor for Scale {
    fn create(settings: Vec<Setting>, tags: Vec<TagSpec>) -> Result<Processor, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let mut rounding = None;
        for setting in &settings {
            let value = setting_value(setting);
            match setting.key.as_str() {
                "decimals" => match value.as_u32() {
                    Some(d) if d <= MAX_DECIMALS => {
                        rounding = Some((0..d).fold(1.0, |acc, _| acc * 10.0))
                    }
                    Some(d) => errors.push(config_error(
                        None,
                        &setting.key,
                        format!("setting `decimals` must be from 0 to {MAX_DECIMALS}, got {d}"),
                    )),
                    None => errors.push(config_error(
                        None,
                        &setting.key,
                        wrong_type(&setting.key, "an integer from 0 to 12", &value),
                    )),
                },
                other => errors.push(config_error(None, other, unknown_key(other, &["decimals"]))),
            }
        }
        for (index, tag) in tags.iter().enumerate() {
            if !tag.factor.is_finite() || !tag.offset.is_finite() {
                errors.push(ConfigError {
                    tag: Some(index as u32),
                    key: "factor".into(),
                    message: "factor and offset must be finite numbers".into(),
                });
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let linear = tags.iter().map(|t| (t.factor, t.offset)).collect();
        Ok(Processor::new(Scale { linear, rounding }))
    }

    fn process(&self, mut input: Batch) -> Batch {
        for sample in &mut input.samples {
            if sample.quality == Quality::Bad {
                continue;
            }
            match self.apply(sample.tag, &sample.value) {
                Some(value) => sample.value = value,
                None => {
                    sample.value = Value::None;
                    sample.quality = Quality::Bad;
                }
            }
        }
        input
    }

    fn reset(&self) {}
}

sluice_guest::wit_conversions!();

export!(Component);
