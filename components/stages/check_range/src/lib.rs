//! Stage `check_range`: a GOOD numeric value outside its tag's valid range (the
//! tag's `min` and `max`, either optional) becomes UNCERTAIN; the value is kept so
//! consumers still see what the device said. Tags without a range pass. No settings.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::vec::Vec;
use sluice_guest::settings::unknown_key;

#[cfg(not(test))]
sluice_guest::guest_runtime!();

wit_bindgen::generate!({ world: "stage", path: "../../../wit" });

use exports::sluice::dataflow::transform::{Guest, GuestProcessor, Processor};
use sluice::dataflow::types::{Batch, ConfigError, Quality, Setting, TagSpec, Value};

struct Component;

impl Guest for Component {
    type Processor = CheckRange;
}

struct CheckRange {
    /// (min, max) per tag; infinite when not set.
    ranges: Vec<(f64, f64)>,
}

fn tag_range(tag: &TagSpec) -> Result<(f64, f64), &'static str> {
    let mut range = (f64::NEG_INFINITY, f64::INFINITY);
    for setting in &tag.settings {
        let bound = match setting.key.as_str() {
            "min" => &mut range.0,
            "max" => &mut range.1,
            _ => continue,
        };
        *bound = setting_value(setting)
            .as_f64()
            .ok_or("`min` and `max` must be numbers")?;
    }
    if range.0 > range.1 {
        return Err("`min` is above `max`");
    }
    Ok(range)
}

impl GuestProcessor for CheckRange {
    fn create(settings: Vec<Setting>, tags: Vec<TagSpec>) -> Result<Processor, Vec<ConfigError>> {
        let mut errors: Vec<ConfigError> = settings
            .iter()
            .map(|s| config_error(None, &s.key, unknown_key(&s.key, &[])))
            .collect();
        let mut ranges = Vec::with_capacity(tags.len());
        for (index, tag) in tags.iter().enumerate() {
            match tag_range(tag) {
                Ok(range) => ranges.push(range),
                Err(message) => {
                    errors.push(config_error(Some(index as u32), "min", message.into()))
                }
            }
        }
        if errors.is_empty() {
            Ok(Processor::new(CheckRange { ranges }))
        } else {
            Err(errors)
        }
    }

    fn process(&self, mut input: Batch) -> Batch {
        for sample in &mut input.samples {
            if sample.quality != Quality::Good {
                continue;
            }
            let value = match sample.value {
                Value::Int(v) => v as f64,
                Value::Uint(v) => v as f64,
                Value::Float(v) => v,
                _ => continue,
            };
            if let Some(&(min, max)) = self.ranges.get(sample.tag as usize)
                && !(min..=max).contains(&value)
            {
                sample.quality = Quality::Uncertain;
            }
        }
        input
    }

    fn reset(&self) {}
}

sluice_guest::wit_conversions!();

export!(Component);
