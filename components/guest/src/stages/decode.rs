//! `decode`: turns each raw big-endian value into a typed value by the tag's
//! `dataType` (BOOL, INT16, UINT16, INT32, UINT32, INT64, UINT64, FLOAT32, FLOAT64,
//! BCD16, BCD32, STRING). An invalid BCD digit, a NaN or infinite float, or too few
//! bytes make the sample BAD with no value. Values already typed (bits a codec
//! decoded itself) pass through. No settings.

use alloc::vec::Vec;

use super::{Issue, Settings, Stage, Tag, no_settings};
use crate::columns::Columns;
use crate::numeric::{DataType, decode};

pub struct Decode {
    types: Vec<DataType>,
}

impl Stage for Decode {
    fn create(settings: &Settings<'_>, tags: &[Tag<'_>]) -> Result<Self, Vec<Issue>> {
        let issues = no_settings(settings);
        if !issues.is_empty() {
            return Err(issues);
        }
        Ok(Self {
            types: tags.iter().map(|t| t.data_type).collect(),
        })
    }

    fn process(&self, batch: &mut Columns) {
        for i in 0..batch.len() {
            if batch.kinds[i] != crate::columns::kind::RAW {
                continue;
            }
            let decoded = match (batch.raw_range(i), self.types.get(batch.tags[i] as usize)) {
                (Some(range), Some(&data_type)) => decode(data_type, &batch.bytes[range]).ok(),
                _ => None,
            };
            match decoded {
                Some(number) => batch.set_number(i, number),
                None => batch.set_bad(i),
            }
        }
    }
}
