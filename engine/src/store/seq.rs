//! Per-device report sequence numbers that only ever go up, across restarts and
//! crashes (WAL-4 of `docs/wal.md`), and that leave a gap only where data was
//! lost or where a crash left numbers unused, announced (WAL-10).
//!
//! Numbers are reserved in blocks: before handing out a number above the
//! durable ceiling, the allocator raises the ceiling by a block in one
//! committed write, so a number is safe from reuse before its report leaves
//! (a report is published before it is written to the log). The write that
//! raises one device's ceiling tops up every device with less than half a
//! block left, and the start reserves a block for every device it is given,
//! so a fleet that reports at the same pace shares one write per half block.
//!
//! A clean stop brings each ceiling down to the last number used, so the next
//! start goes on without a gap. A crash cannot: the numbers between the last
//! one handed out and the ceiling were never used, and nobody knows where the
//! first of them is. So the allocator also keeps a mark per device, the
//! highest number known handed out, written with every reservation and every
//! [`MARK_EVERY`]; after a crash, the numbers above the mark up to the ceiling
//! are announced with the device's first report (the report's `skipped`): a
//! missing number outside an announcement is a lost report, one inside was
//! either never used or lost in the crash.
//!
//! With the state shared on PostgreSQL, blocks and marks are kept there: a
//! device that moves to another engine continues above every block any engine
//! took for it, so its numbers never repeat across engines (STATE-S8 of
//! `docs/state.md`), and the engine that goes on announces what the last one
//! may have left unused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use redb::{ReadableTable, TableDefinition, WriteTransaction};
use tokio::sync::watch;

use super::database::Store;
use super::error::StoreError;
use super::postgres::{GivenBack, Postgres};
use crate::sync::lock;
use crate::telemetry::Metrics;

/// Device id -> highest reserved sequence number.
const CEILINGS: TableDefinition<&str, u64> = TableDefinition::new("seq_ceilings");
/// Device id -> highest sequence number known handed out (WAL-10).
const MARKS: TableDefinition<&str, u64> = TableDefinition::new("seq_marks");
/// Device id -> last sequence number committed to the WAL, as engines that
/// wrote a report's number with the report kept it; moved into [`CEILINGS`]
/// when the allocator opens (WAL-8 of `docs/wal.md`).
const LAST_COMMITTED: TableDefinition<&str, u64> = TableDefinition::new("seq_last_committed");
/// Numbers reserved per durable write.
pub const BLOCK: u64 = 1000;
/// How often the marks of devices that reported since are written: after a
/// crash, what is announced as maybe unused begins at most this long of
/// reports before it.
pub const MARK_EVERY: Duration = Duration::from_secs(10);

/// A device's next number and the highest it may hand out without a write.
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

    /// The highest number handed out.
    fn used(self) -> u64 {
        self.next - 1
    }
}

/// A report's number, and with the first report after a crash the numbers
/// before it that may never have been used (first and last).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Numbered {
    pub seq: u64,
    pub skipped: Option<(u64, u64)>,
}

/// What the allocator knows per device.
#[derive(Debug, Default)]
struct Devices {
    ranges: HashMap<String, Range>,
    /// Numbers maybe left unused by a crash, announced with the device's next
    /// number; until then its mark is not moved (a second crash announces them
    /// again, with the newer ones).
    unsure: HashMap<String, (u64, u64)>,
    /// The mark last written per device.
    marked: HashMap<String, u64>,
}

impl Devices {
    /// Marks that moved since they were last written.
    fn moved_marks(&self) -> Vec<(String, u64)> {
        self.ranges
            .iter()
            .filter(|(device, range)| {
                !self.unsure.contains_key(*device)
                    && self.marked.get(*device).is_none_or(|m| *m < range.used())
            })
            .map(|(device, range)| (device.clone(), range.used()))
            .collect()
    }
}

