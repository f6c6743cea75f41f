//! The lease store: an interface a SQL backend can implement (the seed's
//! `FOR UPDATE SKIP LOCKED` claim maps onto [`StateStore::expire`]), and its redb
//! implementation.

use redb::{Durability, ReadableTable, TableDefinition};

use super::database::Store;
use super::error::StoreError;
use crate::model::{EntityState, EntityType, Renewal, StateFilter, StateRow, Transition};

/// Storage of entity states and leases.
pub trait StateStore: Send + Sync + std::fmt::Debug {
    /// Applies heartbeats in one transaction; returns the state changes they made.
    ///
    /// # Errors
    /// A storage failure; none of the batch is applied.
    fn renew(&self, renewals: &[Renewal], now_ms: i64) -> Result<Vec<Transition>, StoreError>;

    /// An operator's change (maintain, or back online); keeps the lease.
    ///
    /// # Errors
    /// A storage failure, or no such entity (`Ok(None)` is returned for that).
    fn set_state(
        &self,
        entity_type: EntityType,
        entity_id: &str,
        state: EntityState,
        now_ms: i64,
    ) -> Result<Option<Transition>, StoreError>;

    /// Claims up to `batch` live rows whose lease ran out at `now`, re-checking each
    /// (lease version, expiry, live state) before setting it offline.
    ///
    /// # Errors
    /// A storage failure; nothing of the batch is applied.
    fn expire(&self, now_ms: i64, batch: usize) -> Result<Vec<Transition>, StoreError>;

    /// One row, as stored (readers apply [`StateRow::effective_state`]).
    ///
    /// # Errors
    /// A storage failure.
    fn get(&self, entity_type: EntityType, entity_id: &str)
    -> Result<Option<StateRow>, StoreError>;

    /// Rows matching `filter`.
    ///
    /// # Errors
    /// A storage failure.
    fn list(&self, filter: &StateFilter) -> Result<Vec<StateRow>, StoreError>;
}

/// Key -> row (JSON).
const STATES: TableDefinition<&str, &[u8]> = TableDefinition::new("entity_state");
/// (expire time, key) -> lease version, for live rows only: the expiry index.
const EXPIRY: TableDefinition<(i64, &str), u64> = TableDefinition::new("entity_expiry");

fn key(entity_type: EntityType, entity_id: &str) -> String {
    format!("{}:{entity_id}", entity_type.code())
}

fn encode(row: &StateRow) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(row).map_err(|source| StoreError::Encode {
        what: "state row",
        source,
    })
}

fn decode(bytes: &[u8]) -> Result<StateRow, StoreError> {
    serde_json::from_slice(bytes).map_err(|source| StoreError::Decode {
        what: "state row",
        source,
    })
}

/// The lease table in the engine's redb file.
#[derive(Debug, Clone)]
pub struct RedbStateStore {
    store: Store,
}

impl RedbStateStore {
    pub fn new(store: &Store) -> Self {
        Self {
            store: store.clone(),
        }
    }

    /// The state table for reading; `None` before the first heartbeat created it.
    fn states(
        &self,
    ) -> Result<Option<redb::ReadOnlyTable<&'static str, &'static [u8]>>, StoreError> {
        self.store.read_table(STATES)
    }
}

/// The stored row under `key`, if any.
fn read_row(
    states: &impl ReadableTable<&'static str, &'static [u8]>,
    key: &str,
) -> Result<Option<StateRow>, StoreError> {
    states.get(key)?.map(|v| decode(v.value())).transpose()
}

/// Opens both tables of a write transaction.
fn open_tables(write: &redb::WriteTransaction) -> Result<Tables<'_>, StoreError> {
    Ok((write.open_table(STATES)?, write.open_table(EXPIRY)?))
}

type Tables<'t> = (
    redb::Table<'t, &'static str, &'static [u8]>,
    redb::Table<'t, (i64, &'static str), u64>,
);

fn write_row(
    tables: &mut Tables<'_>,
    old: Option<&StateRow>,
    row: &StateRow,
) -> Result<(), StoreError> {
    let key = key(row.entity_type, &row.entity_id);
    if let Some(old) = old
        && old.state.is_live()
    {
        tables.1.remove((old.expire_time, key.as_str()))?;
    }
    if row.state.is_live() {
        tables
            .1
            .insert((row.expire_time, key.as_str()), row.lease_version)?;
    }
    tables.0.insert(key.as_str(), encode(row)?.as_slice())?;
    Ok(())
}

