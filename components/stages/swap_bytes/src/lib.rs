//! Stage `swap_bytes`: rearranges each raw value from the tag's byte order
//! (ABCD, BADC, CDAB, DCBA) to big-endian, so `decode` reads every value the same way.
//!
//! 32-bit values follow the order's name; 64-bit values apply it to four registers
//! (CDAB reverses the register order, BADC swaps the bytes inside each register,
//! DCBA does both); 16-bit values and strings only take the byte swap (BADC, DCBA).
//! Values that are not raw bytes pass through. No settings.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::vec::Vec;
use sluice_guest::numeric::{ByteOrder, DataType, reorder_for};
use sluice_guest::settings::unknown_key;

#[cfg(not(test))]
sluice_guest::guest_runtime!();

wit_bindgen::generate!({ world: "stage", path: "../../../wit" });

use exports::sluice::dataflow::transform::{Guest, GuestProcessor, Processor};
use sluice::dataflow::types::{Batch, ConfigError, Setting, TagSpec, Value};

struct Component;

impl Guest for Component {
    type Processor = SwapBytes;
}

struct SwapBytes {
    tags: Vec<(DataType, ByteOrder)>,
}

impl GuestProcessor for SwapBytes {
    fn create(settings: Vec<Setting>, tags: Vec<TagSpec>) -> Result<Processor, Vec<ConfigError>> {
        if !settings.is_empty() {
            return Err(settings
                .iter()
                .map(|s| config_error(None, &s.key, unknown_key(&s.key, &[])))
                .collect());
        }
        let tags = tags
            .iter()
            .map(|t| (tag_data_type(t), tag_byte_order(t)))
            .collect();
        Ok(Processor::new(SwapBytes { tags }))
    }

    fn process(&self, mut input: Batch) -> Batch {
        for sample in &input.samples {
            let (Value::Raw(span), Some(&(data_type, order))) =
                (&sample.value, self.tags.get(sample.tag as usize))
            else {
                continue;
            };
            let start = span.start as usize;
            let Some(bytes) = start
                .checked_add(span.len as usize)
                .and_then(|end| input.bytes.get_mut(start..end))
            else {
                continue;
            };
            reorder_for(bytes, data_type, order);
        }
        input
    }

    fn reset(&self) {}
}

sluice_guest::wit_conversions!();

export!(Component);
