//! `scale`: engineering value = raw x factor + offset, per tag.
//!
//! Integers pass through unchanged when their tag has factor 1 and offset 0, so a
//! counter stays an exact integer. Any other numeric value becomes a float; a
//! result that is not finite makes the sample BAD. An array's elements are
//! scaled each so (one that is not finite makes the whole sample BAD). Booleans,
//! text and undecoded bytes pass through untouched.
//!
//! Settings: `decimals` (optional, 0-12): round results to that many decimals,
//! which hides binary noise such as `0.1 x 123 = 12.300000000000001`.

use alloc::format;
use alloc::vec::Vec;

use super::{Issue, Settings, Stage, Tag};
use crate::columns::{Cell, Columns, quality};
use crate::settings::{unknown_key, wrong_type};

/// Largest `decimals` accepted: beyond it f64 has no digits left to round.
const MAX_DECIMALS: u32 = 12;

pub struct Scale {
    /// (factor, offset) per tag index; empty when every tag has factor 1 and
    /// offset 0.
    linear: Vec<(f64, f64)>,
    /// 10^decimals when rounding is on.
    rounding: Option<f64>,
}

/// Rounds half away from zero; values too large for i64 have no fraction left.
fn round_to(value: f64, scale: f64) -> f64 {
    let scaled = value * scale;
    if scaled.is_nan() || scaled.abs() >= 9.0e18 {
        return value;
    }
    let nudged = if scaled >= 0.0 {
        scaled + 0.5
    } else {
        scaled - 0.5
    };
    (nudged as i64) as f64 / scale
}

impl Scale {
    /// `raw x factor + offset`, rounded when the stage rounds.
    fn linear(&self, raw: f64, factor: f64, offset: f64) -> f64 {
        let scaled = raw * factor + offset;
        match self.rounding {
            Some(scale) => round_to(scaled, scale),
            None => scaled,
        }
    }

    /// The scaled value of an array element; `None` for one that stays as it
    /// is (a boolean, or an integer under factor 1 and offset 0).
    fn scaled(&self, element: Cell<'_>, factor: f64, offset: f64) -> Option<f64> {
        let identity = factor == 1.0 && offset == 0.0;
        match element {
            Cell::Int(_) | Cell::Uint(_) if identity => None,
            Cell::Int(_) | Cell::Uint(_) | Cell::Float(_) => {
                Some(self.linear(element.as_f64()?, factor, offset))
            }
            _ => None,
        }
    }
}

impl Stage for Scale {
    fn create(settings: &Settings<'_>, tags: &[Tag<'_>]) -> Result<Self, Vec<Issue>> {
        let mut issues = Vec::new();
        let mut rounding = None;
        for (key, value) in settings {
            match *key {
                "decimals" => match value.as_u32() {
                    Some(d) if d <= MAX_DECIMALS => {
                        rounding = Some((0..d).fold(1.0, |acc, _| acc * 10.0))
                    }
                    Some(d) => issues.push(Issue::new(
                        None,
                        key,
                        format!("setting `decimals` must be from 0 to {MAX_DECIMALS}, got {d}"),
                    )),
                    None => issues.push(Issue::new(
                        None,
                        key,
                        wrong_type(key, "an integer from 0 to 12", value),
                    )),
                },
                other => issues.push(Issue::new(None, other, unknown_key(other, &["decimals"]))),
            }
        }
        for (index, tag) in tags.iter().enumerate() {
            if !tag.factor.is_finite() || !tag.offset.is_finite() {
                issues.push(Issue::new(
                    Some(index as u32),
                    "factor",
                    "factor and offset must be finite numbers".into(),
                ));
            }
        }
        if !issues.is_empty() {
            return Err(issues);
        }
        let linear = if tags.iter().all(|t| t.factor == 1.0 && t.offset == 0.0) {
            Vec::new()
        } else {
            tags.iter().map(|t| (t.factor, t.offset)).collect()
        };
        Ok(Self { linear, rounding })
    }

    fn process(&self, batch: &mut Columns) {
        for i in 0..batch.len() {
            if batch.qualities[i] == quality::BAD {
                continue;
            }
            let (factor, offset) = if self.linear.is_empty() {
                (1.0, 0.0)
            } else if let Some(&linear) = self.linear.get(batch.tags[i] as usize) {
                linear
            } else {
                continue;
            };
            let identity = factor == 1.0 && offset == 0.0;
            if let Some(elements) = batch.array_range(i) {
                let mut finite = true;
                for e in elements {
                    if let Some(scaled) = self.scaled(batch.element(e), factor, offset) {
                        finite &= scaled.is_finite();
                        batch.set_element_float(e, scaled);
                    }
                }
                if !finite {
                    batch.set_bad(i);
                }
                continue;
            }
            let raw = match batch.cell(i) {
                Cell::Int(_) | Cell::Uint(_) if identity => continue,
                Cell::Int(v) => v as f64,
                Cell::Uint(v) => v as f64,
                Cell::Float(v) => v,
                _ => continue,
            };
            let scaled = self.linear(raw, factor, offset);
            if scaled.is_finite() {
                batch.set_float(i, scaled);
            } else {
                batch.set_bad(i);
            }
        }
    }
}
