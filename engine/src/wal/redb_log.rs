//! The durable log in redb (table layout and invariants: `docs/wal.md`).

use std::sync::Mutex;

use redb::{Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};

use super::dead_letter::{DeadLetter, MAX_DEAD_LETTERS};
use super::error::WalError;
use super::log::{Appended, MessageLog};
use super::record::{Record, decode, encode};
use crate::config::OverflowPolicy;
use crate::store::{Store, StoreError};
use crate::sync::lock;

/// Record id -> encoded record.
const RECORDS: TableDefinition<u64, &[u8]> = TableDefinition::new("wal_records");
/// Record id -> a message set aside (WAL-9; `dead_letter.rs`).
const DEAD_LETTERS: TableDefinition<u64, &[u8]> = TableDefinition::new("wal_dead_letters");
/// Format version and counters.
const META: TableDefinition<&str, u64> = TableDefinition::new("wal_meta");
/// The format this engine writes (WAL-6).
pub const FORMAT_VERSION: u64 = 1;

#[derive(Debug, Default)]
struct Counters {
    next_id: u64,
    records: u64,
    bytes: u64,
    corrupt: u64,
    dead_letters: u64,
}

/// The WAL in the engine's redb file.
#[derive(Debug)]
pub struct RedbLog {
    store: Store,
    quota_bytes: u64,
    counters: Mutex<Counters>,
}

fn db(error: impl Into<StoreError>) -> WalError {
    WalError::Store(error.into())
}

impl RedbLog {
    /// Opens the log, checking its format version and every record's checksum.
    ///
    /// # Errors
    /// A log written in a newer format (refused with a message saying what to do),
    /// or a database error.
    pub fn open(store: &Store, quota_bytes: u64) -> Result<Self, WalError> {
        let write = store.db().begin_write().map_err(db)?;
        let mut counters = Counters::default();
        let mut damaged = Vec::new();
        {
            let mut meta = write.open_table(META).map_err(db)?;
            let records = write.open_table(RECORDS).map_err(db)?;
            let dead = write.open_table(DEAD_LETTERS).map_err(db)?;
            counters.dead_letters = dead.len().map_err(db)?;
            // A dead letter keeps its record id: new records are numbered above it.
            let last_dead = dead.last().map_err(db)?.map_or(0, |(id, _)| id.value());
            let format = meta.get("format").map_err(db)?.map(|v| v.value());
            match format {
                None => {
                    meta.insert("format", FORMAT_VERSION).map_err(db)?;
                }
                Some(version) if version > FORMAT_VERSION => {
                    return Err(WalError::NewerFormat {
                        found: version,
                        supported: FORMAT_VERSION,
                        path: store.path().display().to_string(),
                    });
                }
                Some(_) => {}
            }
            counters.next_id = meta
                .get("next_id")
                .map_err(db)?
                .map(|v| v.value())
                .unwrap_or(1)
                .max(last_dead + 1);
            for entry in records.iter().map_err(db)? {
                let (id, value) = entry.map_err(db)?;
                let (id, value) = (id.value(), value.value());
                counters.next_id = counters.next_id.max(id + 1);
                if decode(value).is_ok() {
                    counters.records += 1;
                    counters.bytes += value.len() as u64;
                } else {
                    damaged.push(id);
                }
            }
        }
        if !damaged.is_empty() {
            tracing::error!(
                records = damaged.len(),
                "damaged WAL records skipped and removed"
            );
            let mut records = write.open_table(RECORDS).map_err(db)?;
            for id in &damaged {
                records.remove(id).map_err(db)?;
            }
            counters.corrupt = damaged.len() as u64;
        }
        write.commit().map_err(db)?;
        Ok(Self {
            store: store.clone(),
            quota_bytes,
            counters: Mutex::new(counters),
        })
    }

    fn counters(&self) -> std::sync::MutexGuard<'_, Counters> {
        lock(&self.counters)
    }
}

