//! A custom pipeline stage: adds the setting `add` to every good value.
//!
//! A stage sees a round's samples as the columns of a batch (tag, value,
//! quality, time) and changes them in place. `create` checks the stage's
//! settings and the device's tags once; `process` runs for every batch.
//!
//! Build: `cargo build --release --target wasm32-wasip2`; check:
//! `sluice component check target/wasm32-wasip2/release/NAME.wasm`; upload:
//! `PUT /components/NAME/VERSION?kind=stage` (README.md of this crate).
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::format;
use alloc::vec::Vec;
use sluice_guest::columns::{Columns, quality};
use sluice_guest::settings::unknown_key;
use sluice_guest::stages::{Issue, Settings, Stage, Tag};

/// The stage and what `create` made of its settings.
struct AddConstant {
    add: f64,
}

impl Stage for AddConstant {
    fn create(settings: &Settings<'_>, _tags: &[Tag<'_>]) -> Result<Self, Vec<Issue>> {
        let mut add = 0.0;
        let mut issues = Vec::new();
        for (key, value) in settings {
            match (*key, value.as_f64()) {
                ("add", Some(number)) if number.is_finite() => add = number,
                ("add", _) => issues.push(Issue::new(
                    None,
                    key,
                    format!("`add` is a finite number, not {}", value.kind()),
                )),
                _ => issues.push(Issue::new(None, key, unknown_key(key, &["add"]))),
            }
        }
        if issues.is_empty() {
            Ok(AddConstant { add })
        } else {
            Err(issues)
        }
    }

    fn process(&self, batch: &mut Columns) {
        for i in 0..batch.len() {
            if batch.qualities[i] == quality::BAD {
                continue;
            }
            if let Some(value) = batch.cell(i).as_f64() {
                batch.set_float(i, value + self.add);
            }
        }
    }
}

sluice_guest::stage_component!(AddConstant);