/// Hands out sequence numbers per device.
#[derive(Debug)]
pub struct SeqAllocator {
    store: Store,
    devices: Mutex<Devices>,
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
                devices: Mutex::default(),
                shared,
                reservations: Counter::default(),
            });
        }
        let write = store.db().begin_write()?;
        let mut known = Devices::default();
        for table in [LAST_COMMITTED, CEILINGS] {
            for (device, last) in read_all(&write, table)? {
                let next = last.saturating_add(1);
                let range = known
                    .ranges
                    .entry(device)
                    .or_insert(Range { next, ceiling: 0 });
                range.next = range.next.max(next);
            }
        }
        write.delete_table(LAST_COMMITTED)?;
        known.marked = read_all(&write, MARKS)?.into_iter().collect();
        for (device, range) in &known.ranges {
            // A file from before marks were kept announces nothing.
            if let Some(mark) = known.marked.get(device)
                && *mark < range.used()
            {
                known
                    .unsure
                    .insert(device.clone(), (mark + 1, range.used()));
            }
        }
        for device in devices {
            known.ranges.entry(device.to_owned()).or_insert(Range {
                next: 1,
                ceiling: 0,
            });
        }
        // Nothing is reserved until written below.
        for range in known.ranges.values_mut() {
            range.ceiling = range.used();
        }
        write_raised(&write, &known, u64::MAX)?;
        write.commit()?;
        raise(&mut known.ranges, u64::MAX);
        let written = known.moved_marks();
        known.marked.extend(written);
        let reservations = Counter::default();
        reservations.inc();
        Ok(Self {
            store: store.clone(),
            devices: Mutex::new(known),
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
            let mut devices = lock(&self.devices);
            devices.ranges.remove(device);
            devices.marked.remove(device);
        }
    }

    /// The next sequence number of `device` (the first is 1).
    ///
    /// # Errors
    /// When a new block cannot be reserved durably; no number is handed out then.
    pub fn next(&self, device: &str) -> Result<Numbered, StoreError> {
        let mut devices = lock(&self.devices);
        let fresh = Range {
            next: 1,
            ceiling: 0,
        };
        let known = devices.ranges.get(device).copied();
        let mut range = known.unwrap_or(fresh);
        if range.left() == 0 {
            if let Some(shared) = &self.shared {
                let reserved = shared.reserve_seq(device, BLOCK)?;
                range = Range {
                    next: reserved.ceiling + 1 - BLOCK,
                    ceiling: reserved.ceiling,
                };
                // Only a device new to this engine follows another's numbers.
                if known.is_none()
                    && let Some(unsure) = reserved.unsure
                {
                    devices.unsure.insert(device.to_owned(), unsure);
                }
            } else {
                if known.is_none() {
                    // Nothing reserved yet: a range with no number left.
                    devices.ranges.insert(device.to_owned(), range);
                }
                let write = self.store.db().begin_write()?;
                write_raised(&write, &devices, BLOCK / 2)?;
                write.commit()?;
                // Only a durable reservation counts.
                raise(&mut devices.ranges, BLOCK / 2);
                let written = devices.moved_marks();
                devices.marked.extend(written);
                range = devices.ranges.get(device).copied().unwrap_or(range);
            }
            self.reservations.inc();
        }
        let seq = range.next;
        range.next += 1;
        // The device's own slot: no key allocated per report.
        match devices.ranges.get_mut(device) {
            Some(slot) => *slot = range,
            None => {
                devices.ranges.insert(device.to_owned(), range);
            }
        }
        // Empty but for the first report after a crash: no hashing per report.
        let skipped = if devices.unsure.is_empty() {
            None
        } else {
            devices.unsure.remove(device)
        };
        Ok(Numbered { seq, skipped })
    }

    /// Writes the marks of the devices that reported since they were last
    /// written (WAL-10).
    ///
    /// # Errors
    /// When the write fails; the marks are tried again next time.
    pub fn mark(&self) -> Result<(), StoreError> {
        let mut devices = lock(&self.devices);
        let moved = devices.moved_marks();
        if moved.is_empty() {
            return Ok(());
        }
        match &self.shared {
            Some(shared) => shared.mark_seq(moved.clone())?,
            None => {
                let write = self.store.db().begin_write()?;
                {
                    let mut table = write.open_table(MARKS)?;
                    for (device, mark) in &moved {
                        table.insert(device.as_str(), *mark)?;
                    }
                }
                write.commit()?;
            }
        }
        devices.marked.extend(moved);
        Ok(())
    }

    /// A clean stop, once no report will be made any more: every device's
    /// ceiling comes down to its last number used, so the next start goes on
    /// from there (WAL-10). A number asked for afterwards is reserved anew.
    ///
    /// # Errors
    /// When the write fails: the numbers stay reserved, and the marks explain
    /// the gap at the next start.
    pub fn close(&self) -> Result<(), StoreError> {
        let mut devices = lock(&self.devices);
        // Each device's last number used, its ceiling, and its new mark: none
        // for a device with numbers still to announce (they stay announced).
        let ends: Vec<(String, Range, Option<u64>)> = devices
            .ranges
            .iter()
            .map(|(device, range)| {
                let mark = (!devices.unsure.contains_key(device)).then_some(range.used());
                (device.clone(), *range, mark)
            })
            .collect();
        match &self.shared {
            Some(shared) => shared.give_back_seq(
                ends.iter()
                    .map(|(device, range, mark)| GivenBack {
                        device: device.clone(),
                        last: range.used(),
                        ceiling: range.ceiling,
                        mark: *mark,
                    })
                    .collect(),
            )?,
            None => {
                let write = self.store.db().begin_write()?;
                {
                    let mut ceilings = write.open_table(CEILINGS)?;
                    let mut marks = write.open_table(MARKS)?;
                    for (device, range, mark) in &ends {
                        ceilings.insert(device.as_str(), range.used())?;
                        if let Some(mark) = mark {
                            marks.insert(device.as_str(), *mark)?;
                        }
                    }
                }
                write.commit()?;
            }
        }
        for (device, range, mark) in ends {
            if let Some(mark) = mark {
                devices.marked.insert(device.clone(), mark);
            }
            if let Some(slot) = devices.ranges.get_mut(&device) {
                slot.ceiling = range.used();
            }
        }
        Ok(())
    }

    /// Writes the marks every [`MARK_EVERY`] until `shutdown`.
    pub async fn keep_marks(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut ticker = tokio::time::interval(MARK_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while crate::clock::next_tick(&mut ticker, &mut shutdown).await {
            let this = Arc::clone(&self);
            match tokio::task::spawn_blocking(move || this.mark()).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::warn!(%error, "cannot write the report numbers' marks"),
                Err(error) => tracing::warn!(%error, "cannot write the report numbers' marks"),
            }
        }
    }
}

/// Every row of `table` in `write`; none when it does not exist yet.
fn read_all(
    write: &WriteTransaction,
    table: TableDefinition<&str, u64>,
) -> Result<Vec<(String, u64)>, StoreError> {
    match write.open_table(table) {
        Ok(table) => table
            .iter()?
            .map(|entry| {
                let (device, value) = entry?;
                Ok((device.value().to_owned(), value.value()))
            })
            .collect(),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(Vec::new()),
        Err(error) => Err(error.into()),
    }
}

/// Writes, in `write`, the ceilings [`raise`] gives the ranges of `devices`,
/// and the marks that moved.
fn write_raised(write: &WriteTransaction, devices: &Devices, below: u64) -> Result<(), StoreError> {
    let mut table = write.open_table(CEILINGS)?;
    for (device, range) in &devices.ranges {
        if range.left() < below {
            table.insert(device.as_str(), range.raised().ceiling)?;
        }
    }
    let mut marks = write.open_table(MARKS)?;
    for (device, mark) in devices.moved_marks() {
        marks.insert(device.as_str(), mark)?;
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
mod tests;
