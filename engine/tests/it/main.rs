//! The engine's integration tests, in one binary: one link of wasmtime,
//! cranelift, redb, axum and tokio-postgres instead of one per file. Each
//! module is one area, tested against the real peers `support` starts.

mod common;
mod support;

mod alarm_api;
mod alarm_delivery;
mod alarms;
mod arrays;
mod cli;
mod codec_fuzz;
mod collector_behaviour;
mod command_writes;
mod commands;
mod config_compiler;
mod config_push;
mod console;
mod decoders;
mod deploy;
mod device_reload;
mod dist;
mod downlink;
mod lease_backends;
mod lease_crash;
mod leases;
mod modbus_codec;
mod modbus_rtu;
mod modbus_slice;
mod openapi;
mod outside_heartbeats;
mod peers_harness;
mod platform_view;
mod protocols;
mod push_devices;
mod runtime;
mod s7_mc_peers;
mod sdk;
mod security;
mod shared_engines;
mod shared_store;
mod sparkplug;
mod stages;
mod store_and_forward;
mod tls;
mod upgrade;
mod wal_model;
mod write_crashes;
