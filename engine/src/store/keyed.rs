//! Values kept by a key (the intents and the results of writes, by tenant and
//! request id): one transaction each, or a part of a journal's change.

use std::borrow::Borrow;
use std::fmt;
use std::marker::PhantomData;

use redb::{Key, TableDefinition};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::database::Store;
use super::error::StoreError;
use super::journal::{Change, Entry, Target, key_bytes};
use super::postgres::{Op, Postgres};
use super::state_database::StateDatabase;

/// A table of JSON values by key.
pub struct Keyed<K: Key + 'static, V> {
    place: Place,
    table: TableDefinition<'static, K, &'static [u8]>,
    name: &'static str,
    what: &'static str,
    values: PhantomData<fn() -> V>,
}

enum Place {
    Redb(Store),
    Postgres(Postgres),
}

impl<K: Key + 'static, V> fmt::Debug for Keyed<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyed")
            .field("table", &self.name)
            .finish_non_exhaustive()
    }
}

impl<K: Key + 'static, V: Serialize + DeserializeOwned> Keyed<K, V> {
    /// The table `name` of `db`, holding values of `what` (for messages).
    pub fn new(db: &StateDatabase, name: &'static str, what: &'static str) -> Self {
        let place = match db {
            StateDatabase::Redb(store) => Place::Redb(store.clone()),
            StateDatabase::Postgres(postgres) => Place::Postgres(postgres.clone()),
        };
        Self {
            place,
            table: TableDefinition::new(name),
            name,
            what,
            values: PhantomData,
        }
    }

    fn decode(&self, bytes: &[u8]) -> Result<V, StoreError> {
        serde_json::from_slice(bytes).map_err(|source| StoreError::Decode {
            what: self.what,
            source,
        })
    }

    fn encode(&self, value: &V) -> Result<String, StoreError> {
        serde_json::to_string(value).map_err(|source| StoreError::Encode {
            what: self.what,
            source,
        })
    }

    /// The value under `key`.
    ///
    /// # Errors
    /// A database failure, or a value that does not decode.
    pub fn get<'k>(&self, key: impl Borrow<K::SelfType<'k>>) -> Result<Option<V>, StoreError> {
        match &self.place {
            Place::Redb(store) => {
                let Some(table) = store.read_table(self.table)? else {
                    return Ok(None);
                };
                let Some(bytes) = table.get(key)? else {
                    return Ok(None);
                };
                self.decode(bytes.value()).map(Some)
            }
            Place::Postgres(db) => db
                .value(self.name, key_bytes::<K>(key))?
                .map(|text| self.decode(text.as_bytes()))
                .transpose(),
        }
    }

    /// Stores `value` under `key`, durably.
    ///
    /// # Errors
    /// A database failure, or a value that cannot be encoded.
    pub fn put<'k>(&self, key: impl Borrow<K::SelfType<'k>>, value: &V) -> Result<(), StoreError> {
        let body = self.encode(value)?;
        match &self.place {
            Place::Redb(store) => store.transaction(|tx| {
                tx.open_table(self.table)
                    .map_err(StoreError::from)?
                    .insert(key, body.as_bytes())
                    .map_err(StoreError::from)?;
                Ok::<_, StoreError>(())
            }),
            Place::Postgres(db) => db.put_value(self.name, key_bytes::<K>(key), body),
        }
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
        let body = self.encode(value)?;
        match change.target() {
            Target::Redb(tx) => {
                tx.open_table(self.table)?.insert(key, body.as_bytes())?;
            }
            Target::Postgres(tx) => {
                tx.run(Op::Put {
                    name: self.name,
                    key: key_bytes::<K>(key),
                    body,
                })?;
            }
        }
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
        match change.target() {
            Target::Redb(tx) => {
                tx.open_table(self.table)?.remove(key)?;
            }
            Target::Postgres(tx) => {
                tx.run(Op::Remove {
                    name: self.name,
                    key: key_bytes::<K>(key),
                })?;
            }
        }
        Ok(())
    }
}
