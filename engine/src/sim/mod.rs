//! A fast, in-process Modbus TCP device simulator.
//!
//! Used by `sluice demo` (values flowing with nothing to install), by benchmarks
//! (a peer fast enough that the engine is what gets measured) and by tests (a slow
//! device, connection counting for descriptor-leak checks).
//!
//! A [`Simulator`] owns four tables of the same size, addresses
//! `0..SimConfig::registers` each: coils, discrete inputs, input registers and
//! holding registers. [`Simulator::serve`] answers Modbus TCP on a socket from a
//! spawned tokio task, one task per client; all clients share the tables, which
//! the owner can also read and change directly at any time.
//!
//! # Protocol
//!
//! - MBAP framing: the transaction id and unit id are echoed; any unit id is
//!   answered; a protocol id other than 0, or a length outside `2..=254`, closes
//!   the connection.
//! - Function codes 01, 02, 03, 04 (reads of 1..=2000 bits or 1..=125
//!   registers), 05, 06, 15, 16 (writes; FC05 takes only `0xFF00` or `0x0000`).
//! - Exceptions: 1 for an unknown function, 2 for addresses past the table, 3 for
//!   a bad quantity, value, byte count or PDU length.
//! - Pipelined requests are answered in order. Each response waits for the
//!   current [`Simulator::set_response_delay`] first.
//! - Clients beyond [`SimConfig::max_connections`] are accepted and closed at once.
//!
//! # Demo device
//!
//! [`demo_device`] lays out, and [`animate`] keeps changing, a small device:
//!
//! | Table            | Address | Type             | Meaning                                      |
//! |------------------|---------|------------------|----------------------------------------------|
//! | holding register | 0..=1   | FLOAT32, ABCD    | temperature in °C, around 21.5               |
//! | holding register | 2       | INT16            | pressure in tenths of a kPa, around 1013     |
//! | holding register | 3..=4   | UINT32, ABCD     | produced-items counter, +1 per step          |
//! | coil             | 0       | BOOL             | running flag, toggles every 10 s             |
//! | input register   | 0       | UINT16           | flow in hundredths of m³/h, ~1250; 0 stopped |
//!
//! ABCD means big-endian words: the lower address holds the high word. The
//! counter starts at 65 500, so its high word changes within the first minute.

mod demo;
mod memory;
mod pdu;
mod server;
#[cfg(test)]
mod tests;

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use demo::{animate, demo_device};
use memory::Memory;

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

/// State shared by the owner, the accept task and every connection task.
pub(crate) struct Shared {
    pub(crate) memory: Memory,
    /// The response delay in nanoseconds.
    delay_nanos: AtomicU64,
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
