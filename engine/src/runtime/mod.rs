//! The WebAssembly component runtime: the only module that knows wasmtime.
//!
//! - One [`Runtime`] per engine: a wasmtime engine with fuel metering, the pooling
//!   allocator and component-model concurrency off (it costs ~0.4 us per call).
//! - [`Runtime::load`] compiles a component off the hot path (or takes the
//!   precompiled artifact from the cache, keyed by content hash) and checks it
//!   against the world of its kind before anyone can use it.
//! - Each tenant's component runs in its own stores ([`StagePool`]) with that
//!   tenant's [`Limits`]: a memory cap, a CPU budget per call, an instance count.
//!   Devices hold resources in them: a [`Processor`] per stage, a [`CodecSession`]
//!   per channel, a [`PayloadDecoder`] per device that pushes its messages (and an
//!   [`Ingester`] when its decoder and its stages are all the engine's own).
//!   No WASI capability is granted: imports a component declares all trap.
//! - A trap, a spent budget or a memory overrun fails that call only: the store is
//!   discarded and rebuilt on the next call; every other store carries on.
//! - [`Registry`] keeps component versions and swaps the active one atomically.

mod artifact;
mod bindings;
mod builtin;
mod codec;
mod component;
mod compose;
mod convert;
mod declaration;
mod decoder;
mod engine;
mod error;
mod ingest;
mod kind;
mod last_plan;
mod limits;
mod pool;
mod registry;
mod rules;
mod sandbox;
mod stage;
pub mod threads;

pub use artifact::content_hash;
pub use bindings::{WIT_PACKAGE, WIT_VERSION};
pub use builtin::{BUILTIN, BUILTIN_VERSION, Builtin, Embedded};
pub use codec::{CodecPool, CodecSession};
pub use component::LoadedComponent;
pub use decoder::{Decoded, DecoderPool, Outgoing, PayloadDecoder, Refusal};
pub use engine::Runtime;
pub use error::{CallError, Limit, LoadError, human_bytes};
pub use ingest::{IngestPool, Ingested, Ingester};
pub use kind::ComponentKind;
pub use limits::{Limits, MemoryLayout, RuntimeConfig};
pub use pool::PoolHealth;
pub use registry::{ComponentInfo, Registry};
pub use rules::{Evaluator, RulesPool};
pub use stage::{Processor, StagePool};
