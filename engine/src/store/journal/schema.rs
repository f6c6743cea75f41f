//! What a journal keeps, shared by its places: the record trait, the names of a
//! record kind's tables, and the key indexes.

use std::borrow::Borrow;
use std::fmt;

use ::redb::{Key, TableDefinition};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A record with a lifecycle.
pub trait Entry: Serialize + DeserializeOwned {
    /// What it is, for messages.
    const KIND: &'static str;
    fn id(&self) -> u64;
    /// The name of its state, as the state index keeps it.
    fn state(&self) -> &'static str;
}

/// The names of a record kind's three tables.
#[derive(Debug, Clone, Copy)]
pub struct Tables {
    /// id -> record (JSON); on PostgreSQL, the kind of its rows.
    pub records: &'static str,
    /// (state, id) -> (): the records in each state.
    pub by_state: &'static str,
    /// (id, seq) -> history row (JSON).
    pub history: &'static str,
}

/// A table from a key to a record id.
pub struct Index<K: Key + 'static> {
    pub(super) table: TableDefinition<'static, K, u64>,
    name: &'static str,
}

impl<K: Key + 'static> Index<K> {
    pub const fn new(name: &'static str) -> Self {
        Self {
            table: TableDefinition::new(name),
            name,
        }
    }

    pub(super) fn name(&self) -> &'static str {
        self.name
    }
}

/// A key as PostgreSQL keeps it: redb's encoding of it, so both stores order
/// and compare keys the same way.
pub(in crate::store) fn key_bytes<'k, K: Key + 'static>(
    key: impl Borrow<K::SelfType<'k>>,
) -> Vec<u8> {
    K::as_bytes(key.borrow()).as_ref().to_vec()
}

impl<K: Key + 'static> fmt::Debug for Index<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Index").field(&self.name()).finish()
    }
}
