//! The default components, built from `components/` for wasm32-wasip2 by the build
//! script and embedded in the binary, so a gateway needs one file. They are stored
//! deflated (about a third of their size) and inflated when they are loaded.

use super::{ComponentKind, LoadError};

/// The bytes of a component, deflated, as the build script embedded them.
#[derive(Debug, Clone, Copy)]
pub struct Embedded(&'static [u8]);

impl Embedded {
    /// `bytes`, a deflate stream.
    pub const fn new(bytes: &'static [u8]) -> Self {
        Self(bytes)
    }

    /// The component's WebAssembly bytes.
    ///
    /// # Errors
    /// The embedded copy does not inflate (a damaged binary).
    pub fn inflate(self, name: &str) -> Result<Vec<u8>, LoadError> {
        miniz_oxide::inflate::decompress_to_vec(self.0).map_err(|e| LoadError::Invalid {
            name: name.to_owned(),
            detail: format!("the copy built into this binary is damaged: {e}"),
        })
    }
}

/// A component compiled into the engine binary.
#[derive(Debug)]
pub struct Builtin {
    pub name: &'static str,
    pub kind: ComponentKind,
    pub wasm: Embedded,
}

/// Version under which built-in components are registered.
pub const BUILTIN_VERSION: &str = concat!("builtin-", env!("CARGO_PKG_VERSION"));

include!(concat!(env!("OUT_DIR"), "/builtin_components.rs"));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_component_inflates_to_webassembly() {
        for builtin in BUILTIN.iter().chain([&Builtin {
            name: "chain_socket",
            kind: ComponentKind::Stage,
            wasm: CHAIN_SOCKET,
        }]) {
            let wasm = builtin.wasm.inflate(builtin.name).expect("inflates");
            assert!(wasm.starts_with(b"\0asm"), "{}", builtin.name);
            assert!(
                builtin.wasm.0.len() < wasm.len(),
                "{} is stored deflated",
                builtin.name
            );
        }
    }

    #[test]
    fn a_damaged_copy_is_refused_by_name() {
        let refused = Embedded(b"\xff\xff not a deflate stream")
            .inflate("scale")
            .expect_err("damaged");
        assert!(
            refused.to_string().contains("`scale`") && refused.to_string().contains("damaged"),
            "{refused}"
        );
    }
}
