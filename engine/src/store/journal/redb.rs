//! The journal on redb: a record kind's three tables and its indexes in the
//! engine's file, every change one write transaction.

use std::borrow::Borrow;
use std::fmt;
use std::marker::PhantomData;

use redb::{Key, ReadableDatabase, ReadableTable, Table, TableDefinition, TableError, TableHandle};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::schema::{Entry, Index, Tables};
use crate::store::database::Store;
use crate::store::error::StoreError;

type Records = TableDefinition<'static, u64, &'static [u8]>;
type ByState = TableDefinition<'static, (&'static str, u64), ()>;
type History = TableDefinition<'static, (u64, u32), &'static [u8]>;

/// One record kind (`R`) and its history rows (`H`) in the store.
pub(super) struct RedbJournal<R, H> {
    store: Store,
    records: Records,
    by_state: ByState,
    history: History,
    kinds: PhantomData<fn() -> (R, H)>,
}

impl<R, H> fmt::Debug for RedbJournal<R, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedbJournal")
            .field("records", &self.records.name())
            .field("path", &self.store.path())
            .finish_non_exhaustive()
    }
}

fn decode<T: DeserializeOwned>(what: &'static str, bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|source| StoreError::Decode { what, source })
}

fn encode<T: Serialize>(what: &'static str, value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|source| StoreError::Encode { what, source })
}

/// The history rows of `id` in `table`, in order.
fn rows<H: DeserializeOwned>(
    table: &impl ReadableTable<(u64, u32), &'static [u8]>,
    id: u64,
) -> Result<Vec<H>, StoreError> {
    let mut rows = Vec::new();
    for entry in table.range((id, 0)..=(id, u32::MAX))? {
        rows.push(decode("history row", entry?.1.value())?);
    }
    Ok(rows)
}

