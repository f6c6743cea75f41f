//! `deadband`: drops a numeric sample whose value moved less than its tag's
//! `deadband` since the last value that passed, with the same quality. A tag with
//! deadband 0 always passes, as do booleans, text and BAD samples (a BAD sample
//! also forgets the last value, so the first good value after it is published).
//! An array of numbers is dropped only when every element moved less than the
//! band (and it has as many elements as the last); an array holding a boolean
//! always passes.
//! `reset` (after a reconnect) forgets every last value. No settings.

use alloc::vec::Vec;
use core::cell::RefCell;

use super::{Issue, Settings, Stage, Tag, no_settings};
use crate::columns::{Columns, quality};

pub struct Deadband {
    /// Band per tag; empty when no tag has one (every value passes).
    bands: Vec<f64>,
    /// Last value passed per tag, with its quality; empty with `bands`.
    last: RefCell<Vec<Option<(Last, u8)>>>,
}

/// The last value that passed: a number, or an array's elements.
#[derive(Debug, Clone, PartialEq)]
enum Last {
    Number(f64),
    Array(Vec<f64>),
}

impl Last {
    /// Whether `self` is within `band` of `previous`.
    fn within(&self, previous: &Last, band: f64) -> bool {
        match (self, previous) {
            (Last::Number(now), Last::Number(was)) => (now - was).abs() < band,
            (Last::Array(now), Last::Array(was)) => {
                now.len() == was.len() && now.iter().zip(was).all(|(a, b)| (a - b).abs() < band)
            }
            _ => false,
        }
    }
}

/// The value of sample `i` as the band compares it; `None` when it is not
/// numbers (it always passes).
fn compared(batch: &Columns, i: usize) -> Option<Last> {
    match batch.array_range(i) {
        Some(elements) => elements
            .map(|e| match batch.element(e) {
                crate::columns::Cell::Boolean(_) => None,
                element => element.as_f64(),
            })
            .collect::<Option<Vec<f64>>>()
            .map(Last::Array),
        None => batch.cell(i).as_f64().map(Last::Number),
    }
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
        // A session lives as long as its device: a fleet without bands keeps
        // nothing per tag here.
        if !tags.iter().any(|t| t.deadband > 0.0) {
            return Ok(Self {
                bands: Vec::new(),
                last: RefCell::new(Vec::new()),
            });
        }
        Ok(Self {
            bands: tags.iter().map(|t| t.deadband).collect(),
            last: RefCell::new(alloc::vec![None; tags.len()]),
        })
    }

    fn process(&self, batch: &mut Columns) {
        if self.bands.is_empty() {
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
            let Some(value) = compared(batch, i) else {
                return true;
            };
            if band > 0.0
                && let Some((previous, was)) = slot.as_ref()
                && *was == this
                && value.within(previous, band)
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
