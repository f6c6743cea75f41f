//! The wasmtime engine: compiling and checking components, and the pools each
//! tenant's instances live in.

use std::fmt;
use std::sync::Arc;

use wasmtime::component::Linker;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::artifact;
use super::bindings;
use super::bindings::{WIT_PACKAGE, WIT_VERSION};
use super::codec::CodecPool;
use super::component::LoadedComponent;
use super::declaration;
use super::decoder::DecoderPool;
use super::error::{LoadError, human_bytes};
use super::ingest::IngestPool;
use super::kind::ComponentKind;
use super::limits::{Limits, MemoryLayout, RuntimeConfig};
use super::pool::{self, World as _};
use super::rules::RulesPool;
use super::sandbox::Sandbox;
use super::stage::StagePool;

/// The guard region after each memory of [`MemoryLayout::Guarded`] (wasmtime's
/// own default on 64-bit hosts).
const GUARD_REGION_BYTES: u64 = 32 << 20;

/// The wasmtime engine and everything shared by all components.
#[derive(Clone)]
pub struct Runtime {
    engine: Engine,
    /// The engine's settings with instances allocated on demand and functions
    /// compiled on the calling thread: the engine that compiles a component is
    /// made from them and dropped after, so the compiler's working memory
    /// (~20 MiB that wasmtime keeps for reuse) goes with it, and no second pool
    /// of address space is reserved for it.
    compiler: Arc<Config>,
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
    /// A runtime with `config`; when the memories' guard regions cannot be
    /// reserved ([`MemoryLayout::Guarded`]: a process limited in address space),
    /// with bounds-checked memories instead, said in a warning.
    ///
    /// # Errors
    /// When wasmtime rejects the configuration (for example address space for the
    /// pooling allocator cannot be reserved).
    pub fn new(config: RuntimeConfig) -> Result<Self, LoadError> {
        match Self::with_layout(config.clone()) {
            Err(error) if config.memory_layout == MemoryLayout::Guarded => {
                tracing::warn!(
                    %error,
                    "no address space for the components' guard regions: \
                     their memory accesses are bounds-checked instead"
                );
                Self::with_layout(RuntimeConfig {
                    memory_layout: MemoryLayout::BoundsChecked,
                    ..config
                })
            }
            made => made,
        }
    }

    fn with_layout(config: RuntimeConfig) -> Result<Self, LoadError> {
        let mut pool = PoolingAllocationConfig::new();
        pool.max_memory_size(config.max_memory_bytes)
            .total_component_instances(config.max_instances)
            .total_memories(config.max_instances)
            .total_tables(config.max_instances)
            .total_core_instances(config.max_instances.saturating_mul(4));
        let mut wasm = Config::new();
        match config.memory_layout {
            // The whole 32-bit index space, and a guard past it larger than the
            // static offsets compiled code adds to an index (data addresses up
            // to a few MiB): every access lands in the reservation.
            MemoryLayout::Guarded => wasm
                .memory_reservation(1 << 32)
                .memory_guard_size(GUARD_REGION_BYTES),
            // What a memory may grow to, and a guard for small offsets only.
            MemoryLayout::BoundsChecked => wasm
                .memory_reservation(u64::try_from(config.max_memory_bytes).unwrap_or(u64::MAX))
                .memory_guard_size(64 << 10),
        };
        wasm.memory_reservation_for_growth(0)
            .guard_before_linear_memory(false);
        wasm.wasm_component_model(true)
            .consume_fuel(true)
            .concurrency_support(false)
            .max_wasm_stack(512 << 10);
        // Compiled on the calling thread (the build has no compiler threads:
        // each would keep an arena of freed scratch pages, pinned by a few
        // small allocations, for good).
        let compiler = wasm.clone();
        wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&wasm).map_err(|e| LoadError::Engine(format!("{e:#}")))?;
        Ok(Self {
            engine,
            compiler: Arc::new(compiler),
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
        let (component, hash) = artifact::compile(
            &self.engine,
            &self.compiler,
            self.config.cache_dir.as_deref(),
            name,
            bytes,
        )?;
        let wrong_world = |e: wasmtime::Error| LoadError::WrongWorld {
            name: name.to_owned(),
            kind,
            detail: format!("{e:#}"),
        };
        let mut linker = Linker::<Sandbox>::new(&self.engine);
        // No capability is granted: whatever a component imports traps when called
        // (COMP-1).
        linker
            .define_unknown_imports_as_traps(&component)
            .map_err(wrong_world)?;
        check_wit_version(&self.engine, &component, name)?;
        let pre = linker.instantiate_pre(&component).map_err(wrong_world)?;
        match kind {
            ComponentKind::Stage => bindings::stage::Stage::prepare(pre.clone()).map(drop),
            ComponentKind::Codec => bindings::codec::Codec::prepare(pre.clone()).map(drop),
            ComponentKind::Rules => bindings::rules::Rules::prepare(pre.clone()).map(drop),
            ComponentKind::Decoder => bindings::decoder::Decoder::prepare(pre.clone()).map(drop),
        }
        .map_err(wrong_world)?;
        let mut loaded = LoadedComponent {
            name: name.to_owned(),
            kind,
            hash,
            pre,
            wasm: (kind == ComponentKind::Stage).then(|| Arc::from(bytes)),
            protocols: Arc::from([]),
        };
        if kind == ComponentKind::Codec {
            // Asked in a sandbox of its own, with the default limits (COMP-3).
            let limits = Limits {
                memory_bytes: Limits::DEFAULT
                    .memory_bytes
                    .min(self.config.max_memory_bytes),
                ..Limits::DEFAULT
            };
            let pool: Arc<CodecPool> = self.pool(&loaded, limits)?;
            loaded.protocols = declaration::describe(&pool, name)
                .map_err(|detail| LoadError::Declaration {
                    name: name.to_owned(),
                    detail,
                })?
                .into();
        }
        Ok(Arc::new(loaded))
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

    /// Instances of a decoder component for one tenant.
    ///
    /// # Errors
    /// As for [`Runtime::stage_pool`], for decoders.
    pub fn decoder_pool(
        &self,
        component: &LoadedComponent,
        limits: Limits,
    ) -> Result<Arc<DecoderPool>, LoadError> {
        self.pool(component, limits)
    }

    /// Instances of one of the engine's decoders for one tenant, for the
    /// devices whose pipeline its component runs in the same call.
    ///
    /// # Errors
    /// As for [`Runtime::stage_pool`]; a component without the `ingest` export.
    pub fn ingest_pool(
        &self,
        component: &LoadedComponent,
        limits: Limits,
    ) -> Result<Arc<IngestPool>, LoadError> {
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
            pool::Quarantine::new(limits.quarantine_after, limits.quarantine_for),
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

/// Refuses a component whose exports come from another version of the WIT
/// package, naming the version it was built against and the one needed.
fn check_wit_version(
    engine: &Engine,
    component: &wasmtime::component::Component,
    name: &str,
) -> Result<(), LoadError> {
    let prefix = format!("{WIT_PACKAGE}/");
    let ty = component.component_type();
    for (export, _) in ty.exports(engine) {
        let Some((_, version)) = export
            .strip_prefix(&prefix)
            .and_then(|rest| rest.split_once('@'))
        else {
            continue;
        };
        if version != WIT_VERSION {
            return Err(LoadError::WitVersion {
                name: name.to_owned(),
                package: WIT_PACKAGE,
                found: version.to_owned(),
                needed: WIT_VERSION,
            });
        }
    }
    Ok(())
}
