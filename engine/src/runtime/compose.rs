//! Composing an operator's stage into the `chain_socket` component, so a pipeline
//! whose built-in stages sit around that stage crosses from the engine into
//! WebAssembly once a round (docs/components.md, "One call for the built-in
//! stages"). The composition instantiates the stage inside the socket: it keeps
//! its own instance and linear memory, and the call between them goes through
//! the adapters wasmtime compiles, not through the engine.

use std::sync::Arc;

use wac_graph::types::Package;
use wac_graph::{CompositionGraph, EncodeOptions};

use super::builtin::CHAIN_SOCKET;
use super::{ComponentKind, LoadError, LoadedComponent, Runtime};

impl Runtime {
    /// The `chain_socket` component with `stage` plugged into its import, compiled
    /// and checked as a stage named after `stage` (its failures are the stage's).
    ///
    /// # Errors
    /// When `stage` is not a stage component loaded with its bytes, or its
    /// exports do not fit the socket's import.
    pub fn plug_into_chain(
        &self,
        stage: &LoadedComponent,
    ) -> Result<Arc<LoadedComponent>, LoadError> {
        let invalid = |detail: String| LoadError::Invalid {
            name: stage.name().to_owned(),
            detail: format!("cannot be composed with the built-in stages: {detail}"),
        };
        let bytes = stage
            .wasm
            .as_deref()
            .filter(|_| stage.kind() == ComponentKind::Stage)
            .ok_or_else(|| invalid("not a stage component".to_owned()))?;
        let socket = CHAIN_SOCKET.inflate("chain_socket")?;
        let composed = compose(&socket, bytes).map_err(|e| invalid(format!("{e:#}")))?;
        self.load(ComponentKind::Stage, stage.name(), &composed)
    }
}

/// `socket` with `plug`'s exports in the imports of the same names.
fn compose(socket: &[u8], plug: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut graph = CompositionGraph::new();
    let socket = Package::from_bytes("sluice:socket", None, socket, graph.types_mut())?;
    let socket = graph.register_package(socket)?;
    let plug = Package::from_bytes("sluice:plug", None, plug, graph.types_mut())?;
    let plug = graph.register_package(plug)?;
    wac_graph::plug(&mut graph, vec![plug], socket)?;
    Ok(graph.encode(EncodeOptions::default())?)
}
