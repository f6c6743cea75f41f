//! The engine's durable state: one redb file in the data directory. Each feature
//! keeps its own tables and opens them from the shared [`Store`]; no redb type
//! leaves the modules that define those tables.

mod seq;
pub(crate) mod tables;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use seq::{LAST_COMMITTED, SeqAllocator};

/// File name of the database inside the data directory.
pub const FILE_NAME: &str = "sluice.redb";

/// Why the store could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("cannot create the data directory {path}: {source}")]
    Directory {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open the database {path}: {detail}")]
    Open { path: PathBuf, detail: String },
    #[error(
        "the database {0} is in use by another process (is another engine running on this data directory?)"
    )]
    Locked(PathBuf),
    #[error("database error: {0}")]
    Database(String),
}

impl StoreError {
    pub(crate) fn db(error: impl std::fmt::Display) -> Self {
        StoreError::Database(error.to_string())
    }
}

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
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Directory {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join(FILE_NAME);
        let db = redb::Database::create(&path).map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => StoreError::Locked(path.clone()),
            other => StoreError::Open {
                path: path.clone(),
                detail: other.to_string(),
            },
        })?;
        Ok(Self {
            db: Arc::new(db),
            path,
        })
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

    pub(crate) fn db(&self) -> &redb::Database {
        &self.db
    }
}
