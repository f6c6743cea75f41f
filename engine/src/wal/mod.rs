//! Store and forward: every report is appended to a write-ahead log before it is
//! published, and leaves the log only after the broker acknowledged it.
//!
//! Reports enter an in-memory ring ([`Outbox::push`]); a committer task drains the
//! ring in batches, one durable redb commit per batch (group commit), so throughput
//! does not fall to the disk's fsync rate. The publisher (`uplink`) reads committed
//! records in id order, publishes them, and releases each on its PUBACK. After a
//! reconnect it publishes the whole log again from its oldest record, so the
//! backlog goes out in order per device, ahead of newer data. The numbered
//! invariants are in `docs/wal.md`; the code cites them.

mod error;
mod log;
mod memory_log;
mod outbox;
mod record;
mod redb_log;

pub use error::WalError;
pub use log::{Appended, MessageLog};
pub use memory_log::MemoryLog;
pub use outbox::{Outbox, OutboxStats, Settled};
pub use record::{Message, Record, RecordError, decode, encode};
pub use redb_log::{FORMAT_VERSION, RedbLog, count};
