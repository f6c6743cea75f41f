//! Per-device report sequence numbers that only ever go up, across restarts and
//! crashes.
//!
//! With the WAL on, the WAL's commit records each device's last committed number
//! in the same transaction as the reports ([`LAST_COMMITTED`]); a restart continues
//! right after it. A report lost in a crash was never committed, hence never
//! published, so its number is given again: consumers see no gap and no number
//! with two different contents (invariant 4 of `docs/wal.md`).
//!
//! With the WAL off, numbers are reserved in blocks: before handing out a number
//! above the durable ceiling, the allocator raises the ceiling by a block in one
//! committed write. A restart continues above the last ceiling, so a crash can skip
//! numbers (never more than a block) but never repeat one.
//!
//! With the state shared on PostgreSQL, blocks are reserved there, whatever the
//! WAL does: a device that moves to another engine continues above every block
//! any engine took for it, so its numbers never repeat across engines (S8 of
//! `docs/state.md`); reports still in a dead engine's WAL keep the numbers
//! they were given.

use std::collections::HashMap;
use std::sync::Mutex;

use redb::{ReadableDatabase, ReadableTable, TableDefinition};

use super::database::Store;
use super::error::StoreError;
use super::postgres::Postgres;
use crate::sync::lock;

/// Device id -> highest reserved sequence number (WAL off).
const CEILINGS: TableDefinition<&str, u64> = TableDefinition::new("seq_ceilings");
/// Device id -> last sequence number committed to the WAL (WAL on); written by
/// the WAL in its append transaction.
pub const LAST_COMMITTED: TableDefinition<&str, u64> = TableDefinition::new("seq_last_committed");
/// Numbers reserved per durable write.
pub const BLOCK: u64 = 1000;

#[derive(Debug, Clone, Copy)]
struct Range {
    next: u64,
    ceiling: u64,
}

/// Hands out sequence numbers per device.
#[derive(Debug)]
pub struct SeqAllocator {
    store: Store,
    ranges: Mutex<HashMap<String, Range>>,
    wal_enabled: bool,
    /// Where blocks are reserved when the state is shared.
    shared: Option<Postgres>,
}

impl SeqAllocator {
    /// Numbers continuing from what the WAL committed (`wal_enabled`), or from
    /// durable block reservations (in `shared` when given).
    ///
    /// # Errors
    /// When the table cannot be read.
    pub fn open(
        store: &Store,
        wal_enabled: bool,
        shared: Option<Postgres>,
    ) -> Result<Self, StoreError> {
        if shared.is_some() {
            return Ok(Self {
                store: store.clone(),
                ranges: Mutex::new(HashMap::new()),
                wal_enabled: false,
                shared,
            });
        }
        let mut ranges = HashMap::new();
        let read = store.db().begin_read()?;
        let table = if wal_enabled {
            LAST_COMMITTED
        } else {
            CEILINGS
        };
        match read.open_table(table) {
            Ok(table) => {
                for entry in table.iter()? {
                    let (device, last) = entry?;
                    let last = last.value();
                    // With the WAL there is nothing to reserve: the ceiling is unlimited.
                    let ceiling = if wal_enabled { u64::MAX } else { last };
                    ranges.insert(
                        device.value().to_owned(),
                        Range {
                            next: last + 1,
                            ceiling,
                        },
                    );
                }
            }
            Err(redb::TableError::TableDoesNotExist(_)) => {}
            Err(error) => return Err(error.into()),
        }
        Ok(Self {
            store: store.clone(),
            ranges: Mutex::new(ranges),
            wal_enabled,
            shared: None,
        })
    }

    /// Forgets the numbers reserved for `device`: the next one comes from a new
    /// block, above whatever another engine took for it meanwhile.
    pub fn forget(&self, device: &str) {
        if self.shared.is_some() {
            lock(&self.ranges).remove(device);
        }
    }

    /// The next sequence number of `device` (the first is 1).
    ///
    /// # Errors
    /// When a new block cannot be reserved durably; no number is handed out then.
    pub fn next(&self, device: &str) -> Result<u64, StoreError> {
        let mut ranges = lock(&self.ranges);
        let ceiling = if self.wal_enabled { u64::MAX } else { 0 };
        let range = ranges
            .entry(device.to_owned())
            .or_insert(Range { next: 1, ceiling });
        if range.next > range.ceiling
            && let Some(shared) = &self.shared
        {
            let ceiling = shared.reserve_seq(device, BLOCK)?;
            range.next = ceiling + 1 - BLOCK;
            range.ceiling = ceiling;
        } else if range.next > range.ceiling {
            let ceiling = range.next + BLOCK - 1;
            let write = self.store.db().begin_write()?;
            {
                let mut table = write.open_table(CEILINGS)?;
                table.insert(device, ceiling)?;
            }
            write.commit()?;
            range.ceiling = ceiling;
        }
        let seq = range.next;
        range.next += 1;
        Ok(seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_rising_across_reopen() {
        let dir = std::env::temp_dir().join(format!("sluice-seq-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::open(&dir).expect("store");
        let seq = SeqAllocator::open(&store, false, None).expect("seq");
        assert_eq!(
            (
                seq.next("a").expect("1"),
                seq.next("a").expect("2"),
                seq.next("b").expect("1")
            ),
            (1, 2, 1)
        );
        drop(seq);
        drop(store);
        let store = Store::open(&dir).expect("reopen");
        let seq = SeqAllocator::open(&store, false, None).expect("seq");
        let after = seq.next("a").expect("next");
        assert!(
            after > 2,
            "after a restart numbers continue above the reserved block: {after}"
        );
        assert_eq!(after, BLOCK + 1);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
