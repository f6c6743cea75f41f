//! Sluice: a data-collection engine for industrial gateways.
//!
//! The native engine owns time, sockets and durable state; WebAssembly components
//! (see `wit/`) own protocol bytes and decisions. Modules by responsibility:
//! - [`command`]: downlink commands (claims, receipts) and safe writes;
//! - [`alarm`]: the alarm lifecycle (rules, whitelist, supersede, audit, delivery);
//! - [`yaml`]: YAML with positions, for `FILE:LINE:COL` errors;
//! - [`config`]: the device/channel/tag configuration file;
//! - [`compile`]: the config compiler: files and components into a runnable gateway;
//! - [`io`]: connections to devices (budget, backoff, link state machine);
//! - [`scheduler`]: the due-time queue that runs poll rounds;
//! - [`collector`]: devices, links and pipelines built from the config, polled;
//! - [`uplink`]: the MQTT client publishing reports and statuses;
//! - [`wal`]: store and forward: the write-ahead log reports wait in for their PUBACK;
//! - [`store`]: the redb database (sequence numbers, ...);
//! - [`lease`]: lease-based online/offline state of drivers and devices;
//! - [`clock`]: wall-clock timestamps;
//! - [`broker`]: an in-process MQTT broker for the demo and benchmarks (feature `demo`);
//! - [`api`]: the HTTP API (health, metrics);
//! - [`console`]: the operator console (a page over the API, a stream of live changes);
//! - [`telemetry`]: the metric families every module registers, for `/metrics`;
//! - [`sync`]: locks that outlive a panic, values replaced whole;
//! - [`memory`]: memory handed back to the system: the heap's top as it frees,
//!   and after a build its freed pages and the code pages only it ran;
//! - [`gateway`]: everything `sluice run` starts, wired together;
//! - [`model`]: samples, values and tags as they flow through the engine;
//! - [`runtime`]: the sandboxed component runtime (the only user of wasmtime);
//! - [`deploy`]: components uploaded into a running engine, kept in the data directory;
//! - [`pipeline`]: declarative pipelines of stage components;
//! - [`sim`]: a fast built-in Modbus TCP device simulator (demo, benchmarks, tests;
//!   feature `demo`);
//! - [`mqtt`]: the MQTT contract: every topic and payload, as types;
//! - [`watchdog`]: every tenant's component pools, and alarms for quarantined ones.

pub mod alarm;
pub mod api;
#[cfg(feature = "demo")]
pub mod broker;
pub mod clock;
pub mod collector;
pub mod command;
pub mod compile;
pub mod config;
pub mod console;
pub mod deploy;
pub mod gateway;
pub mod io;
pub mod lease;
pub mod memory;
pub mod model;
pub mod mqtt;
pub mod pipeline;
pub mod runtime;
pub mod scheduler;
#[cfg(feature = "demo")]
pub mod sim;
pub mod store;
pub mod sync;
pub mod telemetry;
pub mod uplink;
pub mod wal;
pub mod watchdog;
pub mod yaml;
