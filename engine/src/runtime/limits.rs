//! What a runtime and each tenant's sandboxes are set up with.

use std::path::PathBuf;
use std::time::Duration;

/// Engine-wide settings of the runtime.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Largest memory any instance may have; every tenant's cap must fit in it.
    pub max_memory_bytes: usize,
    /// Component instances that can be alive at once, across all tenants.
    pub max_instances: u32,
    /// Where precompiled artifacts are kept between runs; `None` compiles every start.
    pub cache_dir: Option<PathBuf>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            max_memory_bytes: 256 << 20,
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
    /// A pool whose calls failed this many times in a row is quarantined: its calls
    /// fail at once, without running the component, for `quarantine_for`.
    pub quarantine_after: u32,
    pub quarantine_for: Duration,
}

impl Limits {
    /// What a tenant that sets no `limits` gets, and devices without a tenant.
    pub const DEFAULT: Limits = Limits {
        memory_bytes: 64 << 20,
        fuel_per_call: 20_000_000,
        instances: 1,
        quarantine_after: 10,
        quarantine_for: Duration::from_secs(60),
    };
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}
