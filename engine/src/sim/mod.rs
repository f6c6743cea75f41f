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
//! | holding register | 5       | INT16            | setpoint in tenths of °C, 225 at first; only writes change it |
//! | input register   | 0       | UINT16           | flow in hundredths of m³/h, ~1250; 0 stopped |
//!
//! ABCD means big-endian words: the lower address holds the high word. The
//! counter starts at 65 500, so its high word changes within the first minute.

mod demo;
mod memory;
mod pdu;
mod server;
mod shared;
mod simulator;
#[cfg(test)]
mod tests;

pub use demo::{animate, demo_device};
pub use simulator::{SimConfig, SimHandle, Simulator};
