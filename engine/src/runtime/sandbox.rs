//! Per-store sandbox state: the memory cap, and what it refused, so a failed call
//! can say which limit stopped it and by how much.

use wasmtime::ResourceLimiter;

/// Tables above this many elements are refused: no guest of ours needs more.
const MAX_TABLE_ELEMENTS: usize = 100_000;

/// The data each store carries.
pub struct Sandbox {
    memory_cap: usize,
    /// The largest memory size refused since the last call began.
    refused: Option<usize>,
}

impl Sandbox {
    pub(super) fn new(memory_cap: usize) -> Self {
        Self {
            memory_cap,
            refused: None,
        }
    }

    /// Forgets refusals of earlier calls.
    pub(super) fn begin_call(&mut self) {
        self.refused = None;
    }

    /// The memory size refused during the current call, if any.
    pub(super) fn refused(&self) -> Option<usize> {
        self.refused
    }
}

impl ResourceLimiter for Sandbox {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_cap {
            self.refused = Some(self.refused.map_or(desired, |r| r.max(desired)));
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}
