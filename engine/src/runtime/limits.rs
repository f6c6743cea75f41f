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
    /// How each instance's linear memory is laid out in the address space.
    pub memory_layout: MemoryLayout,
}

/// Where a linear memory sits in the address space, which decides whether the
/// compiled code checks the bounds of every memory access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryLayout {
    /// Every memory reserves the whole 32-bit index space plus a guard region,
    /// so no access can leave its reservation and the compiled code checks no
    /// bounds (a quarter of the default pipeline's time, measured by
    /// `benches/stage_call.rs`). The pool of 1,000 instances takes ~4 TiB of
    /// address space: x86_64 processes have 128 TiB.
    Guarded,
    /// Every memory reserves only `max_memory_bytes` (250 GiB for the pool),
    /// and the compiled code checks bounds: for kernels with 39-bit user
    /// addresses (512 GiB, common on ARM boards) and for emulators, which back
    /// the reservation with memory of their own.
    BoundsChecked,
}

impl MemoryLayout {
    /// [`MemoryLayout::Guarded`] on x86_64, [`MemoryLayout::BoundsChecked`]
    /// elsewhere (an ARM board's address space may be too small for it).
    pub const NATIVE: MemoryLayout = if cfg!(target_arch = "x86_64") {
        MemoryLayout::Guarded
    } else {
        MemoryLayout::BoundsChecked
    };
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            max_memory_bytes: 256 << 20,
            max_instances: 1000,
            cache_dir: None,
            memory_layout: MemoryLayout::NATIVE,
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
