//! The default components, built from `components/` for wasm32-wasip2 by the build
//! script and embedded in the binary, so a gateway needs one file.

use super::ComponentKind;

/// A component compiled into the engine binary.
#[derive(Debug)]
pub struct Builtin {
    pub name: &'static str,
    pub kind: ComponentKind,
    pub wasm: &'static [u8],
}

/// Version under which built-in components are registered.
pub const BUILTIN_VERSION: &str = concat!("builtin-", env!("CARGO_PKG_VERSION"));

include!(concat!(env!("OUT_DIR"), "/builtin_components.rs"));
