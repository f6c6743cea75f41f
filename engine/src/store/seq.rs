//! Per-device report sequence numbers that only ever go up, across restarts and
//! crashes.
//!
//! Numbers are reserved in blocks: before handing out a number above the durable
//! ceiling, the allocator raises the ceiling by a block in one committed write. A
//! restart continues above the last ceiling, so a crash can skip numbers (never
//! more than a block) but never repeat one. One commit per block keeps the cost to
//! a durable write every [`BLOCK`] reports.

use std::collections::HashMap;
use std::sync::Mutex;

use redb::{ReadableDatabase, ReadableTable, TableDefinition};

use super::{Store, StoreError};

/// Device id -> highest reserved sequence number.
const CEILINGS: TableDefinition<&str, u64> = TableDefinition::new("seq_ceilings");
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
}

impl SeqAllocator {
    /// # Errors
    /// When the table cannot be read.
    pub fn open(store: &Store) -> Result<Self, StoreError> {
        let mut ranges = HashMap::new();
        let read = store.db().begin_read().map_err(StoreError::db)?;
        match read.open_table(CEILINGS) {
            Ok(table) => {
                for entry in table.iter().map_err(StoreError::db)? {
                    let (device, ceiling) = entry.map_err(StoreError::db)?;
                    let ceiling = ceiling.value();
                    ranges.insert(
                        device.value().to_owned(),
                        Range {
                            next: ceiling + 1,
                            ceiling,
                        },
                    );
                }
            }
            Err(redb::TableError::TableDoesNotExist(_)) => {}
            Err(error) => return Err(StoreError::db(error)),
        }
        Ok(Self {
            store: store.clone(),
            ranges: Mutex::new(ranges),
        })
    }

    /// The next sequence number of `device` (the first is 1).
    ///
    /// # Errors
    /// When a new block cannot be reserved durably; no number is handed out then.
    pub fn next(&self, device: &str) -> Result<u64, StoreError> {
        let mut ranges = self.ranges.lock().unwrap_or_else(|p| p.into_inner());
        let range = ranges.entry(device.to_owned()).or_insert(Range {
            next: 1,
            ceiling: 0,
        });
        if range.next > range.ceiling {
            let ceiling = range.next + BLOCK - 1;
            let write = self.store.db().begin_write().map_err(StoreError::db)?;
            {
                let mut table = write.open_table(CEILINGS).map_err(StoreError::db)?;
                table.insert(device, ceiling).map_err(StoreError::db)?;
            }
            write.commit().map_err(StoreError::db)?;
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
        let seq = SeqAllocator::open(&store).expect("seq");
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
        let seq = SeqAllocator::open(&store).expect("seq");
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
