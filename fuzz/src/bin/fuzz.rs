//! The libFuzzer driver of one target, named by `SLUICE_FUZZ_TARGET` (see
//! `cargo xtask fuzz`).
#![no_main]

use std::sync::OnceLock;

static TARGET: OnceLock<&'static sluice_fuzz::Target> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let target = TARGET.get_or_init(|| {
        let name = std::env::var("SLUICE_FUZZ_TARGET").unwrap_or_default();
        sluice_fuzz::target(&name).unwrap_or_else(|| {
            let names: Vec<&str> = sluice_fuzz::TARGETS.iter().map(|t| t.name).collect();
            panic!("SLUICE_FUZZ_TARGET={name:?}: one of {names:?}")
        })
    });
    target.run(data);
});
