//! Shapes of table the features share: JSON records by id with an index by
//! status, and histories keyed (id, seq). Errors are redb's messages; each
//! feature wraps them in its own error type.

use redb::{ReadableDatabase, ReadableTable, TableDefinition, TableError, WriteTransaction};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Store, StoreError};

fn text(error: impl std::fmt::Display) -> StoreError {
    StoreError::Database(error.to_string())
}

impl Store {
    /// Runs `change` in one write transaction: committed when it returns `Ok`,
    /// aborted (nothing of it kept) when it returns an error.
    ///
    /// # Errors
    /// The error of `change`, or a database failure.
    pub(crate) fn transaction<R, E: From<StoreError>>(
        &self,
        change: impl FnOnce(&WriteTransaction) -> Result<R, E>,
    ) -> Result<R, E> {
        let write = self.db().begin_write().map_err(text)?;
        match change(&write) {
            Ok(value) => {
                write.commit().map_err(text)?;
                Ok(value)
            }
            Err(error) => {
                write.abort().map_err(text)?;
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
        let read = self.db().begin_read().map_err(text)?;
        match read.open_table(table) {
            Ok(table) => Ok(Some(table)),
            Err(TableError::TableDoesNotExist(_)) => Ok(None),
            Err(error) => Err(text(error)),
        }
    }
}

/// The JSON record `id` of `table`.
///
/// # Errors
/// A database failure or a record that does not decode.
pub(crate) fn record<T: DeserializeOwned>(
    table: &impl ReadableTable<u64, &'static [u8]>,
    id: u64,
) -> Result<Option<T>, StoreError> {
    table
        .get(id)
        .map_err(text)?
        .map(|bytes| serde_json::from_slice(bytes.value()).map_err(text))
        .transpose()
}

/// Stores `value` as record `id`, and moves it in `index` from `before` to `now`
/// (its status or state, by name).
///
/// # Errors
/// A database failure.
pub(crate) fn put_indexed<T: Serialize>(
    records: &mut redb::Table<'_, u64, &'static [u8]>,
    index: &mut redb::Table<'_, (&'static str, u64), ()>,
    id: u64,
    (before, now): (Option<&str>, &str),
    value: &T,
) -> Result<(), StoreError> {
    if let Some(before) = before {
        index.remove((before, id)).map_err(text)?;
    }
    index.insert((now, id), ()).map_err(text)?;
    let bytes = serde_json::to_vec(value).map_err(text)?;
    records.insert(id, bytes.as_slice()).map_err(text)?;
    Ok(())
}

/// The ids under `key` in an index keyed (key, id), ascending.
///
/// # Errors
/// A database failure.
pub(crate) fn ids_under(
    index: &impl ReadableTable<(&'static str, u64), ()>,
    key: &str,
) -> Result<Vec<u64>, StoreError> {
    let mut ids = Vec::new();
    for entry in index.range((key, 0)..=(key, u64::MAX)).map_err(text)? {
        ids.push(entry.map_err(text)?.0.value().1);
    }
    Ok(ids)
}

/// The seq the next history record of `id` gets: one past the last, 0 for none.
///
/// # Errors
/// A database failure.
pub(crate) fn next_seq(
    history: &impl ReadableTable<(u64, u32), &'static [u8]>,
    id: u64,
) -> Result<u32, StoreError> {
    let last = history
        .range((id, 0)..=(id, u32::MAX))
        .map_err(text)?
        .next_back()
        .transpose()
        .map_err(text)?;
    Ok(last.map_or(0, |(key, _)| key.value().1 + 1))
}

/// The history records of `id`, in seq order.
///
/// # Errors
/// A database failure or a record that does not decode.
pub(crate) fn history<T: DeserializeOwned>(
    table: &impl ReadableTable<(u64, u32), &'static [u8]>,
    id: u64,
) -> Result<Vec<T>, StoreError> {
    let mut records = Vec::new();
    for entry in table.range((id, 0)..=(id, u32::MAX)).map_err(text)? {
        records.push(serde_json::from_slice(entry.map_err(text)?.1.value()).map_err(text)?);
    }
    Ok(records)
}
