//! The state every task of one simulated device shares.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use super::memory::Memory;

/// State shared by the owner, the accept task and every connection task.
pub(crate) struct Shared {
    pub(crate) memory: Memory,
    /// The response delay in nanoseconds.
    pub(crate) delay_nanos: AtomicU64,
    pub(crate) max_connections: usize,
    /// Currently open (served) connections.
    pub(crate) open: AtomicUsize,
    /// Connections served so far.
    pub(crate) accepted: AtomicUsize,
    /// Responses sent, exceptions included.
    pub(crate) requests: AtomicU64,
}

impl Shared {
    pub(crate) fn response_delay(&self) -> Duration {
        Duration::from_nanos(self.delay_nanos.load(Ordering::Relaxed))
    }
}
