//! The lease table in the engine's redb file: fixed-size binary rows numbered
//! in the order entities first report, found through a lookup index on the
//! key's checksum (STATE-6); an expiry index rewritten only when a lease gets
//! shorter or the scanner passes it (STATE-2); the rows the scanner changed kept
//! apart until their next write (STATE-5); parent names numbered once, and
//! free-form details stored beside the rows that have any.

use std::sync::{Mutex, RwLock};

use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata, TableError};

use super::parents::{Parents, Staged};
use super::row::{
    DueKey, Lease, NOT_FILED, RowBytes, due_after, due_key, entity_key, entity_key_into, entity_of,
    seconds, split_due, split_slot_row,
};
use super::tables::{
    DETAILS, FOLD_PER_BATCH, LOOKUP, RECENT, ROWS, Tables, current_lease, empty_details, find_row,
    read_details,
};
use super::{Claimed, StateStore, coalesced, renewed_state};
use crate::model::{EntityKey, EntityState, Renewal, StateFilter, StateRow, Transition};
use crate::store::database::Store;
use crate::store::error::StoreError;
use crate::sync::{lock, read, write};

/// The lease table in the engine's redb file.
#[derive(Debug)]
pub struct RedbStateStore {
    store: Store,
    /// The parent table as of the last commit.
    parents: RwLock<Parents>,
    /// Held by a write from its start until its new parents are known, so the
    /// next write numbers after them.
    writer: Mutex<()>,
}

impl RedbStateStore {
    /// The lease tables as the file has them, before rows of an earlier
    /// layout are moved (`RedbStateStore::open`, in `migrate.rs`, moves them).
    ///
    /// # Errors
    /// A storage failure.
    pub(super) fn unmigrated(store: &Store) -> Result<Self, StoreError> {
        Ok(Self {
            store: store.clone(),
            parents: RwLock::new(Parents::load(store)?),
            writer: Mutex::default(),
        })
    }

    pub(super) fn store(&self) -> &Store {
        &self.store
    }

    /// Runs `change` on the lease tables in one write transaction; the parent
    /// numbers it gave are kept only if it commits.
    pub(super) fn write<R>(
        &self,
        change: impl FnOnce(&mut Tables<'_>, &mut Staged<'_>) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let _writer = lock(&self.writer);
        // Held until the new names are known too: a reader that saw the
        // committed rows before would find their parents' numbers unnamed.
        let mut known = write(&self.parents);
        let (result, added) = {
            let mut staged = Staged::new(&known);
            let result = self.store.transaction(|tx| {
                let mut tables = Tables::open(tx)?;
                let result = change(&mut tables, &mut staged)?;
                tables.finish()?;
                Ok::<_, StoreError>(result)
            })?;
            (result, staged.added)
        };
        known.extend(added);
        Ok(result)
    }

    /// The row of `key` as callers see it.
    fn row_of(
        &self,
        key: &[u8],
        lease: &Lease,
        details: Option<&DetailsTable>,
    ) -> Result<StateRow, StoreError> {
        let extension = match (lease.has_details, details) {
            (true, Some(details)) => read_details(details, key)?,
            _ => empty_details(),
        };
        state_row(
            key,
            lease,
            read(&self.parents).name(lease.parent),
            extension,
        )
    }
}

/// The details table, read-only.
type DetailsTable = redb::ReadOnlyTable<&'static [u8], &'static [u8]>;

fn lease_ms(timeout_seconds: u32) -> i64 {
    i64::from(timeout_seconds) * 1000
}

fn malformed_key() -> StoreError {
    StoreError::Malformed {
        what: "lease key",
        reason: "not a tenant, an entity type and a UTF-8 id".into(),
    }
}

/// The tenant and the entity type's code a lease key begins with.
fn tenant_and_type(key: &[u8]) -> Result<(u32, u8), StoreError> {
    match key.split_first_chunk::<4>() {
        Some((tenant, [code, ..])) => Ok((u32::from_be_bytes(*tenant), *code)),
        _ => Err(malformed_key()),
    }
}

fn state_row(
    key: &[u8],
    lease: &Lease,
    parent: &str,
    extension: serde_json::Value,
) -> Result<StateRow, StoreError> {
    let entity = entity_of(key).ok_or_else(malformed_key)?;
    Ok(StateRow {
        entity_type: entity.entity_type,
        entity_id: entity.entity_id,
        parent_id: parent.to_owned(),
        state: lease.state,
        last_state: lease.last_state,
        last_heartbeat: lease.last_heartbeat,
        expire_time: lease.expire_time,
        lease_version: lease.lease_version,
        timeout_seconds: u64::from(lease.timeout_seconds),
        timeout_source: lease.timeout_source,
        extension,
        tenant_id: entity.tenant_id,
        expired_state: lease.expired_state,
    })
}

