//! The WIT glue of a stage crate, written once: [`stage_component!`].

/// Generates, in a stage crate's root, the bindings of the WIT `stage` world
/// exported for `$stage` (a [`Stage`](crate::stages::Stage)), the guest runtime
/// (outside tests) and the conversions of [`wit_conversions!`](crate::wit_conversions).
/// Invoke once, after `extern crate alloc;`. The WIT is read from `$wit`, a path
/// from the crate's folder: the repository's `wit/` when none is given.
#[macro_export]
macro_rules! stage_component {
    ($stage:ty) => {
        $crate::stage_component!($stage, "../../../wit");
    };
    ($stage:ty, $wit:tt) => {
        #[cfg(not(test))]
        $crate::guest_runtime!();

        wit_bindgen::generate!({ world: "stage", path: $wit });

        use exports::sluice::dataflow::transform::{Guest, GuestProcessor, Processor};
        use sluice::dataflow::types::{Batch, ConfigError, Setting, TagSpec};

        struct Component;

        impl Guest for Component {
            type Processor = StageProcessor;
        }

        /// The stage behind the WIT resource.
        struct StageProcessor($stage);

        impl GuestProcessor for StageProcessor {
            fn create(
                settings: alloc::vec::Vec<Setting>,
                tags: alloc::vec::Vec<TagSpec>,
            ) -> Result<Processor, alloc::vec::Vec<ConfigError>> {
                use $crate::stages::Stage as _;
                let tags: alloc::vec::Vec<_> = tags.iter().map(stage_tag).collect();
                <$stage>::create(&stage_settings(&settings), &tags)
                    .map(|stage| Processor::new(StageProcessor(stage)))
                    .map_err(config_errors)
            }

            fn process(&self, input: Batch) -> Batch {
                process_batch(&self.0, input)
            }

            fn reset(&self) {
                use $crate::stages::Stage as _;
                self.0.reset()
            }
        }

        $crate::wit_conversions!();

        export!(Component);
    };
}
