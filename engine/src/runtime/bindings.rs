//! Host bindings generated from `wit/`, the single source of the contract. This is
//! the only file that runs `bindgen!`; the types share one copy of `types`.

pub(super) mod stage {
    wasmtime::component::bindgen!({ world: "stage", path: "../wit" });
}

pub(super) mod codec {
    wasmtime::component::bindgen!({
        world: "codec",
        path: "../wit",
        with: { "sluice:dataflow/types": super::stage::sluice::dataflow::types },
    });
}

pub(super) mod rules {
    wasmtime::component::bindgen!({
        world: "rules",
        path: "../wit",
        with: { "sluice:dataflow/types": super::stage::sluice::dataflow::types },
    });
}

pub(super) mod decoder {
    wasmtime::component::bindgen!({
        world: "decoder",
        path: "../wit",
        with: { "sluice:dataflow/types": super::stage::sluice::dataflow::types },
    });
}

pub(super) mod builtin_decoder {
    wasmtime::component::bindgen!({
        world: "builtin-decoder",
        path: "../wit",
        with: { "sluice:dataflow/types": super::stage::sluice::dataflow::types },
    });
}

pub(super) use stage::sluice::dataflow::types as wit;

/// The WIT package every component must be built against: `sluice:dataflow` at
/// this version (the `package` line of the files in `wit/`).
pub const WIT_PACKAGE: &str = "sluice:dataflow";
pub const WIT_VERSION: &str = "0.7.0";

#[cfg(test)]
mod tests {
    #[test]
    fn the_version_is_the_one_the_wit_files_declare() {
        let declared = format!("package {}@{};", super::WIT_PACKAGE, super::WIT_VERSION);
        for (file, text) in [
            ("types.wit", include_str!("../../../wit/types.wit")),
            ("stage.wit", include_str!("../../../wit/stage.wit")),
            ("codec.wit", include_str!("../../../wit/codec.wit")),
            ("rules.wit", include_str!("../../../wit/rules.wit")),
            ("decoder.wit", include_str!("../../../wit/decoder.wit")),
        ] {
            assert_eq!(text.lines().next(), Some(declared.as_str()), "{file}");
        }
    }
}
