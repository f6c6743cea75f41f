//! The simulator's four data tables, shared by every connection.
//!
//! Each table is a vector of atomics guarded by a sequence counter (a "seqlock"):
//! readers never block and never write to shared memory, so any number of
//! connections can poll in parallel without contending on a cache line; writers
//! take a small mutex, make the counter odd, store, and make it even again. A
//! reader that saw the counter change retries, so a multi-register value written
//! in one call (a FLOAT32 or UINT32 over two registers) is never observed half
//! old, half new.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering, fence};

use crate::sync::lock;

/// One table of `len` 16-bit cells. Bit tables store 0 or 1 per cell.
#[derive(Debug)]
pub(crate) struct Table {
    cells: Vec<AtomicU16>,
    /// Even when stable, odd while a writer is storing.
    seq: AtomicU64,
    /// Serialises writers; readers never touch it.
    writer: Mutex<()>,
}

impl Table {
    pub(crate) fn new(len: u16) -> Self {
        Self {
            cells: (0..len).map(|_| AtomicU16::new(0)).collect(),
            seq: AtomicU64::new(0),
            writer: Mutex::new(()),
        }
    }

    /// Number of cells (addresses `0..len`).
    pub(crate) fn len(&self) -> usize {
        self.cells.len()
    }

    /// True when `count` cells from `start` are all inside the table.
    pub(crate) fn contains(&self, start: u16, count: u16) -> bool {
        usize::from(start) + usize::from(count) <= self.cells.len()
    }

    /// Replaces the content of `dst` with a consistent copy of the cells
    /// `start..start + count`, clipped to the table.
    pub(crate) fn read_into(&self, start: u16, count: u16, dst: &mut Vec<u16>) {
        let range = self.clip(start, usize::from(count));
        let cells = &self.cells[range];
        loop {
            let before = self.seq.load(Ordering::Acquire);
            if before & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            dst.clear();
            dst.extend(cells.iter().map(|c| c.load(Ordering::Relaxed)));
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == before {
                return;
            }
        }
    }

    /// Reads one cell; 0 outside the table.
    pub(crate) fn get(&self, addr: u16) -> u16 {
        // A single atomic load is consistent by itself.
        self.cells
            .get(usize::from(addr))
            .map_or(0, |c| c.load(Ordering::Acquire))
    }

    /// Stores `values` from `start`, as one change for readers. Values that
    /// would fall past the end of the table are dropped.
    pub(crate) fn write(&self, start: u16, values: impl IntoIterator<Item = u16>) {
        let range = self.clip(start, usize::MAX);
        let cells = &self.cells[range];
        let _guard = lock(&self.writer);
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        for (cell, value) in cells.iter().zip(values) {
            cell.store(value, Ordering::Relaxed);
        }
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// The index range `start..start + count` limited to the table.
    fn clip(&self, start: u16, count: usize) -> std::ops::Range<usize> {
        let len = self.cells.len();
        let first = usize::from(start).min(len);
        first..first.saturating_add(count).min(len)
    }
}

/// The four Modbus tables, all of the same size.
#[derive(Debug)]
pub(crate) struct Memory {
    pub(crate) coils: Table,
    pub(crate) discrete: Table,
    pub(crate) input: Table,
    pub(crate) holding: Table,
}

impl Memory {
    pub(crate) fn new(len: u16) -> Self {
        Self {
            coils: Table::new(len),
            discrete: Table::new(len),
            input: Table::new(len),
            holding: Table::new(len),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn clips_reads_and_writes_to_the_table() {
        let t = Table::new(4);
        t.write(2, [7, 8, 9]);
        let mut out = Vec::new();
        t.read_into(0, 10, &mut out);
        assert_eq!(out, [0, 0, 7, 8]);
        t.read_into(9, 1, &mut out);
        assert!(out.is_empty());
        assert_eq!(t.get(3), 8);
        assert_eq!(t.get(4), 0);
        assert!(t.contains(0, 4));
        assert!(!t.contains(1, 4));
        assert!(!t.contains(u16::MAX, u16::MAX));
    }

    #[test]
    fn readers_never_see_half_a_write() {
        let t = Arc::new(Table::new(2));
        let writer = {
            let t = Arc::clone(&t);
            std::thread::spawn(move || {
                for i in 0..20_000u16 {
                    t.write(0, [i, i]);
                }
            })
        };
        let mut out = Vec::new();
        while !writer.is_finished() {
            t.read_into(0, 2, &mut out);
            assert_eq!(out[0], out[1]);
        }
        writer.join().expect("writer thread");
    }
}
