//! A component compiled and checked against the world of its kind.

use std::fmt;
use std::sync::Arc;

use wasmtime::component::InstancePre;

use super::error::LoadError;
use super::kind::ComponentKind;
use super::sandbox::Sandbox;
use crate::model::ProtocolInfo;

/// A compiled component checked against the world of its kind.
pub struct LoadedComponent {
    pub(super) name: String,
    pub(super) kind: ComponentKind,
    pub(super) hash: String,
    pub(super) pre: InstancePre<Sandbox>,
    /// A stage's bytes, which [`Runtime::plug_into_chain`](super::Runtime::plug_into_chain)
    /// composes; other kinds keep none.
    pub(super) wasm: Option<Arc<[u8]>>,
    /// The protocols a codec speaks (WIT `describe`); none for other kinds.
    pub(super) protocols: Arc<[Arc<ProtocolInfo>]>,
}

impl LoadedComponent {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn kind(&self) -> ComponentKind {
        self.kind
    }

    /// SHA-256 of the component's bytes, hex.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// The protocols a codec declares it speaks, checked; none for other kinds.
    pub fn protocols(&self) -> &[Arc<ProtocolInfo>] {
        &self.protocols
    }
}

impl LoadedComponent {
    pub(super) fn wrong_world(&self, error: wasmtime::Error) -> LoadError {
        LoadError::WrongWorld {
            name: self.name.clone(),
            kind: self.kind,
            detail: format!("{error:#}"),
        }
    }
}

impl fmt::Debug for LoadedComponent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedComponent")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("hash", &self.hash)
            .finish_non_exhaustive()
    }
}
