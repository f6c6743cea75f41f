//! Sluice: a data-collection engine for industrial gateways.
//!
//! The native engine owns time, sockets and durable state; WebAssembly components
//! (see `wit/`) own protocol bytes and decisions. Modules by responsibility:
//! - [`yaml`]: YAML with positions, for `FILE:LINE:COL` errors;
//! - [`config`]: the device/channel/tag configuration file;
//! - [`model`]: samples, values and tags as they flow through the engine;
//! - [`runtime`]: the sandboxed component runtime (the only user of wasmtime);
//! - [`components`]: the default components embedded in the binary;
//! - [`pipeline`]: declarative pipelines of stage components;
//! - [`report`]: the payload published upstream.

pub mod components;
pub mod config;
pub mod model;
pub mod pipeline;
pub mod report;
pub mod runtime;
pub mod yaml;
