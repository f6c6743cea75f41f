//! Values kept by a key (the intents and the results of writes, by tenant and
//! request id): one write transaction each, or a part of a journal's change.

use std::borrow::Borrow;
use std::fmt;
use std::marker::PhantomData;

use redb::{Key, TableDefinition, TableHandle};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::database::Store;
use super::error::StoreError;
use super::journal::{Change, Entry};

/// A table of JSON values by key.
pub struct Keyed<K: Key + 'static, V> {
    store: Store,
    table: TableDefinition<'static, K, &'static [u8]>,
    what: &'static str,
    values: PhantomData<fn() -> V>,
}

impl<K: Key + 'static, V> fmt::Debug for Keyed<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyed")
            .field("table", &self.table.name())
            .finish_non_exhaustive()
    }
}

impl<K: Key + 'static, V: Serialize + DeserializeOwned> Keyed<K, V> {
    /// The table `name` of `store`, holding values of `what` (for messages).
    pub fn new(store: &Store, name: &'static str, what: &'static str) -> Self {
        Self {
            store: store.clone(),
            table: TableDefinition::new(name),
            what,
            values: PhantomData,
        }
    }

    /// The value under `key`.
    ///
    /// # Errors
    /// A database failure, or a value that does not decode.
    pub fn get<'k>(&self, key: impl Borrow<K::SelfType<'k>>) -> Result<Option<V>, StoreError> {
        let Some(table) = self.store.read_table(self.table)? else {
            return Ok(None);
        };
        let Some(bytes) = table.get(key)? else {
            return Ok(None);
        };
        serde_json::from_slice(bytes.value())
            .map(Some)
            .map_err(|source| StoreError::Decode {
                what: self.what,
                source,
            })
    }

    fn encode(&self, value: &V) -> Result<Vec<u8>, StoreError> {
        serde_json::to_vec(value).map_err(|source| StoreError::Encode {
            what: self.what,
            source,
        })
    }

    /// Stores `value` under `key`, durably.
    ///
    /// # Errors
    /// A database failure, or a value that cannot be encoded.
    pub fn put<'k>(&self, key: impl Borrow<K::SelfType<'k>>, value: &V) -> Result<(), StoreError> {
        let bytes = self.encode(value)?;
        self.store.transaction(|tx| {
            tx.open_table(self.table)
                .map_err(StoreError::from)?
                .insert(key, bytes.as_slice())
                .map_err(StoreError::from)?;
            Ok::<_, StoreError>(())
        })
    }

    /// Stores `value` under `key` as a part of `change`: kept with it or not at all.
    ///
    /// # Errors
    /// A database failure, or a value that cannot be encoded.
    pub fn put_in<'k, R: Entry, H: Serialize + DeserializeOwned>(
        &self,
        change: &mut Change<'_, R, H>,
        key: impl Borrow<K::SelfType<'k>>,
        value: &V,
    ) -> Result<(), StoreError> {
        let bytes = self.encode(value)?;
        change
            .tx()
            .open_table(self.table)?
            .insert(key, bytes.as_slice())?;
        Ok(())
    }

    /// Removes what `key` holds as a part of `change`.
    ///
    /// # Errors
    /// A database failure.
    pub fn remove_in<'k, R: Entry, H: Serialize + DeserializeOwned>(
        &self,
        change: &mut Change<'_, R, H>,
        key: impl Borrow<K::SelfType<'k>>,
    ) -> Result<(), StoreError> {
        change.tx().open_table(self.table)?.remove(key)?;
        Ok(())
    }
}
