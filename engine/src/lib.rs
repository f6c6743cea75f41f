//! Sluice: a data-collection engine for industrial gateways.
//!
//! The native engine owns time, sockets and durable state; WebAssembly components
//! (see `wit/`) own protocol bytes and decisions. Modules by layer, lowest first
//! (`docs/architecture.md` says what each layer may import; `cargo xtask layers`
//! checks it):
//!
//! - foundation: [`model`] (samples, values, tags and the vocabularies every layer
//!   shares), [`clock`] (wall time), [`sync`] (locks that outlive a panic, values
//!   replaced whole), [`memory`] (memory handed back to the system), [`yaml`] (YAML
//!   with positions, for `FILE:LINE:COL` errors), [`telemetry`] (the metric
//!   families, for `/metrics`);
//! - platform: [`config`] (the device/channel/tag configuration file), [`runtime`]
//!   (the sandboxed component runtime, the only user of wasmtime), [`store`] (the
//!   redb file and the shared PostgreSQL database), [`mqtt`] (the MQTT contract:
//!   every topic and payload, as types);
//! - mechanisms: [`io`] (connections to devices: budget, backoff, the link state
//!   machine), [`scheduler`] (the due-time queue that runs poll rounds),
//!   [`pipeline`] (declarative pipelines of stage components), [`wal`] (store and
//!   forward, `docs/wal.md`), [`uplink`] (the MQTT client: reports, statuses, the
//!   downlink), [`intake`] (messages devices publish, from their brokers);
//! - compiler: [`compile`] (files and components into a runnable gateway);
//! - domain: [`lease`] (lease-based online/offline state, `docs/state.md`),
//!   [`collector`] (devices, links and pipelines, polled or publishing by themselves), [`alarm`] (the alarm
//!   lifecycle, `docs/alarms.md`), [`command`] (downlink commands and safe writes,
//!   `docs/commands.md`), [`watchdog`] (component pools, quarantine alarms),
//!   [`deploy`] (components uploaded into a running engine, reloads, pushes);
//! - wiring: [`gateway`] (everything `sluice run` starts), [`api`] (the HTTP API),
//!   [`console`] (the operator console);
//! - tools, with the `demo` feature (the default build; gateway packages leave them
//!   out): [`sim`] (a Modbus TCP device simulator), [`broker`] (an in-process MQTT
//!   broker). The `sluice` commands are the binary's (`src/cli`).

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
pub mod intake;
pub mod io;
pub mod lease;
pub mod memory;
pub mod model;
pub mod mqtt;
pub mod pipeline;
pub mod runtime;
pub mod scheduler;
pub mod sdk;
#[cfg(feature = "demo")]
pub mod sim;
pub mod store;
pub mod sync;
pub mod telemetry;
pub mod tls;
pub mod uplink;
pub mod wal;
pub mod watchdog;
pub mod yaml;
