//! `check_range`: a GOOD numeric value outside its tag's valid range (the tag's
//! `min` and `max`, either optional) becomes UNCERTAIN; the value is kept so
//! consumers still see what the device said; an array is UNCERTAIN when one of its
//! elements is outside. Tags without a range pass. No settings.

use alloc::vec::Vec;

use super::{Issue, Settings, Stage, Tag, no_settings};
use crate::columns::{Columns, quality};

pub struct CheckRange {
    /// (min, max) per tag, infinite when not set; empty when no tag has a range.
    ranges: Vec<(f64, f64)>,
}

fn tag_range(tag: &Tag<'_>) -> Result<(f64, f64), &'static str> {
    let mut range = (f64::NEG_INFINITY, f64::INFINITY);
    for (key, value) in &tag.settings {
        let bound = match *key {
            "min" => &mut range.0,
            "max" => &mut range.1,
            _ => continue,
        };
        *bound = value.as_f64().ok_or("`min` and `max` must be numbers")?;
    }
    if range.0 > range.1 {
        return Err("`min` is above `max`");
    }
    Ok(range)
}

impl Stage for CheckRange {
    fn create(settings: &Settings<'_>, tags: &[Tag<'_>]) -> Result<Self, Vec<Issue>> {
        let mut issues = no_settings(settings);
        let mut ranges = Vec::with_capacity(tags.len());
        for (index, tag) in tags.iter().enumerate() {
            match tag_range(tag) {
                Ok(range) => ranges.push(range),
                Err(message) => issues.push(Issue::new(Some(index as u32), "min", message.into())),
            }
        }
        let unbounded = (f64::NEG_INFINITY, f64::INFINITY);
        if !ranges.iter().any(|range| *range != unbounded) {
            ranges = Vec::new();
        }
        if issues.is_empty() {
            Ok(Self { ranges })
        } else {
            Err(issues)
        }
    }

    fn process(&self, batch: &mut Columns) {
        if self.ranges.is_empty() {
            return;
        }
        for i in 0..batch.len() {
            if batch.qualities[i] != quality::GOOD {
                continue;
            }
            let Some(&(min, max)) = self.ranges.get(batch.tags[i] as usize) else {
                continue;
            };
            let outside = |value: Option<f64>| value.is_some_and(|v| !(min..=max).contains(&v));
            let out_of_range = match batch.array_range(i) {
                Some(elements) => elements
                    .into_iter()
                    .any(|e| outside(batch.element(e).as_f64())),
                None => outside(batch.cell(i).as_f64()),
            };
            if out_of_range {
                batch.qualities[i] = quality::UNCERTAIN;
            }
        }
    }
}
