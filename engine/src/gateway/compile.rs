//! The gateway's configuration compiled with the components it runs: the
//! built-in ones and those deployed into its data directory.

use std::sync::Arc;

use crate::compile::{self, Compiled, Conflict, Pools, Sources};
use crate::config::{CollectorConfig, Document, GatewayConfig};
use crate::deploy::Shelf;
use crate::runtime::{LoadError, Registry, Runtime, RuntimeConfig};
use crate::yaml::Diagnostics;

/// Sub-directory of the data directory holding precompiled components.
const COMPONENT_CACHE: &str = "component-cache";

/// The environment variable that puts the compiled components' cache in
/// another directory than the data directory's `component-cache` (one that
/// several engines of one user share, say: each artifact is named by its
/// content and the compiler's settings, and written whole).
pub const COMPONENT_CACHE_VAR: &str = "SLUICE_COMPONENT_CACHE";

/// What a compile is for: `sluice check` leaves the data directory as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Check,
    Run,
}

/// Why a gateway cannot run.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// What the configuration or a component says is wrong, at its positions.
    #[error("{0}")]
    Problems(Diagnostics),
    #[error(transparent)]
    Runtime(#[from] LoadError),
}

/// The components a gateway with `collector` runs: the built-in ones, and those
/// deployed into its data directory (active as they were when it last ran).
///
/// # Errors
/// A runtime that cannot start, or a built-in component that does not load.
pub fn registry(
    collector: &CollectorConfig,
    purpose: Purpose,
) -> Result<(Arc<Registry>, Shelf), LoadError> {
    let data_dir = &collector.wal.dir;
    let cache_dir = std::env::var_os(COMPONENT_CACHE_VAR)
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| data_dir.join(COMPONENT_CACHE), std::path::PathBuf::from);
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: (purpose == Purpose::Run).then_some(cache_dir),
        ..RuntimeConfig::default()
    })?;
    let registry = Arc::new(Registry::with_builtins(runtime)?);
    let shelf = Shelf::new(data_dir);
    for problem in shelf.restore(&registry) {
        tracing::error!(%problem, "a deployed component could not be restored");
    }
    Ok((registry, shelf))
}

/// A gateway compiled and ready to start.
#[derive(Debug)]
pub struct Prepared {
    pub compiled: Compiled,
    pub registry: Arc<Registry>,
    pub shelf: Shelf,
    /// Pushed devices whose file entry was edited since their push.
    pub conflicts: Vec<Conflict>,
}

/// Compiles the gateway `sources` describe, with the components it would run:
/// the built-in ones and those deployed into its data directory. `sluice check`
/// and `sluice run` both come here, so they refuse the same things in the same words.
///
/// # Errors
/// Every problem of the files or the components, or a runtime that cannot start.
pub fn compile(sources: &Sources, purpose: Purpose) -> Result<Prepared, Refusal> {
    // The components come first: the channels may name protocols uploaded into
    // the data directory. With a collector section in error, the defaults
    // find the built-in ones, nothing is written, and the whole file's
    // problems are reported below.
    let document = sources.document().map_err(Refusal::Problems)?;
    let collector = document
        .as_ref()
        .map_or_else(|| Ok(CollectorConfig::default()), Document::collector);
    let (registry, shelf) = match collector {
        Ok(collector) => registry(&collector, purpose)?,
        Err(_) => registry(&CollectorConfig::default(), Purpose::Check)?,
    };
    let loaded = compile::load(sources, document.as_ref(), &registry).map_err(Refusal::Problems)?;
    // The file's tree (far larger than its text) goes before the devices are built.
    drop(document);
    let conflicts = loaded.conflicts.clone();
    for conflict in &conflicts {
        tracing::warn!(
            device = %conflict.device_id,
            edit = ?conflict.file_edit,
            "the file's entry of a pushed device was edited since the push; the pushed configuration is in force until it is withdrawn"
        );
    }
    warn_of_changed_byte_orders(&loaded.config);
    let compiled = compile::build(loaded, &registry, &mut Pools::new(), &|_| true)
        .map_err(Refusal::Problems)?;
    Ok(Prepared {
        compiled,
        registry,
        shelf,
        conflicts,
    })
}

/// Tags whose values read differently than in engines before the seed's 64-bit
/// `CDAB` (docs/config.md, `byteOrder`): named once a device at every start.
fn warn_of_changed_byte_orders(config: &GatewayConfig) {
    for device in &config.devices {
        let changed: Vec<&str> = device
            .tags()
            .filter(|t| t.spec.byte_order.changed_for(t.spec.data_type))
            .map(|t| t.spec.key.as_str())
            .collect();
        if !changed.is_empty() {
            tracing::warn!(
                device = %device.device_id,
                tags = %changed.join(", "),
                "CDAB on a 64-bit value swaps its two 32-bit halves (seed 003's rule); engines \
                 before this one reversed its four registers, which is GHEFCDAB now: check \
                 these tags' values"
            );
        }
    }
}
