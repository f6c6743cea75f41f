//! The engine's redb file in the data directory, shared by every feature.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use redb::{ReadableDatabase, TableDefinition, TableError, WriteTransaction};

use super::error::{Backend, StoreError};
use super::format;

/// File name of the database inside the data directory.
pub const FILE_NAME: &str = "sluice.redb";

/// Memory redb may keep of the file's pages unless told otherwise
/// (`collector.store.cacheMb`); it fills as pages are read and written (a long
/// broker outage's WAL writes fill it), never past this. redb's own
/// default (1 GiB) would let a million leases fill a small gateway's memory.
/// A million leases take about 100 MB of pages (docs/performance.md): 64 MiB
/// holds the hot part of them, and keeps the engine's peak RSS near 130 MiB.
pub(super) const DEFAULT_CACHE_BYTES: usize = 64 << 20;

/// The open database, shared by every feature.
#[derive(Debug, Clone)]
pub struct Store {
    db: Arc<redb::Database>,
    path: PathBuf,
}

impl Store {
    /// Opens (or creates) the database in `dir`.
    ///
    /// # Errors
    /// When the directory cannot be created or the file cannot be opened (for
    /// example another engine holds it).
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        Self::open_with_cache(dir, DEFAULT_CACHE_BYTES)
    }

    /// Opens (or creates) the database in `dir`, keeping at most `cache_bytes`
    /// of its pages in memory.
    ///
    /// # Errors
    /// As for [`Store::open`].
    pub fn open_with_cache(dir: &Path, cache_bytes: usize) -> Result<Self, StoreError> {
        let path = Self::prepare(dir)?;
        format::check_before_open(&path)?;
        let db = redb::Builder::new()
            .set_cache_size(cache_bytes)
            .create(&path)
            .map_err(|e| opening(&path, e))?;
        format::stamp(&db)?;
        Ok(Self {
            db: Arc::new(db),
            path,
        })
    }

    /// Opens the database in `dir` on a storage backend of the caller's, made
    /// by `backend` for the file's path (the crash-consistency tests use a disk
    /// whose power they cut in the middle of a commit, then open the file again
    /// with [`Store::open`] to see what survived).
    ///
    /// # Errors
    /// As for [`Store::open`], or when `backend` fails.
    pub fn open_on<B: redb::StorageBackend>(
        dir: &Path,
        backend: impl FnOnce(&Path) -> Result<B, redb::DatabaseError>,
    ) -> Result<Self, StoreError> {
        let path = Self::prepare(dir)?;
        let disk = backend(&path).map_err(|e| opening(&path, e))?;
        let db = redb::Builder::new()
            .set_cache_size(DEFAULT_CACHE_BYTES)
            .create_with_backend(disk)
            .map_err(|e| opening(&path, e))?;
        format::stamp(&db)?;
        Ok(Self {
            db: Arc::new(db),
            path,
        })
    }

    fn prepare(dir: &Path) -> Result<PathBuf, StoreError> {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Directory {
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(dir.join(FILE_NAME))
    }

    /// Moves a damaged database file aside (`sluice.redb.damaged-<ms>`) so a new one
    /// can be created, and returns where it went. Nothing is deleted: the file stays
    /// for inspection or recovery.
    ///
    /// # Errors
    /// When the file cannot be renamed.
    pub fn set_aside(dir: &Path) -> Result<PathBuf, StoreError> {
        let path = dir.join(FILE_NAME);
        let aside = dir.join(format!("{FILE_NAME}.damaged-{}", crate::clock::now_ms()));
        std::fs::rename(&path, &aside).map_err(|source| StoreError::Directory {
            path: path.clone(),
            source,
        })?;
        Ok(aside)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The database, for the modules that keep their own tables (the WAL).
    pub(crate) fn db(&self) -> &redb::Database {
        &self.db
    }

    /// Runs `change` in one write transaction: committed when it returns `Ok`,
    /// aborted (nothing of it kept) when it returns an error.
    ///
    /// # Errors
    /// The error of `change`, or a database failure.
    pub(crate) fn transaction<R, E: From<StoreError>>(
        &self,
        change: impl FnOnce(&WriteTransaction) -> Result<R, E>,
    ) -> Result<R, E> {
        let write = self.db.begin_write().map_err(StoreError::from)?;
        match change(&write) {
            Ok(value) => {
                write.commit().map_err(StoreError::from)?;
                Ok(value)
            }
            Err(error) => {
                write.abort().map_err(StoreError::from)?;
                Err(error)
            }
        }
    }

    /// Reads from `table`; `None` while nothing has created it yet.
    ///
    /// # Errors
    /// A database failure.
    pub(crate) fn read_table<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        table: TableDefinition<K, V>,
    ) -> Result<Option<redb::ReadOnlyTable<K, V>>, StoreError> {
        let read = self.db.begin_read()?;
        match read.open_table(table) {
            Ok(table) => Ok(Some(table)),
            Err(TableError::TableDoesNotExist(_)) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }
}

/// The error of opening the file at `path`.
fn opening(path: &Path, error: redb::DatabaseError) -> StoreError {
    match error {
        redb::DatabaseError::DatabaseAlreadyOpen => StoreError::Locked(path.to_path_buf()),
        source => StoreError::Open {
            path: path.to_path_buf(),
            source: Backend::new(source),
        },
    }
}
