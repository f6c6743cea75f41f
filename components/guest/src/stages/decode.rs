//! `decode`: turns each raw big-endian value into a typed value by the tag's
//! `dataType` (BOOL, INT16, UINT16, INT32, UINT32, INT64, UINT64, FLOAT32, FLOAT64,
//! BCD16, BCD32, STRING). An invalid BCD digit, a NaN or infinite float, or too few
//! bytes make the sample BAD with no value. An array tag's bytes become an array
//! of its elements, each decoded so; one element that does not decode makes the
//! whole sample BAD. Values already typed (bits a codec decoded itself) pass
//! through. No settings.

use alloc::vec::Vec;

use super::{Issue, Settings, Stage, Tag, no_settings};
use crate::columns::Columns;
use crate::numeric::{DataType, decode, decode_each};

pub struct Decode {
    /// Type and array length (if an array) per tag.
    types: Vec<(DataType, Option<u32>)>,
}

impl Stage for Decode {
    fn create(settings: &Settings<'_>, tags: &[Tag<'_>]) -> Result<Self, Vec<Issue>> {
        let issues = no_settings(settings);
        if !issues.is_empty() {
            return Err(issues);
        }
        Ok(Self {
            types: tags.iter().map(|t| (t.data_type, t.array_len)).collect(),
        })
    }

    fn process(&self, batch: &mut Columns) {
        for i in 0..batch.len() {
            if batch.kinds[i] != crate::columns::kind::RAW {
                continue;
            }
            let (Some(range), Some(&(data_type, array_len))) =
                (batch.raw_range(i), self.types.get(batch.tags[i] as usize))
            else {
                batch.set_bad(i);
                continue;
            };
            let bytes = &batch.bytes[range];
            match array_len {
                Some(count) => match decode_each(data_type, bytes, count) {
                    Ok(numbers) => batch.set_array(i, numbers),
                    Err(_) => batch.set_bad(i),
                },
                None => match decode(data_type, bytes) {
                    Ok(number) => batch.set_number(i, number),
                    Err(_) => batch.set_bad(i),
                },
            }
        }
    }
}
