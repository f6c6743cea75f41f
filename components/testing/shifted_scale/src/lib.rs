//! Test stage `shifted_scale`: what `scale` does (raw x factor + offset), plus a
//! shift of 1000, so a test sees at once which version of a stage ran. Takes the
//! `decimals` setting of `scale` (and ignores it), so it can replace `scale` in a
//! pipeline without a change to the pipeline's file. Written as a custom stage
//! is: a `Stage` over the batch's columns, glued by `stage_component!`.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::vec::Vec;
use sluice_guest::columns::{Columns, quality};
use sluice_guest::settings::unknown_key;
use sluice_guest::stages::{Issue, Settings, Stage, Tag};

/// What this version adds to every value.
const SHIFT: f64 = 1000.0;

struct ShiftedScale {
    linear: Vec<(f64, f64)>,
}

impl Stage for ShiftedScale {
    fn create(settings: &Settings<'_>, tags: &[Tag<'_>]) -> Result<Self, Vec<Issue>> {
        let issues: Vec<Issue> = settings
            .iter()
            .filter(|(key, _)| *key != "decimals")
            .map(|(key, _)| Issue::new(None, key, unknown_key(key, &["decimals"])))
            .collect();
        if !issues.is_empty() {
            return Err(issues);
        }
        let linear = tags.iter().map(|t| (t.factor, t.offset)).collect();
        Ok(ShiftedScale { linear })
    }

    fn process(&self, batch: &mut Columns) {
        for i in 0..batch.len() {
            if batch.qualities[i] == quality::BAD {
                continue;
            }
            let Some(&(factor, offset)) = self.linear.get(batch.tags[i] as usize) else {
                continue;
            };
            if let Some(raw) = batch.cell(i).as_f64() {
                batch.set_float(i, raw * factor + offset + SHIFT);
            }
        }
    }
}

sluice_guest::stage_component!(ShiftedScale);
