//! `deadband`: drops a numeric sample whose value moved less than its tag's
//! `deadband` since the last value that passed, with the same quality. A tag with
//! deadband 0 always passes, as do booleans, text and BAD samples (a BAD sample
//! also forgets the last value, so the first good value after it is published).
//! `reset` (after a reconnect) forgets every last value. No settings.

use alloc::vec::Vec;
use core::cell::RefCell;

use super::{Issue, Settings, Stage, Tag, no_settings};
use crate::columns::{Columns, quality};

pub struct Deadband {
    bands: Vec<f64>,
    /// Whether any tag has a band: with none, every value passes and nothing
    /// remembered is ever read.
    any: bool,
    /// Last value passed per tag, with its quality.
    last: RefCell<Vec<Option<(f64, u8)>>>,
}

impl Stage for Deadband {
    fn create(settings: &Settings<'_>, tags: &[Tag<'_>]) -> Result<Self, Vec<Issue>> {
        let mut issues = no_settings(settings);
        for (index, tag) in tags.iter().enumerate() {
            if tag.deadband.is_nan() || tag.deadband < 0.0 {
                issues.push(Issue::new(
                    Some(index as u32),
                    "deadband",
                    "deadband must be a number >= 0".into(),
                ));
            }
        }
        if !issues.is_empty() {
            return Err(issues);
        }
        Ok(Self {
            bands: tags.iter().map(|t| t.deadband).collect(),
            any: tags.iter().any(|t| t.deadband > 0.0),
            last: RefCell::new(alloc::vec![None; tags.len()]),
        })
    }

    fn process(&self, batch: &mut Columns) {
        if !self.any {
            return;
        }
        let mut last = self.last.borrow_mut();
        batch.retain(|batch, i| {
            let index = batch.tags[i] as usize;
            let (Some(&band), Some(slot)) = (self.bands.get(index), last.get_mut(index)) else {
                return true;
            };
            let this = batch.qualities[i];
            if this == quality::BAD {
                *slot = None;
                return true;
            }
            let Some(value) = batch.cell(i).as_f64() else {
                return true;
            };
            if band > 0.0
                && let Some((previous, was)) = *slot
                && was == this
                && (value - previous).abs() < band
            {
                return false;
            }
            *slot = Some((value, this));
            true
        });
    }

    fn reset(&self) {
        self.last
            .borrow_mut()
            .iter_mut()
            .for_each(|slot| *slot = None);
    }
}
