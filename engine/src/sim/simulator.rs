//! The simulated device as its owner sees it, and the servers it runs.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::memory::Memory;
use super::server;
use super::shared::Shared;

/// How a [`Simulator`] is sized and behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfig {
    /// Size of each of the four tables (coils, discrete inputs, input registers,
    /// holding registers): valid addresses are `0..registers`.
    pub registers: u16,
    /// Added before each response; 0 answers as fast as possible.
    pub response_delay: Duration,
    /// Clients served at once; more are accepted and closed immediately.
    pub max_connections: usize,
}

impl Default for SimConfig {
    /// Full-size tables (65 535 addresses), no delay, 1024 connections.
    fn default() -> Self {
        Self {
            registers: u16::MAX,
            response_delay: Duration::ZERO,
            max_connections: 1024,
        }
    }
}

/// A simulated Modbus device: shared memory plus counters.
///
/// Cloning is cheap and every clone sees the same device, so a test can keep one
/// to change values or count connections while a server task uses another.
/// Writes past the end of a table are dropped; reads there give 0 (`false`)
/// or fewer values.
#[derive(Clone)]
pub struct Simulator {
    shared: Arc<Shared>,
}

impl fmt::Debug for Simulator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Simulator")
            .field("registers", &self.shared.memory.holding.len())
            .field("open_connections", &self.open_connections())
            .field("requests", &self.requests())
            .finish_non_exhaustive()
    }
}

impl Simulator {
    /// A device with all values zero.
    pub fn new(config: SimConfig) -> Self {
        let delay = u64::try_from(config.response_delay.as_nanos()).unwrap_or(u64::MAX);
        Self {
            shared: Arc::new(Shared {
                memory: Memory::new(config.registers),
                delay_nanos: AtomicU64::new(delay),
                max_connections: config.max_connections,
                open: AtomicUsize::new(0),
                accepted: AtomicUsize::new(0),
                requests: AtomicU64::new(0),
            }),
        }
    }

    /// Binds `addr` (port 0 picks a free port; see [`SimHandle::local_addr`])
    /// and serves Modbus TCP from a spawned tokio task until the returned
    /// handle is shut down or dropped. One simulator may serve several sockets;
    /// they share the tables and counters.
    pub async fn serve(&self, addr: SocketAddr) -> std::io::Result<SimHandle> {
        let listener = TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(server::accept_loop(
            listener,
            Arc::clone(&self.shared),
            stopped,
        ));
        Ok(SimHandle {
            local_addr,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// Writes holding registers from `offset`, as one change for clients.
    pub fn set_holding(&self, offset: u16, values: &[u16]) {
        self.shared
            .memory
            .holding
            .write(offset, values.iter().copied());
    }

    /// Reads `count` holding registers from `offset` (fewer past the end).
    pub fn holding(&self, offset: u16, count: u16) -> Vec<u16> {
        let mut values = Vec::with_capacity(usize::from(count));
        self.shared
            .memory
            .holding
            .read_into(offset, count, &mut values);
        values
    }

    /// Writes input registers from `offset`, as one change for clients.
    pub fn set_input(&self, offset: u16, values: &[u16]) {
        self.shared
            .memory
            .input
            .write(offset, values.iter().copied());
    }

    /// Sets or clears one coil.
    pub fn set_coil(&self, offset: u16, on: bool) {
        self.shared.memory.coils.write(offset, [u16::from(on)]);
    }

    /// Reads one coil.
    pub fn coil(&self, offset: u16) -> bool {
        self.shared.memory.coils.get(offset) != 0
    }

    /// Sets or clears one discrete input.
    pub fn set_discrete(&self, offset: u16, on: bool) {
        self.shared.memory.discrete.write(offset, [u16::from(on)]);
    }

    /// Changes the delay added before each response, from the next response on.
    pub fn set_response_delay(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.shared.delay_nanos.store(nanos, Ordering::Relaxed);
    }

    /// Client connections currently open, over every socket served.
    pub fn open_connections(&self) -> usize {
        self.shared.open.load(Ordering::Acquire)
    }

    /// Client connections served so far, over every socket served.
    pub fn accepted_connections(&self) -> usize {
        self.shared.accepted.load(Ordering::Acquire)
    }

    /// Requests answered so far, exception responses included.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::Relaxed)
    }
}

/// A running server. Dropping it aborts the server task and every connection
/// task; [`SimHandle::shutdown`] does the same and waits until they are gone.
#[derive(Debug)]
pub struct SimHandle {
    local_addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl SimHandle {
    /// The address actually bound, with the real port when 0 was asked for.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting, closes every client connection and waits until the
    /// listener and all connection tasks are gone.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            // An error means the task has already ended.
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take()
            && let Err(error) = task.await
            && error.is_panic()
        {
            tracing::error!(%error, "simulator: server task panicked");
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