impl StateStore for RedbStateStore {
    fn renew(&self, renewals: &[Renewal], now_ms: i64) -> Result<Vec<Transition>, StoreError> {
        let mut transitions = Vec::new();
        let mut write = self.store.db().begin_write()?;
        // Renewals are frequent; the next durable commit in this file (the WAL's
        // group commits, or a state change below) carries them to disk.
        write.set_durability(Durability::None)?;
        {
            let mut tables = open_tables(&write)?;
            for renewal in renewals {
                let key = key(renewal.entity_type, &renewal.entity_id);
                let old = read_row(&tables.0, key.as_str())?;
                let before = old
                    .as_ref()
                    .map_or(EntityState::Offline, |o| o.effective_state(now_ms));
                let state = match (old.as_ref().map(|o| o.state), renewal.state) {
                    // An operator's maintenance outlives heartbeats.
                    (Some(EntityState::Maintain), EntityState::Online) => EntityState::Maintain,
                    (_, state) => state,
                };
                let row = StateRow {
                    entity_type: renewal.entity_type,
                    entity_id: renewal.entity_id.clone(),
                    parent_id: renewal.parent_id.clone(),
                    state,
                    last_state: if before == state {
                        old.as_ref().map_or(before, |o| o.last_state)
                    } else {
                        before
                    },
                    last_heartbeat: now_ms,
                    expire_time: now_ms
                        .saturating_add((renewal.timeout_seconds as i64).saturating_mul(1000)),
                    lease_version: old.as_ref().map_or(0, |o| o.lease_version) + 1,
                    timeout_seconds: renewal.timeout_seconds,
                    timeout_source: renewal.timeout_source,
                    extension: renewal.extension.clone(),
                    tenant_id: renewal.tenant_id,
                };
                write_row(&mut tables, old.as_ref(), &row)?;
                if before != state {
                    transitions.push(Transition { row, from: before });
                }
            }
        }
        if !transitions.is_empty() {
            write.set_durability(Durability::Immediate)?;
        }
        write.commit()?;
        Ok(transitions)
    }

    fn set_state(
        &self,
        entity_type: EntityType,
        entity_id: &str,
        state: EntityState,
        now_ms: i64,
    ) -> Result<Option<Transition>, StoreError> {
        let write = self.store.db().begin_write()?;
        let transition = {
            let mut tables = open_tables(&write)?;
            let key = key(entity_type, entity_id);
            let Some(old) = read_row(&tables.0, key.as_str())? else {
                return Ok(None);
            };
            let before = old.effective_state(now_ms);
            let mut row = old.clone();
            row.state = state;
            row.last_state = before;
            row.lease_version += 1;
            write_row(&mut tables, Some(&old), &row)?;
            Transition { row, from: before }
        };
        write.commit()?;
        Ok(Some(transition))
    }

    fn expire(&self, now_ms: i64, batch: usize) -> Result<Vec<Transition>, StoreError> {
        let write = self.store.db().begin_write()?;
        let mut transitions = Vec::new();
        {
            let mut tables = open_tables(&write)?;
            let due: Vec<(i64, String, u64)> = tables
                .1
                .range::<(i64, &str)>(..=(now_ms, "\u{10FFFF}"))?
                .take(batch)
                .map(|entry| entry.map(|(k, v)| (k.value().0, k.value().1.to_owned(), v.value())))
                .collect::<Result<_, _>>()?;
            for (expire_time, key, version) in due {
                tables.1.remove((expire_time, key.as_str()))?;
                let Some(old) = read_row(&tables.0, key.as_str())? else {
                    continue;
                };
                // The second check: the row must still be the one the index saw.
                if old.lease_version != version || old.expire_time > now_ms || !old.state.is_live()
                {
                    continue;
                }
                let row = StateRow {
                    state: EntityState::Offline,
                    last_state: old.state,
                    lease_version: old.lease_version + 1,
                    ..old.clone()
                };
                tables.0.insert(key.as_str(), encode(&row)?.as_slice())?;
                transitions.push(Transition {
                    row,
                    from: old.state,
                });
            }
        }
        write.commit()?;
        Ok(transitions)
    }

    fn get(
        &self,
        entity_type: EntityType,
        entity_id: &str,
    ) -> Result<Option<StateRow>, StoreError> {
        let Some(table) = self.states()? else {
            return Ok(None);
        };
        let key = key(entity_type, entity_id);
        table
            .get(key.as_str())?
            .map(|v| decode(v.value()))
            .transpose()
    }

    fn list(&self, filter: &StateFilter) -> Result<Vec<StateRow>, StoreError> {
        let Some(table) = self.states()? else {
            return Ok(Vec::new());
        };
        let mut rows = Vec::new();
        for entry in table.iter()? {
            let (_, value) = entry?;
            let row = decode(value.value())?;
            let wanted = filter.entity_type.is_none_or(|t| t == row.entity_type)
                && filter.parent.as_ref().is_none_or(|p| *p == row.parent_id);
            if wanted {
                rows.push(row);
            }
        }
        Ok(rows)
    }
}
