//! Support for integration tests that talk to real protocol peers.
//!
//! A test binary includes it with `mod support;` and uses what it needs, e.g.
//! `support::peers::PyModbus::start(&map)`. The peers themselves are installed
//! by `scripts/setup-peers.sh` (which `cargo xtask test` runs first).
// Each test binary uses only part of this module.
#![allow(dead_code)]

pub mod browser;
pub mod downlink;
pub mod engine;
pub mod mqtt;
pub mod peers;
pub mod postgres;
pub mod proxy;
pub mod registers;
pub mod sim;
pub mod yaml;