impl MessageLog for RedbLog {
    fn append(&self, batch: Vec<Record>, policy: OverflowPolicy) -> Result<Appended, WalError> {
        let mut counters = self.counters();
        let mut outcome = Appended::default();
        let (mut next_id, mut records_held, mut bytes) =
            (counters.next_id, counters.records, counters.bytes);
        let write = self.store.db().begin_write().map_err(db)?;
        {
            let mut records = write.open_table(RECORDS).map_err(db)?;
            for Record { id, message } in batch {
                next_id = next_id.max(id + 1);
                let encoded = encode(&message);
                let size = encoded.len() as u64;
                // WAL-7: the policy applies only when the quota is reached.
                if bytes + size > self.quota_bytes && policy == OverflowPolicy::DropOldest {
                    while bytes + size > self.quota_bytes {
                        let Some((_, value)) = records.pop_first().map_err(db)? else {
                            break;
                        };
                        bytes -= value.value().len() as u64;
                        records_held -= 1;
                        outcome.dropped_oldest += 1;
                    }
                }
                if bytes + size > self.quota_bytes {
                    // A refused report keeps its number used: consumers see the gap.
                    outcome.dropped_newest += 1;
                    continue;
                }
                records.insert(id, encoded.as_slice()).map_err(db)?;
                records_held += 1;
                bytes += size;
                outcome.stored += 1;
            }
            let mut meta = write.open_table(META).map_err(db)?;
            meta.insert("next_id", next_id).map_err(db)?;
        }
        write.commit().map_err(db)?;
        counters.next_id = next_id;
        counters.records = records_held;
        counters.bytes = bytes;
        Ok(outcome)
    }

    fn read_after(&self, after: Option<u64>, limit: usize) -> Result<Vec<Record>, WalError> {
        let start = after.map_or(0, |id| id.saturating_add(1));
        let mut out = Vec::new();
        let mut damaged = Vec::new();
        {
            let read = self.store.db().begin_read().map_err(db)?;
            let records = match read.open_table(RECORDS) {
                Ok(table) => table,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(out),
                Err(error) => return Err(db(error)),
            };
            for entry in records.range(start..).map_err(db)? {
                if out.len() >= limit {
                    break;
                }
                let (id, value) = entry.map_err(db)?;
                match decode(value.value()) {
                    Ok(message) => out.push(Record {
                        id: id.value(),
                        message,
                    }),
                    Err(_) => damaged.push((id.value(), value.value().len() as u64)),
                }
            }
        }
        if !damaged.is_empty() {
            tracing::error!(
                records = damaged.len(),
                "damaged WAL records skipped and removed"
            );
            let ids: Vec<u64> = damaged.iter().map(|(id, _)| *id).collect();
            self.release(&ids)?;
            self.counters().corrupt += ids.len() as u64;
        }
        Ok(out)
    }

