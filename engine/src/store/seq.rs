//! Per-device report sequence numbers that only ever go up, across restarts and
//! crashes (WAL-4 of `docs/wal.md`).
//!
//! Numbers are reserved in blocks: before handing out a number above the
//! durable ceiling, the allocator raises the ceiling by a block in one
//! committed write. A restart continues above the last ceiling, so a crash can
//! skip numbers (never more than a block) but never repeat one. A report is
//! published before it is written to the log, so a number must be safe from
//! reuse before its report leaves. The write that raises one device's ceiling
//! tops up every device with less than half a block left, and the start
//! reserves a block for every device it is given, so a fleet that reports at
//! the same pace shares one write per half block.
//!
//! With the state shared on PostgreSQL, blocks are reserved there: a device
//! that moves to another engine continues above every block any engine took for
//! it, so its numbers never repeat across engines (STATE-S8 of `docs/state.md`);
//! reports still in a dead engine's WAL keep the numbers they were given.

use std::collections::HashMap;
use std::sync::Mutex;

use prometheus_client::metrics::counter::Counter;
use redb::{ReadableTable, TableDefinition, WriteTransaction};

use super::database::Store;
use super::error::StoreError;
use super::postgres::Postgres;
use crate::sync::lock;
use crate::telemetry::Metrics;

/// Device id -> highest reserved sequence number.
const CEILINGS: TableDefinition<&str, u64> = TableDefinition::new("seq_ceilings");
/// Device id -> last sequence number committed to the WAL, as engines that
/// wrote a report's number with the report kept it; moved into [`CEILINGS`]
/// when the allocator opens (WAL-8 of `docs/wal.md`).
const LAST_COMMITTED: TableDefinition<&str, u64> = TableDefinition::new("seq_last_committed");
/// Numbers reserved per durable write.
pub const BLOCK: u64 = 1000;

#[derive(Debug, Clone, Copy)]
struct Range {
    next: u64,
    ceiling: u64,
}

impl Range {
    fn left(self) -> u64 {
        (self.ceiling + 1).saturating_sub(self.next)
    }

    /// The range with its ceiling a block higher.
    fn raised(self) -> Range {
        Range {
            next: self.next,
            ceiling: self.ceiling.max(self.next - 1) + BLOCK,
        }
    }
}

/// Hands out sequence numbers per device.
#[derive(Debug)]
pub struct SeqAllocator {
    store: Store,
    ranges: Mutex<HashMap<String, Range>>,
    /// Where blocks are reserved when the state is shared.
    shared: Option<Postgres>,
    /// Durable writes that reserved blocks.
    reservations: Counter,
}

