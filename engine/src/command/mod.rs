//! Downlink commands: the seven-state machine (whitelist owned by the rules
//! component), claims with leases, generation and node guards on receipts, and
//! the write service that executes commands on the engine's own devices. Design
//! and invariants: `docs/commands.md`.
//!
//! - [`model`]: the command record, receipts and their outcomes;
//! - [`store`]: every change, each one transaction with its history record;
//! - [`claims`]: claims, receipts and the timers, guarded against double execution;
//! - [`intents`]: the intents and outcomes of the writes that execute commands;
//! - [`outcome`]: write requests, intents, records, and their receipts;
//! - [`service`]: creating, cancelling, receipts of nodes, replies, the downlink;
//! - [`sparkplug`]: Sparkplug B device commands (DCMD) as command requests;
//! - [`values`]: values checked and scaled for writing, compared when read back;
//! - [`write`]: safe writes (checks, intents, idempotency, read-back, audit);
//! - [`node`]: the engine as a node: claims its devices' commands, writes, reports.

pub mod claims;
pub mod intents;
pub mod model;
pub mod node;
pub mod outcome;
pub mod service;
pub mod sparkplug;
pub mod store;
pub mod values;
pub mod write;

pub use crate::model::{CommandAction, CommandKind, CommandStatus, ReceiptResult, result_code};
pub use crate::mqtt::CommandRequest;
pub use model::{Command, CommandRecord, Delivery, NewCommand, Receipt, ReceiptOutcome, Rejection};
pub use outcome::{WriteIntent, WriteRecord, WriteRequest, WriteStatus};
pub use service::{CommandParts, Commands, CreateError, WRITE_FAILED_RULE};
pub use store::{CommandError, CommandFilter, CommandStore, Created, Swept, Timings};
pub use write::{WriteService, Written};
