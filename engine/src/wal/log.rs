//! Where messages wait for their PUBACK: the redb log (durable) or, with the WAL
//! disabled, a memory ring. Both keep append order and apply the overflow policy
//! the same way.

use super::dead_letter::DeadLetter;
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

    /// Sets `letter` aside (WAL-9): keeps it among the dead letters and
    /// removes its record from the log (if the log holds it), in one commit.
    /// Beyond [`super::MAX_DEAD_LETTERS`] the oldest dead letters are dropped;
    /// returns how many were.
    ///
    /// # Errors
    /// When the commit fails: nothing changed.
    fn set_aside(&self, letter: &DeadLetter) -> Result<u64, WalError>;

    /// Every dead letter, oldest first (damaged ones skipped).
    ///
    /// # Errors
    /// When they cannot be read.
    fn dead_letters(&self) -> Result<Vec<DeadLetter>, WalError>;

    /// Removes dead letter `id` and gives it back (`None`: there is none).
    ///
    /// # Errors
    /// When the removal cannot be committed.
    fn take_dead_letter(&self, id: u64) -> Result<Option<DeadLetter>, WalError>;

    /// Dead letters held now.
    fn dead_letter_count(&self) -> u64;
}
