//! A disk that fails on purpose, for crash-consistency tests: after a set number
//! of writes, power is cut. The write under way lands half-way (a torn write) and
//! nothing reaches the disk after it: every later write, resize and sync fails, as
//! for a process killed mid-commit. The file is then opened again, as after a
//! restart, to see that every change is there whole or not at all.

use std::fs::OpenOptions;
use std::io;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};

/// When the simulated power cut comes.
#[derive(Debug)]
pub struct Faults {
    /// Writes that still succeed; `u64::MAX` for a disk that never fails.
    writes_left: AtomicU64,
    cut: AtomicBool,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            writes_left: AtomicU64::new(u64::MAX),
            cut: AtomicBool::new(false),
        }
    }
}

impl Faults {
    /// A disk that works until told otherwise.
    pub fn healthy() -> Arc<Self> {
        Arc::default()
    }

    /// Cuts the power at the write after the next `writes`.
    pub fn cut_after(&self, writes: u64) {
        self.writes_left.store(writes, Ordering::SeqCst);
    }

    /// Whether the power was cut.
    pub fn was_cut(&self) -> bool {
        self.cut.load(Ordering::SeqCst)
    }

    /// Takes the next write: `false` once the power is (or now gets) cut.
    fn take_write(&self) -> bool {
        if self.was_cut() {
            return false;
        }
        let left = self.writes_left.load(Ordering::SeqCst);
        if left == u64::MAX {
            return true;
        }
        if left == 0 {
            self.cut.store(true, Ordering::SeqCst);
            return false;
        }
        self.writes_left.store(left - 1, Ordering::SeqCst);
        true
    }
}

fn power_cut() -> io::Error {
    io::Error::other("simulated power cut")
}

/// The database file behind [`Faults`].
#[derive(Debug)]
pub struct FaultyDisk {
    file: FileBackend,
    faults: Arc<Faults>,
}

impl FaultyDisk {
    /// The file at `path` (made if missing), failing as `faults` says.
    ///
    /// # Errors
    /// When the file cannot be opened.
    pub fn open(path: &Path, faults: Arc<Faults>) -> Result<Self, redb::DatabaseError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(redb::StorageError::from)?;
        Ok(Self {
            file: FileBackend::new(file)?,
            faults,
        })
    }
}

impl StorageBackend for FaultyDisk {
    fn len(&self) -> Result<u64, io::Error> {
        self.file.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        self.file.read(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        if self.faults.was_cut() {
            return Err(power_cut());
        }
        self.file.set_len(len)
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        if self.faults.was_cut() {
            return Err(power_cut());
        }
        self.file.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        if self.faults.take_write() {
            return self.file.write(offset, data);
        }
        // The write the power cut interrupts lands half-way.
        if !data.is_empty() && self.faults.was_cut() {
            let _ = self.file.write(offset, &data[..data.len() / 2]);
        }
        Err(power_cut())
    }

    fn close(&self) -> Result<(), io::Error> {
        self.file.close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.file.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.file.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.file.query_lock_range(start, end)
    }
}
