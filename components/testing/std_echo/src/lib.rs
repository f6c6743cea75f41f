//! Test stage `std_echo`: built with the standard library (no `sluice-guest`), so
//! it imports the WASI interfaces a `std` build brings, which the engine grants
//! none of. Returns its input; with setting `print` true it writes to stdout in
//! `process`, a WASI call that must trap.

wit_bindgen::generate!({ world: "stage", path: "../../../wit" });

use exports::sluice::dataflow::transform::{Guest, GuestProcessor, Processor};
use sluice::dataflow::types::{Batch, ConfigError, Setting, SettingValue, TagSpec};

struct Component;

impl Guest for Component {
    type Processor = Echo;
}

struct Echo {
    print: bool,
}

impl GuestProcessor for Echo {
    fn create(settings: Vec<Setting>, _tags: Vec<TagSpec>) -> Result<Processor, Vec<ConfigError>> {
        let mut print = false;
        let mut errors = Vec::new();
        for setting in settings {
            match (setting.key.as_str(), setting.value) {
                ("print", SettingValue::Boolean(on)) => print = on,
                (key, _) => errors.push(ConfigError {
                    tag: None,
                    key: key.to_owned(),
                    message: format!("`{key}`: the only setting is `print` (a boolean)"),
                }),
            }
        }
        if errors.is_empty() {
            Ok(Processor::new(Echo { print }))
        } else {
            Err(errors)
        }
    }

    fn process(&self, input: Batch) -> Batch {
        if self.print {
            println!("{} samples", input.tags.len());
        }
        input
    }

    fn reset(&self) {}
}

export!(Component);
