//! The configuration and pipeline readers: a document is read or refused with
//! every problem at a position, each saying what is wrong.

use std::path::Path;
use std::sync::OnceLock;

use sluice::model::Protocols;
use sluice::runtime::{Registry, Runtime, RuntimeConfig};

use sluice::yaml::Diagnostics;

/// Text as the readers get it: a file that is not UTF-8 never reaches them.
fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// A document refused with at least one problem, each saying what is wrong
/// (FUZZ-5).
pub(crate) fn check_refusal(what: &str, errors: &Diagnostics) {
    assert!(!errors.is_empty(), "{what} refused without a problem");
    for item in errors.items() {
        assert!(
            !item.message.trim().is_empty(),
            "{what}: a problem without a message"
        );
    }
}

/// The protocols of the built-in codecs, asked of them once per process.
pub(crate) fn protocols() -> &'static Protocols {
    static PROTOCOLS: OnceLock<Protocols> = OnceLock::new();
    PROTOCOLS.get_or_init(|| {
        let runtime = Runtime::new(RuntimeConfig::default()).expect("a runtime");
        Registry::with_builtins(runtime)
            .expect("the built-in components")
            .protocols()
    })
}

/// Asks the built-in codecs for their protocols, once per process.
pub(crate) fn prepare() {
    protocols();
}

/// `sluice.yaml`: the gateway's configuration (devices, channels, tags, ...).
pub fn device_config(data: &[u8]) {
    let Some(text) = text(data) else { return };
    if let Err(errors) = sluice::config::load_str("fuzz.yaml", text, protocols()) {
        check_refusal("the configuration", &errors);
    }
}

/// A pipeline file. The reader only joins component paths to the base
/// directory; it opens no file.
pub fn pipeline(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let base = Path::new("pipelines");
    if let Err(errors) = sluice::pipeline::load_str("fuzz.yaml", text, "fuzz", base) {
        check_refusal("the pipeline", &errors);
    }
}