/// The lease `renewal` gives a row that held `old` at `now`, and the state
/// the row had before.
fn renewed(
    renewal: &Renewal,
    old: Option<&Lease>,
    parent: u32,
    now_ms: i64,
) -> (Lease, EntityState) {
    let before = old.map_or(EntityState::Offline, |o| {
        o.state.as_of(o.expire_time, now_ms, o.expired_state)
    });
    let (state, last_state) = renewed_state(old.map(|o| (o.state, o.last_state)), renewal, before);
    let timeout_seconds = seconds(renewal.timeout_seconds);
    let lease = Lease {
        state,
        last_state,
        timeout_source: renewal.timeout_source,
        has_details: false,
        expired_state: renewal.expired_state,
        parent,
        tenant_id: renewal.tenant_id,
        timeout_seconds,
        last_heartbeat: now_ms,
        expire_time: now_ms.saturating_add(lease_ms(timeout_seconds)),
        lease_version: old.map_or(0, |o| o.lease_version) + 1,
        filed_at: NOT_FILED,
        details_crc: 0,
    };
    (lease, before)
}

impl StateStore for RedbStateStore {
    fn renew(&self, renewals: &[Renewal], now_ms: i64) -> Result<Vec<Transition>, StoreError> {
        let renewals = coalesced(renewals);
        if renewals.is_empty() {
            return Ok(Vec::new());
        }
        self.write(|tables, parents| {
            // Found rows are rewritten in number order (neighbours share
            // pages, and the row read checks the lookup's guess); new ones are
            // numbered in the order they first arrived. Only numbers are kept
            // between the passes: a batch can hold every entity.
            // (row number, position in `renewals`), and positions.
            let mut found: Vec<(u32, usize)> = Vec::new();
            let mut created: Vec<usize> = Vec::new();
            let mut key = Vec::new();
            let key_of = |key: &mut Vec<u8>, renewal: &Renewal| {
                entity_key_into(
                    key,
                    renewal.tenant_id,
                    renewal.entity_type,
                    &renewal.entity_id,
                );
            };
            for (at, (_, renewal)) in renewals.iter().enumerate() {
                key_of(&mut key, renewal);
                match tables.probe(&key)? {
                    Some(slot) => found.push((slot, at)),
                    None => created.push(at),
                }
            }
            found.sort_unstable_by_key(|(slot, ..)| *slot);
            let mut transitions = Vec::new();
            let mut renew_one = |tables: &mut Tables<'_>,
                                 key: &[u8],
                                 old: Option<(u32, Lease)>,
                                 renewal: &Renewal|
             -> Result<(), StoreError> {
                let parent = parents.number(&renewal.parent_id, &mut tables.parents)?;
                let old_lease = old.as_ref().map(|(_, lease)| lease);
                let (lease, before) = renewed(renewal, old_lease, parent, now_ms);
                let extension = Some(&renewal.extension);
                let lease = match old {
                    Some((slot, old)) => tables.put(slot, key, &old, lease, extension)?,
                    None => tables.create(key, lease, extension)?,
                };
                if before != lease.state {
                    let row =
                        state_row(key, &lease, &renewal.parent_id, renewal.extension.clone())?;
                    transitions.push(Transition { row, from: before });
                }
                Ok(())
            };
            for (slot, at) in found {
                let renewal = renewals[at].1;
                key_of(&mut key, renewal);
                match tables.entry_of(slot, &key)? {
                    Some(old) => renew_one(tables, &key, Some((slot, old)), renewal)?,
                    // Another key's checksum: this entity is new.
                    None => created.push(at),
                }
            }
            created.sort_unstable_by_key(|&at| renewals[at].0);
            for at in created {
                let renewal = renewals[at].1;
                key_of(&mut key, renewal);
                renew_one(tables, &key, None, renewal)?;
            }
            tables.fold(FOLD_PER_BATCH)?;
            Ok(transitions)
        })
    }

    fn set_state(
        &self,
        entity: &EntityKey,
        state: EntityState,
        now_ms: i64,
    ) -> Result<Option<Transition>, StoreError> {
        let mut key = entity_key(entity);
        self.write(|tables, parents| {
            let Some(slot) = tables.find(&key)? else {
                return Ok(None);
            };
            let Some(old) = tables.entry(slot, &mut key)? else {
                return Ok(None);
            };
            let before = old.state.as_of(old.expire_time, now_ms, old.expired_state);
            let extension = tables.details_of(&key, &old)?;
            let lease = Lease {
                state,
                last_state: before,
                lease_version: old.lease_version + 1,
                ..old
            };
            let lease = tables.put(slot, &key, &old, lease, Some(&extension))?;
            let row = state_row(&key, &lease, parents.name(lease.parent), extension)?;
            Ok(Some(Transition { row, from: before }))
        })
    }

