//! Test stage `shifted_scale`: what `scale` does (raw x factor + offset), plus a
//! shift of 1000, so a test sees at once which version of a stage ran. Takes the
//! `decimals` setting of `scale` (and ignores it), so it can replace `scale` in a
//! pipeline without a change to the pipeline's file.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::vec::Vec;
use sluice_guest::settings::unknown_key;

#[cfg(not(test))]
sluice_guest::guest_runtime!();

wit_bindgen::generate!({ world: "stage", path: "../../../wit" });

use exports::sluice::dataflow::transform::{Guest, GuestProcessor, Processor};
use sluice::dataflow::types::{Batch, ConfigError, Quality, Setting, TagSpec, Value};

/// What this version adds to every value.
const SHIFT: f64 = 1000.0;

struct Component;

impl Guest for Component {
    type Processor = ShiftedScale;
}

struct ShiftedScale {
    linear: Vec<(f64, f64)>,
}

impl GuestProcessor for ShiftedScale {
    fn create(settings: Vec<Setting>, tags: Vec<TagSpec>) -> Result<Processor, Vec<ConfigError>> {
        let errors: Vec<ConfigError> = settings
            .iter()
            .filter(|s| s.key != "decimals")
            .map(|s| ConfigError {
                tag: None,
                key: s.key.clone(),
                message: unknown_key(&s.key, &["decimals"]),
            })
            .collect();
        if !errors.is_empty() {
            return Err(errors);
        }
        let linear = tags.iter().map(|t| (t.factor, t.offset)).collect();
        Ok(Processor::new(ShiftedScale { linear }))
    }

    fn process(&self, mut input: Batch) -> Batch {
        for sample in &mut input.samples {
            if sample.quality == Quality::Bad {
                continue;
            }
            let Some(&(factor, offset)) = self.linear.get(sample.tag as usize) else {
                continue;
            };
            let raw = match sample.value {
                Value::Int(v) => v as f64,
                Value::Uint(v) => v as f64,
                Value::Float(v) => v,
                _ => continue,
            };
            sample.value = Value::Float(raw * factor + offset + SHIFT);
        }
        input
    }

    fn reset(&self) {}
}

export!(Component);
