//! Support for integration tests that talk to real protocol peers: each test
//! module uses what it needs, e.g. `crate::support::peers::PyModbus::start(&map)`.
//! The peers themselves are installed by `scripts/setup-peers.sh` (which `cargo
//! xtask test` runs first).

pub mod browser;
pub mod config;
pub mod downlink;
pub mod engine;
pub mod faults;
pub mod melsec_1e;
pub mod mqtt;
pub mod peers;
pub mod postgres;
pub mod proxy;
pub mod registers;
pub mod sim;
