//! Values kept by a key, one write transaction each (the results of writes, by
//! tenant and request id).

use std::borrow::Borrow;
use std::fmt;
use std::marker::PhantomData;

use redb::{Key, TableDefinition, TableHandle};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::database::Store;
use super::error::StoreError;

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

    /// Stores `value` under `key`, durably.
    ///
    /// # Errors
    /// A database failure, or a value that cannot be encoded.
    pub fn put<'k>(&self, key: impl Borrow<K::SelfType<'k>>, value: &V) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(value).map_err(|source| StoreError::Encode {
            what: self.what,
            source,
        })?;
        self.store.transaction(|tx| {
            tx.open_table(self.table)
                .map_err(StoreError::from)?
                .insert(key, bytes.as_slice())
                .map_err(StoreError::from)?;
            Ok::<_, StoreError>(())
        })
    }
}
