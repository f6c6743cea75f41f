//! The engine's durable state: one redb file in the data directory (the WAL,
//! the sequence numbers, and by default everything else), or for the leases,
//! alarms, commands and write records a PostgreSQL database several engines
//! share. No redb or PostgreSQL type leaves this module (and `wal`): features
//! keep their state through the interfaces here.
//!
//! - [`Store`]: the redb file, opened (or set aside when damaged);
//! - [`StateDatabase`]: which database holds the shared state;
//! - [`Journal`]: records with a lifecycle and their history rows, changed
//!   together in one transaction (alarms, commands);
//! - [`Keyed`]: values by key (the results of writes);
//! - [`StateStore`]: the entity state (lease) table, an interface a SQL backend
//!   can implement;
//! - [`SeqAllocator`]: report sequence numbers that never repeat;
//! - [`SeenRequests`]: signed downlink messages already handled.

mod database;
mod error;
mod format;
mod journal;
mod keyed;
mod leases;
mod postgres;
mod seen;
mod seq;
mod state_database;

pub use database::{FILE_NAME, Store};
pub use error::{Backend, Shared, StoreError};
pub use format::{FORMAT_KEY, STATE_FORMAT, STATE_META};
pub use journal::{Change, Entry, Index, Journal, Tables};
pub use keyed::Keyed;
pub use leases::{Claimed, RedbStateStore, StateStore};
pub use postgres::{DEFAULT_POOL_SIZE, DeviceOwner, Owned, PgStateStore, Postgres};
pub use seen::{Seen, SeenRequests};
pub use seq::{BLOCK as SEQ_BLOCK, SeqAllocator};
pub use state_database::StateDatabase;