impl SeqAllocator {
    /// Numbers continuing above every durable reservation (in `shared` when
    /// given), with a block reserved now for each of `devices`.
    ///
    /// # Errors
    /// When the tables cannot be read or the reservation cannot be written.
    pub fn open<'a>(
        store: &Store,
        shared: Option<Postgres>,
        devices: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, StoreError> {
        if shared.is_some() {
            return Ok(Self {
                store: store.clone(),
                ranges: Mutex::new(HashMap::new()),
                shared,
                reservations: Counter::default(),
            });
        }
        let write = store.db().begin_write()?;
        let mut ranges = HashMap::new();
        for table in [LAST_COMMITTED, CEILINGS] {
            match write.open_table(table) {
                Ok(table) => {
                    for entry in table.iter()? {
                        let (device, last) = entry?;
                        let next = last.value().saturating_add(1);
                        let range = ranges
                            .entry(device.value().to_owned())
                            .or_insert(Range { next, ceiling: 0 });
                        range.next = range.next.max(next);
                    }
                }
                Err(redb::TableError::TableDoesNotExist(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        write.delete_table(LAST_COMMITTED)?;
        for device in devices {
            ranges.entry(device.to_owned()).or_insert(Range {
                next: 1,
                ceiling: 0,
            });
        }
        // Nothing is reserved until written below.
        for range in ranges.values_mut() {
            range.ceiling = range.next - 1;
        }
        write_raised(&write, &ranges, u64::MAX)?;
        write.commit()?;
        raise(&mut ranges, u64::MAX);
        let reservations = Counter::default();
        reservations.inc();
        Ok(Self {
            store: store.clone(),
            ranges: Mutex::new(ranges),
            shared: None,
            reservations,
        })
    }

    /// Registers the count of durable writes that reserved blocks.
    pub fn register_metrics(&self, metrics: &Metrics) {
        metrics.register(
            "sluice_seq_reservations",
            "Durable writes reserving blocks of report sequence numbers (with redb, the \
             start's one write covers every configured device).",
            self.reservations.clone(),
        );
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
        let fresh = Range {
            next: 1,
            ceiling: 0,
        };
        let mut range = ranges.get(device).copied().unwrap_or(fresh);
        if range.left() == 0 {
            if let Some(shared) = &self.shared {
                let ceiling = shared.reserve_seq(device, BLOCK)?;
                range = Range {
                    next: ceiling + 1 - BLOCK,
                    ceiling,
                };
            } else {
                if !ranges.contains_key(device) {
                    // Nothing reserved yet: a range with no number left.
                    ranges.insert(device.to_owned(), range);
                }
                let write = self.store.db().begin_write()?;
                write_raised(&write, &ranges, BLOCK / 2)?;
                write.commit()?;
                // Only a durable reservation counts.
                raise(&mut ranges, BLOCK / 2);
                range = ranges.get(device).copied().unwrap_or(range);
            }
            self.reservations.inc();
        }
        let seq = range.next;
        range.next += 1;
        match ranges.get_mut(device) {
            Some(slot) => *slot = range,
            None => {
                ranges.insert(device.to_owned(), range);
            }
        }
        Ok(seq)
    }
}

/// Writes, in `write`, the ceilings [`raise`] gives `ranges`.
fn write_raised(
    write: &WriteTransaction,
    ranges: &HashMap<String, Range>,
    below: u64,
) -> Result<(), StoreError> {
    let mut table = write.open_table(CEILINGS)?;
    for (device, range) in ranges {
        if range.left() < below {
            table.insert(device.as_str(), range.raised().ceiling)?;
        }
    }
    Ok(())
}

/// Raises by a block the ceiling of every range with fewer than `below`
/// numbers left (once [`write_raised`] made that durable).
fn raise(ranges: &mut HashMap<String, Range>, below: u64) {
    for range in ranges.values_mut() {
        if range.left() < below {
            *range = range.raised();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("sluice-seq-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn numbers_keep_rising_across_reopen() {
        let dir = scratch("reopen");
        let store = Store::open(&dir).expect("store");
        let seq = SeqAllocator::open(&store, None, ["a"]).expect("seq");
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
        let seq = SeqAllocator::open(&store, None, ["a"]).expect("seq");
        let after = seq.next("a").expect("next");
        assert_eq!(
            after,
            BLOCK + 1,
            "numbers continue above the reserved block"
        );
        assert_eq!(seq.next("b").expect("next"), BLOCK + 1);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn one_write_tops_up_every_device_low_on_numbers() {
        let dir = scratch("top-up");
        let store = Store::open(&dir).expect("store");
        let seq = SeqAllocator::open(&store, None, ["a", "b"]).expect("seq");
        for _ in 0..BLOCK {
            seq.next("a").expect("a");
            seq.next("b").expect("b");
        }
        assert_eq!(seq.reservations.get(), 1, "the start's write covers both");
        // "a" runs out first; the same write gives "b" its next block.
        assert_eq!(seq.next("a").expect("a"), BLOCK + 1);
        assert_eq!(seq.next("b").expect("b"), BLOCK + 1);
        assert_eq!(seq.reservations.get(), 2);
        // A device the start did not know reserves its first block itself.
        assert_eq!(seq.next("c").expect("c"), 1);
        assert_eq!(seq.reservations.get(), 3);
        let ceilings = |store: &Store| {
            let read = redb::ReadableDatabase::begin_read(store.db()).expect("read");
            let table = read.open_table(CEILINGS).expect("table");
            ["a", "b"].map(|d| table.get(d).expect("get").expect("row").value())
        };
        assert_eq!(ceilings(&store), [2 * BLOCK, 2 * BLOCK]);
        drop(seq);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn numbers_an_earlier_engine_committed_with_its_reports_are_not_given_again() {
        let dir = scratch("migrate");
        let store = Store::open(&dir).expect("store");
        let write = store.db().begin_write().expect("write");
        {
            let mut table = write.open_table(LAST_COMMITTED).expect("table");
            table.insert("a", 41).expect("insert");
        }
        write.commit().expect("commit");
        let seq = SeqAllocator::open(&store, None, []).expect("seq");
        assert_eq!(seq.next("a").expect("next"), 42);
        drop(seq);
        let read = redb::ReadableDatabase::begin_read(store.db()).expect("read");
        assert!(
            matches!(
                read.open_table(LAST_COMMITTED),
                Err(redb::TableError::TableDoesNotExist(_))
            ),
            "the old table is moved into the ceilings"
        );
        drop(read);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