/// The ids in `state`, ascending.
fn ids_under(
    index: &impl ReadableTable<(&'static str, u64), ()>,
    state: &str,
) -> Result<Vec<u64>, StoreError> {
    let mut ids = Vec::new();
    for entry in index.range((state, 0)..=(state, u64::MAX))? {
        ids.push(entry?.0.value().1);
    }
    Ok(ids)
}

impl<R: Entry, H: Serialize + DeserializeOwned> RedbJournal<R, H> {
    pub(super) fn new(store: &Store, tables: Tables) -> Self {
        Self {
            store: store.clone(),
            records: TableDefinition::new(tables.records),
            by_state: TableDefinition::new(tables.by_state),
            history: TableDefinition::new(tables.history),
            kinds: PhantomData,
        }
    }

    /// Runs `change` in one write transaction: all of it is kept when it returns
    /// `Ok`, none of it otherwise.
    ///
    /// # Errors
    /// The error of `change`, or a database failure (nothing kept).
    pub(super) fn change<T, E: From<StoreError>>(
        &self,
        change: impl FnOnce(RedbChange<'_, R, H>) -> Result<T, E>,
    ) -> Result<T, E> {
        self.store.transaction(|tx| {
            let open = RedbChange {
                tx,
                records: tx.open_table(self.records).map_err(StoreError::from)?,
                by_state: tx.open_table(self.by_state).map_err(StoreError::from)?,
                history: tx.open_table(self.history).map_err(StoreError::from)?,
                kinds: PhantomData,
            };
            change(open)
        })
    }

    /// Record `id`.
    ///
    /// # Errors
    /// A database failure, or a record that does not decode.
    pub(super) fn get(&self, id: u64) -> Result<Option<R>, StoreError> {
        let Some(table) = self.store.read_table(self.records)? else {
            return Ok(None);
        };
        table
            .get(id)?
            .map(|bytes| decode(R::KIND, bytes.value()))
            .transpose()
    }

    /// The history rows of `id`, oldest first.
    ///
    /// # Errors
    /// A database failure, or a row that does not decode.
    pub(super) fn history(&self, id: u64) -> Result<Vec<H>, StoreError> {
        match self.store.read_table(self.history)? {
            Some(table) => rows(&table, id),
            None => Ok(Vec::new()),
        }
    }

    /// The ids of the records in `state`, oldest first.
    ///
    /// # Errors
    /// A database failure.
    pub(super) fn ids_in(&self, state: &str) -> Result<Vec<u64>, StoreError> {
        match self.store.read_table(self.by_state)? {
            Some(index) => ids_under(&index, state),
            None => Ok(Vec::new()),
        }
    }

    /// The records with these ids, in that order (ids without one are skipped).
    ///
    /// # Errors
    /// A database failure, or a record that does not decode.
    pub(super) fn load(&self, ids: impl IntoIterator<Item = u64>) -> Result<Vec<R>, StoreError> {
        let Some(table) = self.store.read_table(self.records)? else {
            return Ok(Vec::new());
        };
        let mut records = Vec::new();
        for id in ids {
            if let Some(bytes) = table.get(id)? {
                records.push(decode(R::KIND, bytes.value())?);
            }
        }
        Ok(records)
    }

    /// Hands every record to `visit`, newest first, while it returns `true`.
    ///
    /// # Errors
    /// A database failure, or a record that does not decode.
    pub(super) fn newest_first(&self, mut visit: impl FnMut(R) -> bool) -> Result<(), StoreError> {
        let Some(table) = self.store.read_table(self.records)? else {
            return Ok(());
        };
        for entry in table.iter()?.rev() {
            if !visit(decode(R::KIND, entry?.1.value())?) {
                break;
            }
        }
        Ok(())
    }

    /// Every id `index` points to, in key order.
    ///
    /// # Errors
    /// A database failure.
    pub(super) fn linked<K: Key + 'static>(
        &self,
        index: &Index<K>,
    ) -> Result<Vec<u64>, StoreError> {
        let read = self.store.db().begin_read()?;
        let table = match read.open_table(index.table) {
            Ok(table) => table,
            Err(TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(error) => return Err(error.into()),
        };
        let mut ids = Vec::new();
        for entry in table.iter()? {
            ids.push(entry?.1.value());
        }
        Ok(ids)
    }

    /// The id `key` points to in `index`.
    ///
    /// # Errors
    /// A database failure.
    pub(super) fn find<'k, K: Key + 'static>(
        &self,
        index: &Index<K>,
        key: impl Borrow<K::SelfType<'k>>,
    ) -> Result<Option<u64>, StoreError> {
        let read = self.store.db().begin_read()?;
        match read.open_table(index.table) {
            Ok(table) => Ok(table.get(key)?.map(|v| v.value())),
            Err(TableError::TableDoesNotExist(_)) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }
}

/// The tables of one write transaction.
pub(super) struct RedbChange<'t, R, H> {
    tx: &'t redb::WriteTransaction,
    records: Table<'t, u64, &'static [u8]>,
    by_state: Table<'t, (&'static str, u64), ()>,
    history: Table<'t, (u64, u32), &'static [u8]>,
    kinds: PhantomData<fn() -> (R, H)>,
}

impl<'t, R: Entry, H: Serialize + DeserializeOwned> RedbChange<'t, R, H> {
    /// The transaction, for the other tables kept with the journal's records.
    pub(in crate::store) fn tx(&self) -> &'t redb::WriteTransaction {
        self.tx
    }

    /// Record `id`, as this transaction sees it.
    ///
    /// # Errors
    /// A database failure, or a record that does not decode.
    pub(super) fn get(&self, id: u64) -> Result<Option<R>, StoreError> {
        self.records
            .get(id)?
            .map(|bytes| decode(R::KIND, bytes.value()))
            .transpose()
    }

    /// The id a new record gets: one past the highest.
    ///
    /// # Errors
    /// A database failure.
    pub(super) fn next_id(&self) -> Result<u64, StoreError> {
        Ok(self.records.last()?.map_or(1, |(k, _)| k.value() + 1))
    }

    /// The ids of the records in `state`, oldest first.
    ///
    /// # Errors
    /// A database failure.
    pub(super) fn ids_in(&self, state: &str) -> Result<Vec<u64>, StoreError> {
        ids_under(&self.by_state, state)
    }

    /// Stores `record` (moving it in the state index from `before`, `None` for a
    /// new record) and appends its history row, which `row` makes from the row's
    /// sequence number. Returns the row.
    ///
    /// # Errors
    /// A database failure, or a value that cannot be encoded.
    pub(super) fn save(
        &mut self,
        record: &R,
        before: Option<&str>,
        row: impl FnOnce(u32) -> H,
    ) -> Result<H, StoreError> {
        let id = record.id();
        if let Some(before) = before {
            self.by_state.remove((before, id))?;
        }
        self.by_state.insert((record.state(), id), ())?;
        self.records
            .insert(id, encode(R::KIND, record)?.as_slice())?;
        let seq = self
            .history
            .range((id, 0)..=(id, u32::MAX))?
            .next_back()
            .transpose()?
            .map_or(0, |(key, _)| key.value().1 + 1);
        let row = row(seq);
        self.history
            .insert((id, seq), encode("history row", &row)?.as_slice())?;
        Ok(row)
    }

    /// The id `key` points to in `index`.
    ///
    /// # Errors
    /// A database failure.
    pub(super) fn find<'k, K: Key + 'static>(
        &self,
        index: &Index<K>,
        key: impl Borrow<K::SelfType<'k>>,
    ) -> Result<Option<u64>, StoreError> {
        let table = self.tx.open_table(index.table)?;
        Ok(table.get(key)?.map(|v| v.value()))
    }

    /// Points `key` at `id`; returns what it pointed at before.
    ///
    /// # Errors
    /// A database failure.
    pub(super) fn link<'k, K: Key + 'static>(
        &mut self,
        index: &Index<K>,
        key: impl Borrow<K::SelfType<'k>>,
        id: u64,
    ) -> Result<Option<u64>, StoreError> {
        let mut table = self.tx.open_table(index.table)?;
        Ok(table.insert(key, id)?.map(|v| v.value()))
    }

    /// Removes `key`; returns what it pointed at.
    ///
    /// # Errors
    /// A database failure.
    pub(super) fn unlink<'k, K: Key + 'static>(
        &mut self,
        index: &Index<K>,
        key: impl Borrow<K::SelfType<'k>>,
    ) -> Result<Option<u64>, StoreError> {
        let mut table = self.tx.open_table(index.table)?;
        Ok(table.remove(key)?.map(|v| v.value()))
    }
}
