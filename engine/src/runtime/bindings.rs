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

pub(super) use stage::sluice::dataflow::types as wit;
