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
//!   per channel.
//!   No WASI capability is granted: imports a component declares all trap.
//! - A trap, a spent budget or a memory overrun fails that call only: the store is
//!   discarded and rebuilt on the next call; every other store carries on.
//! - [`Registry`] keeps component versions and swaps the active one atomically.

mod artifact;
mod bindings;
mod builtin;
mod codec;
mod convert;
mod error;
mod pool;
mod registry;
mod rules;
mod sandbox;
mod stage;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use wasmtime::component::{InstancePre, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

pub use builtin::{BUILTIN, BUILTIN_VERSION, Builtin};
pub use codec::{CodecPool, CodecSession};
pub use error::{CallError, Limit, LoadError, human_bytes};
pub use pool::PoolHealth;
pub use registry::{ComponentInfo, Registry};
pub use rules::{Evaluator, RulesPool};
pub use stage::{Processor, StagePool};

use pool::World as _;
use sandbox::Sandbox;

/// The three kinds of component, one WIT world each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ComponentKind {
    Codec,
    Stage,
    Rules,
}

impl ComponentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ComponentKind::Codec => "codec",
            ComponentKind::Stage => "stage",
            ComponentKind::Rules => "rules",
        }
    }
}

impl fmt::Display for ComponentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Engine-wide settings of the runtime.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Largest memory any instance may have; every tenant's cap must fit in it.
    pub max_memory_bytes: usize,
    /// Component instances that can be alive at once, across all tenants.
    pub max_instances: u32,
    /// Where precompiled artifacts are kept between runs; `None` compiles every start.
    pub cache_dir: Option<PathBuf>,
    /// A pool whose calls failed this many times in a row is quarantined: its calls
    /// fail at once, without running the component, for `quarantine_for`.
    pub quarantine_after: u32,
    pub quarantine_for: std::time::Duration,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            max_memory_bytes: 256 << 20,
            quarantine_after: 10,
            quarantine_for: std::time::Duration::from_secs(60),
            max_instances: 1000,
            cache_dir: None,
        }
    }
}

/// Sandbox limits of one tenant's instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Memory cap of each instance, in bytes.
    pub memory_bytes: usize,
    /// CPU budget of each call, in fuel units (roughly one per wasm instruction).
    pub fuel_per_call: u64,
    /// Instances (stores) kept per component; devices are spread over them.
    pub instances: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 << 20,
            fuel_per_call: 20_000_000,
            instances: 1,
        }
    }
}

/// A compiled component checked against the world of its kind.
pub struct LoadedComponent {
    name: String,
    kind: ComponentKind,
    hash: String,
    pre: InstancePre<Sandbox>,
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
}

impl LoadedComponent {
    fn wrong_world(&self, error: wasmtime::Error) -> LoadError {
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

/// The wasmtime engine and everything shared by all components.
#[derive(Clone)]
pub struct Runtime {
    engine: Engine,
    config: Arc<RuntimeConfig>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("config", &self.config)
            .finish()
    }
}

impl Runtime {
    /// # Errors
    /// When wasmtime rejects the configuration (for example address space for the
    /// pooling allocator cannot be reserved).
    pub fn new(config: RuntimeConfig) -> Result<Self, LoadError> {
        let mut pool = PoolingAllocationConfig::new();
        pool.max_memory_size(config.max_memory_bytes)
            .total_component_instances(config.max_instances)
            .total_memories(config.max_instances)
            .total_tables(config.max_instances)
            .total_core_instances(config.max_instances.saturating_mul(4));
        let mut wasm = Config::new();
        wasm.wasm_component_model(true)
            .consume_fuel(true)
            .concurrency_support(false)
            .max_wasm_stack(512 << 10)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&wasm).map_err(|e| LoadError::Engine(format!("{e:#}")))?;
        Ok(Self {
            engine,
            config: Arc::new(config),
        })
    }

    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// Compiles (or takes from the artifact cache) and checks a component.
    ///
    /// # Errors
    /// Bytes that are not a component, or a component that does not export the
    /// world of `kind` with exactly its types.
    pub fn load(
        &self,
        kind: ComponentKind,
        name: &str,
        bytes: &[u8],
    ) -> Result<Arc<LoadedComponent>, LoadError> {
        let (component, hash) =
            artifact::compile(&self.engine, self.config.cache_dir.as_deref(), name, bytes)?;
        let wrong_world = |e: wasmtime::Error| LoadError::WrongWorld {
            name: name.to_owned(),
            kind,
            detail: format!("{e:#}"),
        };
        let mut linker = Linker::<Sandbox>::new(&self.engine);
        // No capability is granted: whatever a component imports traps when called.
        linker
            .define_unknown_imports_as_traps(&component)
            .map_err(wrong_world)?;
        let pre = linker.instantiate_pre(&component).map_err(wrong_world)?;
        match kind {
            ComponentKind::Stage => bindings::stage::Stage::prepare(pre.clone()).map(drop),
            ComponentKind::Codec => bindings::codec::Codec::prepare(pre.clone()).map(drop),
            ComponentKind::Rules => bindings::rules::Rules::prepare(pre.clone()).map(drop),
        }
        .map_err(wrong_world)?;
        Ok(Arc::new(LoadedComponent {
            name: name.to_owned(),
            kind,
            hash,
            pre,
        }))
    }

    /// Instances of a stage component for one tenant.
    ///
    /// # Errors
    /// When `component` is not a stage, or the tenant's memory cap exceeds the
    /// runtime's [`RuntimeConfig::max_memory_bytes`].
    pub fn stage_pool(
        &self,
        component: &LoadedComponent,
        limits: Limits,
    ) -> Result<Arc<StagePool>, LoadError> {
        self.pool(component, limits)
    }

    /// Instances of a codec component for one tenant.
    ///
    /// # Errors
    /// As for [`Runtime::stage_pool`], for codecs.
    pub fn codec_pool(
        &self,
        component: &LoadedComponent,
        limits: Limits,
    ) -> Result<Arc<CodecPool>, LoadError> {
        self.pool(component, limits)
    }

    /// Instances of a rules component for one tenant.
    ///
    /// # Errors
    /// As for [`Runtime::stage_pool`], for rules.
    pub fn rules_pool(
        &self,
        component: &LoadedComponent,
        limits: Limits,
    ) -> Result<Arc<RulesPool>, LoadError> {
        self.pool(component, limits)
    }

    fn pool<W: pool::World>(
        &self,
        component: &LoadedComponent,
        limits: Limits,
    ) -> Result<Arc<pool::Pool<W>>, LoadError> {
        self.check_limits(limits)?;
        let pre = W::prepare(component.pre.clone()).map_err(|e| component.wrong_world(e))?;
        Ok(pool::Pool::new(
            self.engine.clone(),
            &component.name,
            pre,
            limits,
            pool::Quarantine::new(self.config.quarantine_after, self.config.quarantine_for),
        ))
    }

    fn check_limits(&self, limits: Limits) -> Result<(), LoadError> {
        if limits.memory_bytes > self.config.max_memory_bytes {
            return Err(LoadError::Engine(format!(
                "memory cap {} is above the runtime's maximum of {}",
                human_bytes(limits.memory_bytes),
                human_bytes(self.config.max_memory_bytes)
            )));
        }
        Ok(())
    }
}
