//! `chain_socket`: the built-in stages of `chain` with one stage plugged in from
//! outside, through the imported `transform`. The engine composes an operator's
//! stage into that import when a pipeline has built-in stages beside it, so the
//! whole run is one call from the engine and the plugged stage one call inside
//! the composition; the plugged stage keeps its own instance and memory.
//!
//! Settings are those of `chain` (`N.use`, `N.KEY`) plus `plug`, the position of
//! the plugged stage; its `N.KEY` settings go to it with the prefix taken off, and
//! its issues come back with the prefix put on.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::format;
use alloc::vec::Vec;

use sluice_guest::columns::{Columns, kind};
use sluice_guest::stages::{Chain, Plug, Stage as _};

#[cfg(not(test))]
sluice_guest::guest_runtime!();

wit_bindgen::generate!({ world: "stage-socket", path: "../../../wit" });

use exports::sluice::dataflow::transform::{Guest, GuestProcessor, Processor};
use sluice::dataflow::transform::Processor as Plugged;
use sluice::dataflow::types::{Batch, ConfigError, Setting, SettingValue, TagSpec};

/// The setting naming the plugged stage's position.
const PLUG: &str = "plug";

struct Component;

impl Guest for Component {
    type Processor = Socket;
}

struct Socket(Chain<Imported>);

/// The plugged stage's processor, called through the import.
struct Imported(Plugged);

impl Plug for Imported {
    fn process(&self, batch: &mut Columns) {
        let mut input = core::mem::take(batch);
        // The call copies every list element by element: bytes no sample points
        // into (none once `decode` has run) stay behind.
        if !input.kinds.contains(&kind::RAW) {
            input.bytes = Vec::new();
        }
        *batch = columns_from_batch(self.0.process(&columns_into_batch(input)));
    }

    fn reset(&self) {
        self.0.reset();
    }
}

impl GuestProcessor for Socket {
    fn create(settings: Vec<Setting>, tags: Vec<TagSpec>) -> Result<Processor, Vec<ConfigError>> {
        let at = settings
            .iter()
            .find(|s| s.key == PLUG)
            .and_then(|s| match s.value {
                SettingValue::Int(at) => usize::try_from(at).ok(),
                _ => None,
            })
            .ok_or_else(|| {
                Vec::from([config_error(
                    None,
                    PLUG,
                    "`plug` must be the position of the plugged stage (an integer >= 0)".into(),
                )])
            })?;
        let prefix = format!("{at}.");
        let own: Vec<Setting> = settings
            .iter()
            .filter_map(|s| {
                let key = s.key.strip_prefix(&prefix).filter(|key| *key != "use")?;
                Some(Setting {
                    key: key.into(),
                    value: s.value.clone(),
                })
            })
            .collect();
        let plugged = Plugged::create(&own, &tags).map_err(|errors| {
            errors
                .into_iter()
                .map(|e| ConfigError {
                    key: format!("{prefix}{}", e.key),
                    ..e
                })
                .collect::<Vec<_>>()
        })?;
        let mut chain_settings = stage_settings(&settings);
        chain_settings.retain(|(key, _)| *key != PLUG);
        let stage_tags: Vec<_> = tags.iter().map(stage_tag).collect();
        Chain::with_plug(&chain_settings, &stage_tags, Some((at, Imported(plugged))))
            .map(|chain| Processor::new(Socket(chain)))
            .map_err(config_errors)
    }

    fn process(&self, input: Batch) -> Batch {
        process_batch(&self.0, input)
    }

    fn reset(&self) {
        self.0.reset();
    }
}

sluice_guest::wit_conversions!();

export!(Component);