    fn release(&self, ids: &[u64]) -> Result<(), WalError> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut counters = self.counters();
        let mut write = self.store.db().begin_write().map_err(db)?;
        // A lost release only means a duplicate publish after a crash (at-least-once),
        // so releases need not wait for the disk; the next durable commit carries them.
        write.set_durability(Durability::None).map_err(db)?;
        let (mut records_held, mut bytes) = (counters.records, counters.bytes);
        {
            let mut records = write.open_table(RECORDS).map_err(db)?;
            for id in ids {
                if let Some(value) = records.remove(id).map_err(db)? {
                    bytes = bytes.saturating_sub(value.value().len() as u64);
                    records_held = records_held.saturating_sub(1);
                }
            }
        }
        write.commit().map_err(db)?;
        counters.records = records_held;
        counters.bytes = bytes;
        Ok(())
    }

    fn set_aside(&self, letter: &DeadLetter) -> Result<u64, WalError> {
        let mut counters = self.counters();
        let write = self.store.db().begin_write().map_err(db)?;
        let (mut records_held, mut bytes) = (counters.records, counters.bytes);
        let mut dropped = 0;
        let held;
        {
            let mut records = write.open_table(RECORDS).map_err(db)?;
            if let Some(value) = records.remove(letter.id).map_err(db)? {
                bytes = bytes.saturating_sub(value.value().len() as u64);
                records_held = records_held.saturating_sub(1);
            }
            let mut dead = write.open_table(DEAD_LETTERS).map_err(db)?;
            dead.insert(letter.id, letter.encode().as_slice())
                .map_err(db)?;
            while dead.len().map_err(db)? > MAX_DEAD_LETTERS as u64 {
                dead.pop_first().map_err(db)?;
                dropped += 1;
            }
            held = dead.len().map_err(db)?;
        }
        write.commit().map_err(db)?;
        counters.records = records_held;
        counters.bytes = bytes;
        counters.dead_letters = held;
        Ok(dropped)
    }

    fn dead_letters(&self) -> Result<Vec<DeadLetter>, WalError> {
        let read = self.store.db().begin_read().map_err(db)?;
        let table = match read.open_table(DEAD_LETTERS) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(error) => return Err(db(error)),
        };
        let mut letters = Vec::new();
        for entry in table.iter().map_err(db)? {
            let (id, value) = entry.map_err(db)?;
            match DeadLetter::decode(id.value(), value.value()) {
                Ok(letter) => letters.push(letter),
                Err(error) => {
                    tracing::error!(id = id.value(), %error, "a damaged dead letter skipped");
                }
            }
        }
        Ok(letters)
    }

    fn take_dead_letter(&self, id: u64) -> Result<Option<DeadLetter>, WalError> {
        let mut counters = self.counters();
        let write = self.store.db().begin_write().map_err(db)?;
        let taken;
        let held;
        {
            let mut dead = write.open_table(DEAD_LETTERS).map_err(db)?;
            taken = dead
                .remove(id)
                .map_err(db)?
                .map(|value| DeadLetter::decode(id, value.value()));
            held = dead.len().map_err(db)?;
        }
        write.commit().map_err(db)?;
        counters.dead_letters = held;
        // A damaged one is gone all the same: there is nothing to give back.
        Ok(taken.and_then(Result::ok))
    }

    fn dead_letter_count(&self) -> u64 {
        self.counters().dead_letters
    }

    fn next_id(&self) -> u64 {
        self.counters().next_id
    }

    fn size(&self) -> (u64, u64) {
        let counters = self.counters();
        (counters.records, counters.bytes)
    }

    fn corrupt(&self) -> u64 {
        self.counters().corrupt
    }
}

