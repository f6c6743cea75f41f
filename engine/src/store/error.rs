//! Why the store could not do what it was asked: typed, from the database down.

use std::path::PathBuf;

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    #[error("cannot create the data directory {path}: {source}")]
    Directory {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the database {0} is in use by another process (is another engine running on this data directory?)"
    )]
    Locked(PathBuf),
    #[error("cannot open the database {path}: {source}")]
    Open { path: PathBuf, source: Backend },
    #[error("database error: {0}")]
    Database(Backend),
    #[error("a stored {what} does not decode: {source}")]
    Decode {
        what: &'static str,
        source: serde_json::Error,
    },
    #[error("PostgreSQL: {0}")]
    Postgres(Shared),
    #[error(
        "the database schema is at version {found}, newer than this engine knows ({known}): upgrade the engine"
    )]
    SchemaNewer { found: i32, known: i32 },
    #[error("a stored {what} is malformed: {reason}")]
    Malformed { what: &'static str, reason: String },
    #[error("a {what} cannot be encoded: {source}")]
    Encode {
        what: &'static str,
        source: serde_json::Error,
    },
}

/// An error of the database engine underneath, opaque so that no caller depends
/// on which engine that is.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct Backend(redb::Error);

/// An error of the shared (PostgreSQL) store: the client's, the pool's, or a
/// message of its own.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Shared(Box<dyn std::error::Error + Send + Sync>);

impl Shared {
    pub(crate) fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Box::new(error))
    }

    pub(crate) fn message(text: &str) -> Self {
        Self(text.into())
    }
}

impl Backend {
    pub(super) fn new(error: impl Into<redb::Error>) -> Self {
        Self(error.into())
    }
}

impl StoreError {
    /// Whether the file itself is unusable (unreadable, corrupt, or refusing every
    /// transaction), so a fresh one is the way on; a lock held by another engine
    /// or a directory that cannot be made is not.
    pub fn is_damaged(&self) -> bool {
        matches!(
            self,
            StoreError::Open { .. }
                | StoreError::Database(_)
                | StoreError::Decode { .. }
                | StoreError::Malformed { .. }
        )
    }
}

macro_rules! database_errors {
    ($($error:ty),*) => {
        $(impl From<$error> for StoreError {
            fn from(error: $error) -> Self {
                StoreError::Database(Backend::new(error))
            }
        })*
    };
}

database_errors!(
    redb::Error,
    redb::CursorError,
    redb::StorageError,
    redb::TableError,
    redb::TransactionError,
    redb::CommitError,
    redb::SetDurabilityError
);

/// A PostgreSQL error as a store error.
pub(in crate::store) fn pg(error: tokio_postgres::Error) -> StoreError {
    match error.as_db_error() {
        Some(db) => StoreError::Postgres(Shared::message(&format!(
            "{} ({}){}",
            db.message(),
            db.code().code(),
            db.detail().map(|d| format!(": {d}")).unwrap_or_default()
        ))),
        None => StoreError::Postgres(Shared::new(error)),
    }
}
