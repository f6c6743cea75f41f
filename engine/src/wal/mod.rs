//! Store and forward: a report the broker has not acknowledged soon after its
//! push is kept in a write-ahead log until it has; nothing is lost while the
//! uplink is down.
//!
//! Reports enter the outbox in memory ([`Outbox::push`]), numbered in push
//! order, and the publisher (`uplink`) publishes them at once. A PUBACK within
//! the hold (`groupCommitMs`) lets a report go without ever touching the disk;
//! the committer writes the others, in batches, one durable redb commit each,
//! so throughput does not fall to the disk's fsync rate. The publisher reads
//! the log first, then memory, in id order, and releases each record on its
//! PUBACK; after a reconnect it starts again from the oldest record, so the
//! backlog goes out in order per device, ahead of newer data. The numbered
//! invariants are in `docs/wal.md`; the code cites them.

mod dead_letter;
mod error;
mod log;
mod memory_log;
mod outbox;
mod record;
mod redb_log;
mod staging;

pub use dead_letter::{DeadLetter, DeadLetterView, MAX_DEAD_LETTERS};
pub use error::WalError;
pub use log::{Appended, MessageLog};
pub use memory_log::MemoryLog;
pub use outbox::{Outbox, OutboxStats, Settled};
pub use record::{Message, Record, RecordError, decode, encode};
pub use redb_log::{FORMAT_VERSION, RedbLog, count};