/// How many records a log file holds (for tests and tools).
///
/// # Errors
/// A database error.
pub fn count(store: &Store) -> Result<u64, WalError> {
    let read = store.db().begin_read().map_err(db)?;
    match read.open_table(RECORDS) {
        Ok(table) => table.len().map_err(db),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(0),
        Err(error) => Err(db(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::{MemoryLog, Message};

    fn store(name: &str) -> (Store, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("sluice-wal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        (Store::open(&dir).expect("store"), dir)
    }

    fn message(device: &str, seq: u64, size: usize) -> Message {
        Message {
            device: device.into(),
            seq,
            topic: format!("P/{device}/property/post"),
            payload: vec![b'x'; size].into(),
            retain: false,
        }
    }

    /// `messages` with the next ids of `log`, as the outbox gives them.
    fn numbered(log: &dyn MessageLog, messages: impl IntoIterator<Item = Message>) -> Vec<Record> {
        (log.next_id()..)
            .zip(messages)
            .map(|(id, message)| Record { id, message })
            .collect()
    }

    fn seqs(log: &dyn MessageLog) -> Vec<u64> {
        log.read_after(None, usize::MAX)
            .expect("read")
            .into_iter()
            .map(|r| r.message.seq)
            .collect()
    }

    #[test]
    fn records_keep_order_survive_reopen_and_leave_on_release() {
        let (store, dir) = store("order");
        let log = RedbLog::open(&store, u64::MAX).expect("open");
        let batch: Vec<Message> = (1..=5).map(|s| message("a", s, 10)).collect();
        assert_eq!(
            log.append(numbered(&log, batch), OverflowPolicy::DropOldest)
                .expect("append")
                .stored,
            5
        );
        let records = log.read_after(None, 10).expect("read");
        assert_eq!(
            records.iter().map(|r| r.message.seq).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );
        let after_second = log.read_after(Some(records[1].id), 2).expect("read");
        assert_eq!(
            after_second
                .iter()
                .map(|r| r.message.seq)
                .collect::<Vec<_>>(),
            [3, 4]
        );
        log.release(&[records[0].id, records[2].id, 9999])
            .expect("release");
        drop(log);
        let log = RedbLog::open(&store, u64::MAX).expect("reopen");
        assert_eq!(seqs(&log), [2, 4, 5]);
        assert_eq!(log.size().0, 3);
        // Ids keep growing after a reopen: new records come after the old ones.
        log.append(
            numbered(&log, [message("a", 6, 10)]),
            OverflowPolicy::DropOldest,
        )
        .expect("append");
        assert_eq!(seqs(&log), [2, 4, 5, 6]);
        drop(store);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_quota_applies_each_policy() {
        let (store, dir) = store("quota");
        let one = encode(&message("a", 1, 100)).len() as u64;
        let log = RedbLog::open(&store, one * 3).expect("open");
        let batch = |from: u64| {
            (from..from + 5)
                .map(|s| message("a", s, 100))
                .collect::<Vec<_>>()
        };
        let newest = log
            .append(numbered(&log, batch(1)), OverflowPolicy::DropNewest)
            .expect("append");
        assert_eq!((newest.stored, newest.dropped_newest), (3, 2));
        assert_eq!(seqs(&log), [1, 2, 3]);
        let oldest = log
            .append(numbered(&log, batch(6)), OverflowPolicy::DropOldest)
            .expect("append");
        assert_eq!((oldest.stored, oldest.dropped_oldest), (5, 5));
        assert_eq!(seqs(&log), [8, 9, 10]);
        assert!(log.size().1 <= one * 3);
        drop(store);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_newer_format_is_refused_and_damaged_records_are_skipped() {
        let (store, dir) = store("format");
        let log = RedbLog::open(&store, u64::MAX).expect("open");
        log.append(
            numbered(&log, (1..=3).map(|s| message("a", s, 10))),
            OverflowPolicy::DropOldest,
        )
        .expect("append");
        drop(log);
        // Damage record 2's payload behind redb's back.
        let write = store.db().begin_write().expect("write");
        {
            let mut records = write.open_table(RECORDS).expect("table");
            let mut bytes = records
                .get(2)
                .expect("get")
                .expect("record 2")
                .value()
                .to_vec();
            let last = bytes.len() - 1;
            bytes[last] ^= 0xFF;
            records.insert(2, bytes.as_slice()).expect("insert");
        }
        write.commit().expect("commit");
        let log = RedbLog::open(&store, u64::MAX).expect("open with damage");
        assert_eq!(seqs(&log), [1, 3]);
        assert_eq!(log.corrupt(), 1);
        drop(log);

        let write = store.db().begin_write().expect("write");
        {
            let mut meta = write.open_table(META).expect("meta");
            meta.insert("format", FORMAT_VERSION + 1).expect("insert");
        }
        write.commit().expect("commit");
        let refused = RedbLog::open(&store, u64::MAX).expect_err("newer format");
        assert!(
            matches!(
                refused,
                WalError::NewerFormat {
                    found: 2,
                    supported: 1,
                    ..
                }
            ),
            "{refused}"
        );
        assert!(
            refused.to_string().contains("run a newer engine"),
            "{refused}"
        );
        drop(store);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_memory_ring_applies_each_policy() {
        let ring = MemoryLog::new(3);
        let five = |from: u64| {
            (from..from + 5)
                .map(|s| message("a", s, 1))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ring.append(numbered(&ring, five(1)), OverflowPolicy::DropNewest)
                .expect("append")
                .dropped_newest,
            2
        );
        assert_eq!(seqs(&ring), [1, 2, 3]);
        assert_eq!(
            ring.append(numbered(&ring, five(6)), OverflowPolicy::DropOldest)
                .expect("append")
                .dropped_oldest,
            5
        );
        assert_eq!(seqs(&ring), [8, 9, 10]);
        let first = ring.read_after(None, 1).expect("read")[0].id;
        ring.release(&[first]).expect("release");
        assert_eq!(seqs(&ring), [9, 10]);
    }
}
