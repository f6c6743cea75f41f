//! Stage `deadband`: drops a numeric sample whose value moved less than its tag's
//! `deadband` since the last value that passed, with the same quality. A tag with
//! deadband 0 always passes, as do booleans, text and BAD samples (a BAD sample
//! also forgets the last value, so the first good value after it is published).
//! `reset` (after a reconnect) forgets every last value. No settings.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::vec::Vec;
use core::cell::RefCell;
use sluice_guest::settings::unknown_key;

#[cfg(not(test))]
sluice_guest::guest_runtime!();

wit_bindgen::generate!({ world: "stage", path: "../../../wit" });

use exports::sluice::dataflow::transform::{Guest, GuestProcessor, Processor};
use sluice::dataflow::types::{Batch, ConfigError, Quality, Setting, TagSpec, Value};

struct Component;

impl Guest for Component {
    type Processor = Deadband;
}

struct Deadband {
    bands: Vec<f64>,
    /// Last value passed per tag, with its quality.
    last: RefCell<Vec<Option<(f64, Quality)>>>,
}

fn numeric(value: &Value) -> Option<f64> {
    match *value {
        Value::Int(v) => Some(v as f64),
        Value::Uint(v) => Some(v as f64),
        Value::Float(v) => Some(v),
        _ => None,
    }
}

impl GuestProcessor for Deadband {
    fn create(settings: Vec<Setting>, tags: Vec<TagSpec>) -> Result<Processor, Vec<ConfigError>> {
        let mut errors: Vec<ConfigError> = settings
            .iter()
            .map(|s| config_error(None, &s.key, unknown_key(&s.key, &[])))
            .collect();
        for (index, tag) in tags.iter().enumerate() {
            if tag.deadband.is_nan() || tag.deadband < 0.0 {
                errors.push(config_error(
                    Some(index as u32),
                    "deadband",
                    "deadband must be a number >= 0".into(),
                ));
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Processor::new(Deadband {
            bands: tags.iter().map(|t| t.deadband).collect(),
            last: RefCell::new(alloc::vec![None; tags.len()]),
        }))
    }

    fn process(&self, mut input: Batch) -> Batch {
        let mut last = self.last.borrow_mut();
        input.samples.retain(|sample| {
            let index = sample.tag as usize;
            let (Some(&band), Some(slot)) = (self.bands.get(index), last.get_mut(index)) else {
                return true;
            };
            if sample.quality == Quality::Bad {
                *slot = None;
                return true;
            }
            let Some(value) = numeric(&sample.value) else {
                return true;
            };
            if band > 0.0
                && let Some((previous, quality)) = *slot
                && quality == sample.quality
                && (value - previous).abs() < band
            {
                return false;
            }
            *slot = Some((value, sample.quality));
            true
        });
        drop(last);
        input
    }

    fn reset(&self) {
        self.last
            .borrow_mut()
            .iter_mut()
            .for_each(|slot| *slot = None);
    }
}

sluice_guest::wit_conversions!();

export!(Component);
