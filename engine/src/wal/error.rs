//! Why the WAL failed.

use crate::store::StoreError;

/// Why the WAL failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WalError {
    #[error(
        "the WAL in {path} has format version {found}, newer than this engine's {supported}: run a newer engine, or move the file aside to start with an empty log"
    )]
    NewerFormat {
        found: u64,
        supported: u64,
        path: String,
    },
    #[error("WAL: {0}")]
    Store(#[from] StoreError),
}