    fn expire(&self, now_ms: i64, batch: usize) -> Result<Claimed, StoreError> {
        self.write(|tables, parents| {
            // The entries due by now leave the index in one pass over its head.
            let end = due_after(now_ms);
            let due: Vec<DueKey> = tables
                .due
                .extract_from_if::<&DueKey, _>(..&end, |_, ()| true)?
                .take(batch)
                .map(|entry| entry.map(|(k, _)| *k.value()))
                .collect::<Result<_, _>>()?;
            let more = due.len() == batch;
            // The batch is one transaction: its rows are visited in number
            // order, so the lookups walk the row table once from left to
            // right; the transitions are reported in expiry order all the same.
            let mut visits: Vec<(u32, i64, usize)> = due
                .iter()
                .enumerate()
                .map(|(i, key)| {
                    let (filed_at, slot) = split_due(key);
                    (slot, filed_at, i)
                })
                .collect();
            visits.sort_unstable();
            let mut transitions = Vec::new();
            let mut key = Vec::new();
            for (slot, filed_at, i) in visits {
                let Some(old) = tables.entry(slot, &mut key)? else {
                    continue;
                };
                // The second check (STATE-3): the row must still be filed where the
                // index saw it, live, and out of lease.
                if old.filed_at != filed_at || !old.state.is_live() {
                    continue;
                }
                if old.expire_time > now_ms {
                    // Renewed since it was filed: file it at its expiry now.
                    tables.due.insert(&due_key(old.expire_time, slot), ())?;
                    let refiled = Lease {
                        filed_at: old.expire_time,
                        ..old
                    };
                    tables.put_recent(slot, &refiled)?;
                    continue;
                }
                // Offline, or unknown for a device that says so (`stateWhenExpired`).
                let lease = Lease {
                    state: old.expired_state,
                    last_state: old.state,
                    lease_version: old.lease_version + 1,
                    expire_time: now_ms.saturating_add(lease_ms(old.timeout_seconds)),
                    filed_at: NOT_FILED,
                    ..old
                };
                tables.put_recent(slot, &lease)?;
                let extension = tables.details_of(&key, &lease)?;
                let row = state_row(&key, &lease, parents.name(lease.parent), extension)?;
                transitions.push((
                    i,
                    Transition {
                        row,
                        from: old.state,
                    },
                ));
            }
            transitions.sort_unstable_by_key(|(i, _)| *i);
            let transitions = transitions.into_iter().map(|(_, t)| t).collect();
            Ok(Claimed { transitions, more })
        })
    }

    fn get(&self, entity: &EntityKey) -> Result<Option<StateRow>, StoreError> {
        let snapshot = self.store.db().begin_read()?;
        let (Some(rows), Some(lookup)) =
            (open_read(&snapshot, ROWS)?, open_read(&snapshot, LOOKUP)?)
        else {
            return Ok(None);
        };
        let key = entity_key(entity);
        let Some((slot, fixed)) = find_row(&lookup, &rows, &key)? else {
            return Ok(None);
        };
        let recent = open_recent(&snapshot)?;
        let lease = current_lease(recent.as_ref(), slot, &fixed)?;
        let details = open_read(&snapshot, DETAILS)?;
        self.row_of(&key, &lease, details.as_ref()).map(Some)
    }

    fn list(&self, filter: &StateFilter) -> Result<Vec<StateRow>, StoreError> {
        let snapshot = self.store.db().begin_read()?;
        let Some(rows) = open_read(&snapshot, ROWS)? else {
            return Ok(Vec::new());
        };
        let details = open_read(&snapshot, DETAILS)?;
        let recent = open_recent(&snapshot)?;
        let parent = filter
            .parent
            .as_ref()
            .map(|name| read(&self.parents).number(name));
        if parent == Some(None) {
            return Ok(Vec::new());
        }
        let mut listed = Vec::new();
        for entry in rows.iter()? {
            let (slot, stored) = entry?;
            let (fixed, key) = split_slot_row(stored.value())?;
            let (tenant, code) = tenant_and_type(key)?;
            if filter.tenant.is_some_and(|t| t != tenant)
                || filter.entity_type.is_some_and(|t| t.code() != code)
            {
                continue;
            }
            let lease = current_lease(recent.as_ref(), slot.value(), fixed)?;
            if parent.is_some_and(|p| p != Some(lease.parent)) {
                continue;
            }
            listed.push(self.row_of(key, &lease, details.as_ref())?);
        }
        // In key order, as every backend lists.
        listed.sort_unstable_by(|a, b| {
            (a.tenant_id, a.entity_type.code(), a.entity_id.as_bytes()).cmp(&(
                b.tenant_id,
                b.entity_type.code(),
                b.entity_id.as_bytes(),
            ))
        });
        Ok(listed)
    }
}

/// `table` in `snapshot`; `None` while nothing has created it yet.
fn open_read<K: redb::Key + 'static, V: redb::Value + 'static>(
    snapshot: &redb::ReadTransaction,
    table: redb::TableDefinition<K, V>,
) -> Result<Option<redb::ReadOnlyTable<K, V>>, StoreError> {
    match snapshot.open_table(table) {
        Ok(table) => Ok(Some(table)),
        Err(TableError::TableDoesNotExist(_)) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// The scanner's rows (STATE-5), read-only; `None` while it holds none.
fn open_recent(
    snapshot: &redb::ReadTransaction,
) -> Result<Option<redb::ReadOnlyTable<u32, &'static RowBytes>>, StoreError> {
    match open_read(snapshot, RECENT)? {
        Some(table) if table.is_empty()? => Ok(None),
        table => Ok(table),
    }
}
