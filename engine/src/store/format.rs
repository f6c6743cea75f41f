//! The state format: the layout of the redb file's tables an engine writes
//! (WAL-8 of `docs/wal.md`).
//! Every engine stamps the file it opens with its format. A file stamped with
//! none was written by an earlier version: it is read, each store moving what
//! an earlier layout kept (the leases' `migrate.rs`), and stamped. A file
//! stamped with a newer format is refused with a message, before anything is
//! written to it (the WAL's own records carry a format too: WAL-6 of
//! `docs/wal.md`).

use std::path::Path;

use redb::{ReadableDatabase, TableDefinition, TableError};

use super::error::StoreError;

/// The format this engine writes. 3: lease rows are keyed by tenant
/// (`tenant_lease_row`; an engine of format 2 would not find them and would
/// start every entity anew). 2: every device's sequence numbers are kept as
/// reserved ceilings (`seq_ceilings`), whatever the WAL does; format 1 kept
/// the last number written with a report when the WAL was on.
pub const STATE_FORMAT: u64 = 3;

/// `format` -> the state format of the file.
pub const STATE_META: TableDefinition<&str, u64> = TableDefinition::new("state_meta");

/// The key of the format in [`STATE_META`].
pub const FORMAT_KEY: &str = "format";

/// The stamp of `db`, if it has one.
fn stamped(db: &impl ReadableDatabase) -> Result<Option<u64>, StoreError> {
    let read = db.begin_read()?;
    match read.open_table(STATE_META) {
        Ok(table) => Ok(table.get(FORMAT_KEY)?.map(|v| v.value())),
        Err(TableError::TableDoesNotExist(_)) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

fn refuse_newer(found: Option<u64>) -> Result<(), StoreError> {
    match found {
        Some(found) if found > STATE_FORMAT => Err(StoreError::SchemaNewer {
            found: i32::try_from(found).unwrap_or(i32::MAX),
            known: i32::try_from(STATE_FORMAT).unwrap_or(i32::MAX),
        }),
        _ => Ok(()),
    }
}

/// Refuses a file of a newer format read-only, so that it is left exactly as
/// it is. A file that is absent, held by another engine or in need of recovery
/// is left to the write open, which says what is wrong or recovers it.
///
/// # Errors
/// A newer format, or a file that opened but cannot be read.
pub(super) fn check_before_open(path: &Path) -> Result<(), StoreError> {
    if !path.exists() {
        return Ok(());
    }
    match redb::Builder::new()
        .set_cache_size(1 << 20)
        .open_read_only(path)
    {
        Ok(db) => refuse_newer(stamped(&db)?),
        Err(_) => Ok(()),
    }
}

/// Refuses a newer format; stamps a file without a format, or with an older
/// one, with this one.
///
/// # Errors
/// A newer format, or a database failure.
pub(super) fn stamp(db: &redb::Database) -> Result<(), StoreError> {
    let found = stamped(db)?;
    refuse_newer(found)?;
    if found != Some(STATE_FORMAT) {
        let write = db.begin_write()?;
        write
            .open_table(STATE_META)?
            .insert(FORMAT_KEY, STATE_FORMAT)?;
        write.commit()?;
    }
    Ok(())
}
