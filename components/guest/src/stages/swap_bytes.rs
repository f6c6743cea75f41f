//! `swap_bytes`: rearranges each raw value from the tag's byte order (ABCD, BADC,
//! CDAB, DCBA) to big-endian, so `decode` reads every value the same way.
//!
//! 32-bit values follow the order's name; 64-bit values apply it to four registers
//! (CDAB reverses the register order, BADC swaps the bytes inside each register,
//! DCBA does both); 16-bit values and strings only take the byte swap (BADC, DCBA).
//! Each element of an array tag is rearranged as a single value would be.
//! Values that are not raw bytes pass through. No settings.

use alloc::vec::Vec;

use super::{Issue, Settings, Stage, Tag, no_settings};
use crate::columns::Columns;
use crate::numeric::{ByteOrder, DataType, reorder_each, reorder_for};

pub struct SwapBytes {
    /// Type, order and whether the tag is an array, per tag.
    tags: Vec<(DataType, ByteOrder, bool)>,
    /// Whether any tag is in another order than big-endian (ABCD).
    any: bool,
}

impl Stage for SwapBytes {
    fn create(settings: &Settings<'_>, tags: &[Tag<'_>]) -> Result<Self, Vec<Issue>> {
        let issues = no_settings(settings);
        if !issues.is_empty() {
            return Err(issues);
        }
        let tags: Vec<_> = tags
            .iter()
            .map(|t| (t.data_type, t.byte_order, t.array_len.is_some()))
            .collect();
        let any = tags
            .iter()
            .any(|(_, order, _)| !matches!(order, ByteOrder::Abcd));
        Ok(Self { tags, any })
    }

    fn process(&self, batch: &mut Columns) {
        if !self.any {
            return;
        }
        for i in 0..batch.len() {
            let Some(&(data_type, order, array)) = self.tags.get(batch.tags[i] as usize) else {
                continue;
            };
            if matches!(order, ByteOrder::Abcd) {
                continue;
            }
            if let Some(range) = batch.raw_range(i) {
                let bytes = &mut batch.bytes[range];
                if array {
                    reorder_each(bytes, data_type, order);
                } else {
                    reorder_for(bytes, data_type, order);
                }
            }
        }
    }
}
