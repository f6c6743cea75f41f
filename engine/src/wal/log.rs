//! Where messages wait for their PUBACK: the redb log (durable) or, with the WAL
//! disabled, a memory ring. Both keep append order and apply the overflow policy
//! the same way.

use super::error::WalError;
use super::record::Record;
use crate::config::OverflowPolicy;

/// What an append did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Appended {
    /// Messages stored.
    pub stored: u64,
    /// Older messages dropped to make room (DROP_OLDEST).
    pub dropped_oldest: u64,
    /// New messages refused for lack of room (DROP_NEWEST).
    pub dropped_newest: u64,
}

/// A log of messages awaiting their PUBACK.
pub trait MessageLog: Send + Sync + std::fmt::Debug {
    /// Stores `records` under their ids (each above every id stored before, in
    /// rising order), all in one durable commit; when the quota is reached the
    /// policy decides what is dropped.
    ///
    /// # Errors
    /// When the commit fails: nothing of the batch is stored.
    fn append(&self, records: Vec<Record>, policy: OverflowPolicy) -> Result<Appended, WalError>;

    /// The id after every id this log has stored (and ever will have had,
    /// across restarts): where new records are numbered from.
    fn next_id(&self) -> u64;

    /// Up to `limit` records with ids above `after` (all when `None`), in id order.
    /// Damaged records are skipped, counted and removed.
    ///
    /// # Errors
    /// When the log cannot be read.
    fn read_after(&self, after: Option<u64>, limit: usize) -> Result<Vec<Record>, WalError>;

    /// Removes acknowledged records (ids that are gone already are ignored).
    ///
    /// # Errors
    /// When the removal cannot be committed.
    fn release(&self, ids: &[u64]) -> Result<(), WalError>;

    /// Records and bytes held now.
    fn size(&self) -> (u64, u64);

    /// Damaged records found and skipped so far.
    fn corrupt(&self) -> u64;
}
