//! Which database holds the engine's state: the embedded redb file, or a
//! PostgreSQL database that several engines share (`collector.store`).

use std::sync::Arc;

use super::database::Store;
use super::error::StoreError;
use super::leases::{RedbStateStore, StateStore};
use super::postgres::{PgStateStore, Postgres};

/// The database the leases, alarms, commands and write records live in.
#[derive(Debug, Clone)]
pub enum StateDatabase {
    /// The engine's own redb file.
    Redb(Store),
    /// A PostgreSQL database shared with other engines.
    Postgres(Postgres),
}

impl StateDatabase {
    /// The lease (entity state) table.
    ///
    /// # Errors
    /// A database failure, or stored rows that do not decode.
    pub fn leases(&self) -> Result<Arc<dyn StateStore>, StoreError> {
        Ok(match self {
            StateDatabase::Redb(store) => Arc::new(RedbStateStore::open(store)?),
            StateDatabase::Postgres(postgres) => Arc::new(PgStateStore::new(postgres)),
        })
    }

    /// The PostgreSQL database, when the state is shared.
    pub fn shared(&self) -> Option<&Postgres> {
        match self {
            StateDatabase::Redb(_) => None,
            StateDatabase::Postgres(postgres) => Some(postgres),
        }
    }
}

impl From<&Store> for StateDatabase {
    fn from(store: &Store) -> Self {
        StateDatabase::Redb(store.clone())
    }
}

impl From<&StateDatabase> for StateDatabase {
    fn from(db: &StateDatabase) -> Self {
        db.clone()
    }
}
