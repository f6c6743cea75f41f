//! Stage `decode`: turns each raw big-endian value into a typed value by the tag's
//! `dataType` (BOOL, INT16, UINT16, INT32, UINT32, INT64, UINT64, FLOAT32, FLOAT64,
//! BCD16, BCD32, STRING). An invalid BCD digit, a NaN or infinite float, or too few
//! bytes make the sample BAD with no value. Values already typed (bits a codec
//! decoded itself) pass through. No settings.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::vec::Vec;
use sluice_guest::numeric::{DataType, decode};
use sluice_guest::settings::unknown_key;

#[cfg(not(test))]
sluice_guest::guest_runtime!();

wit_bindgen::generate!({ world: "stage", path: "../../../wit" });

use exports::sluice::dataflow::transform::{Guest, GuestProcessor, Processor};
use sluice::dataflow::types::{Batch, ConfigError, Quality, Setting, TagSpec, Value};

struct Component;

impl Guest for Component {
    type Processor = Decode;
}

struct Decode {
    types: Vec<DataType>,
}

impl GuestProcessor for Decode {
    fn create(settings: Vec<Setting>, tags: Vec<TagSpec>) -> Result<Processor, Vec<ConfigError>> {
        if !settings.is_empty() {
            return Err(settings
                .iter()
                .map(|s| config_error(None, &s.key, unknown_key(&s.key, &[])))
                .collect());
        }
        let types = tags.iter().map(tag_data_type).collect();
        Ok(Processor::new(Decode { types }))
    }

    fn process(&self, mut input: Batch) -> Batch {
        for sample in &mut input.samples {
            let Value::Raw(span) = sample.value else {
                continue;
            };
            let start = span.start as usize;
            let bytes = start
                .checked_add(span.len as usize)
                .and_then(|end| input.bytes.get(start..end));
            let decoded = match (bytes, self.types.get(sample.tag as usize)) {
                (Some(bytes), Some(&data_type)) => decode(data_type, bytes).ok(),
                _ => None,
            };
            match decoded {
                Some(number) => sample.value = number_to_value(number),
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
