//! The lease table in the engine's redb file: fixed-size binary rows keyed by
//! entity, an expiry index rewritten only when a lease gets shorter or the
//! scanner passes it (L2), the rows the scanner changed kept apart until their
//! next write (L5), parent names numbered once, and free-form details stored
//! beside the rows that have any.

use std::collections::HashMap;
use std::sync::{Mutex, RwLock};

use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition, TableError};

use super::row::{
    Lease, NOT_FILED, RowBytes, due_after, due_key, entity_key, entity_key_into, entity_of,
    split_due,
};
use super::{Claimed, StateStore, coalesced, filed_at, renewed_state};
use crate::model::{EntityState, EntityType, Renewal, StateFilter, StateRow, Transition};
use crate::store::database::Store;
use crate::store::error::StoreError;
use crate::sync::{lock, read, write};

/// Lease key -> row.
const LEASES: TableDefinition<&[u8], &RowBytes> = TableDefinition::new("entity_lease");
/// Lease key -> row, for the rows the scanner changed since they were last
/// written (L5): a claim writes a few pages of this small table instead of a
/// page of `entity_lease` per row; the row's next write, or a renewal batch's
/// fold, moves it back.
const RECENT: TableDefinition<&[u8], &RowBytes> = TableDefinition::new("entity_lease_recent");
/// Rows of [`RECENT`] each renewal batch moves back to the lease table.
pub(super) const FOLD_PER_BATCH: usize = 2_000;
/// Expiry index: (filed time, lease key) for every live row (L2).
const DUE: TableDefinition<&[u8], ()> = TableDefinition::new("entity_lease_due");
/// Lease key -> details (JSON), for the rows whose details are not empty.
const DETAILS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("entity_lease_details");
/// Parent number -> parent name.
const PARENTS: TableDefinition<u32, &str> = TableDefinition::new("entity_parent");
/// The JSON rows of earlier versions, moved into the tables above at open.
const JSON_ROWS: TableDefinition<&str, &[u8]> = TableDefinition::new("entity_state");

/// Parent names and their numbers, as the parent table holds them.
#[derive(Debug, Default)]
struct Parents {
    names: Vec<String>,
    numbers: HashMap<String, u32>,
}

impl Parents {
    fn name(&self, number: u32) -> &str {
        self.names.get(number as usize).map_or("", String::as_str)
    }
}

/// The parent numbers one write transaction sees: those committed, and those
/// it gives (kept only if it commits).
struct Staged<'p> {
    known: &'p Parents,
    added: Vec<String>,
}

impl Staged<'_> {
    fn name(&self, number: u32) -> &str {
        match (number as usize).checked_sub(self.known.names.len()) {
            Some(i) => self.added.get(i).map_or("", String::as_str),
            None => self.known.name(number),
        }
    }

    /// The number of `name`, given one (and written) if it has none yet.
    fn number(
        &mut self,
        name: &str,
        table: &mut redb::Table<'_, u32, &'static str>,
    ) -> Result<u32, StoreError> {
        if let Some(&number) = self.known.numbers.get(name) {
            return Ok(number);
        }
        let at = self.known.names.len();
        if let Some(i) = self.added.iter().position(|n| n == name) {
            return Ok((at + i) as u32);
        }
        let number = u32::try_from(at + self.added.len()).map_err(|_| StoreError::Malformed {
            what: "parent table",
            reason: "more than 2^32 parents".into(),
        })?;
        table.insert(number, name)?;
        self.added.push(name.to_owned());
        Ok(number)
    }
}

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
    /// Opens the lease tables, moving rows an earlier version kept as JSON.
    ///
    /// # Errors
    /// A storage failure, or stored rows that do not decode.
    pub fn open(store: &Store) -> Result<Self, StoreError> {
        let this = Self {
            store: store.clone(),
            parents: RwLock::default(),
            writer: Mutex::default(),
        };
        *write(&this.parents) = this.load_parents()?;
        this.move_json_rows()?;
        Ok(this)
    }

    fn load_parents(&self) -> Result<Parents, StoreError> {
        let mut parents = Parents::default();
        if let Some(table) = self.store.read_table(PARENTS)? {
            for entry in table.iter()? {
                let (number, name) = entry?;
                let (number, name) = (number.value(), name.value().to_owned());
                if number as usize != parents.names.len() {
                    return Err(StoreError::Malformed {
                        what: "parent table",
                        reason: format!("parent number {number} out of sequence"),
                    });
                }
                parents.numbers.insert(name.clone(), number);
                parents.names.push(name);
            }
        }
        Ok(parents)
    }

    /// Runs `change` on the lease tables in one write transaction; the parent
    /// numbers it gave are kept only if it commits.
    fn write<R>(
        &self,
        change: impl FnOnce(&mut Tables<'_>, &mut Staged<'_>) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let _writer = lock(&self.writer);
        let (result, added) = {
            let known = read(&self.parents);
            let mut staged = Staged {
                known: &known,
                added: Vec::new(),
            };
            let result = self.store.transaction(|tx| {
                let mut tables = Tables::open(tx)?;
                change(&mut tables, &mut staged)
            })?;
            (result, staged.added)
        };
        if !added.is_empty() {
            let mut parents = write(&self.parents);
            for name in added {
                let number = parents.names.len() as u32;
                parents.numbers.insert(name.clone(), number);
                parents.names.push(name);
            }
        }
        Ok(result)
    }

    /// Moves the JSON rows of an earlier version (one transaction; L4).
    fn move_json_rows(&self) -> Result<(), StoreError> {
        let Some(old) = self.store.read_table(JSON_ROWS)? else {
            return Ok(());
        };
        let mut rows = Vec::new();
        for entry in old.iter()? {
            let (_, value) = entry?;
            let row: StateRow =
                serde_json::from_slice(value.value()).map_err(|source| StoreError::Decode {
                    what: "state row",
                    source,
                })?;
            rows.push(row);
        }
        drop(old);
        let moved = rows.len();
        self.write(|tables, parents| {
            for row in &rows {
                let key = entity_key(row.entity_type, &row.entity_id);
                let lease = Lease {
                    state: row.state,
                    last_state: row.last_state,
                    timeout_source: row.timeout_source,
                    has_details: false,
                    parent: parents.number(&row.parent_id, &mut tables.parents)?,
                    tenant_id: row.tenant_id,
                    timeout_seconds: seconds(row.timeout_seconds),
                    last_heartbeat: row.last_heartbeat,
                    expire_time: row.expire_time,
                    lease_version: row.lease_version,
                    filed_at: NOT_FILED,
                    details_crc: 0,
                };
                tables.put(&key, None, lease, &row.extension)?;
            }
            tables.tx.delete_table(JSON_ROWS)?;
            Ok(())
        })?;
        tracing::info!(rows = moved, "lease rows moved to the binary table");
        Ok(())
    }

    /// The row under `key` as callers see it.
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

/// The tables of one write transaction.
struct Tables<'t> {
    tx: &'t redb::WriteTransaction,
    leases: redb::Table<'t, &'static [u8], &'static RowBytes>,
    recent: redb::Table<'t, &'static [u8], &'static RowBytes>,
    /// Whether [`RECENT`] holds no row: then nothing is looked up there.
    recent_empty: bool,
    due: redb::Table<'t, &'static [u8], ()>,
    details: redb::Table<'t, &'static [u8], &'static [u8]>,
    parents: redb::Table<'t, u32, &'static str>,
}

impl<'t> Tables<'t> {
    fn open(tx: &'t redb::WriteTransaction) -> Result<Self, StoreError> {
        let recent = tx.open_table(RECENT)?;
        Ok(Self {
            tx,
            leases: tx.open_table(LEASES)?,
            recent_empty: recent.is_empty()?,
            recent,
            due: tx.open_table(DUE)?,
            details: tx.open_table(DETAILS)?,
            parents: tx.open_table(PARENTS)?,
        })
    }

    /// The row under `key`: the scanner's version if it changed it (L5).
    fn lease(&self, key: &[u8]) -> Result<Option<Lease>, StoreError> {
        if !self.recent_empty
            && let Some(row) = self.recent.get(key)?
        {
            return Ok(Some(Lease::decode(row.value())?));
        }
        self.leases
            .get(key)?
            .map(|v| Lease::decode(v.value()).map_err(StoreError::from))
            .transpose()
    }

    /// Keeps the scanner's change of `key` apart (L5).
    fn put_recent(&mut self, key: &[u8], lease: &Lease) -> Result<(), StoreError> {
        self.recent.insert(key, &lease.encode())?;
        self.recent_empty = false;
        Ok(())
    }

    /// Moves up to `max` of the scanner's rows back to the lease table.
    fn fold(&mut self, max: usize) -> Result<(), StoreError> {
        if self.recent_empty {
            return Ok(());
        }
        let rows: Vec<(Vec<u8>, RowBytes)> = self
            .recent
            .iter()?
            .take(max)
            .map(|entry| entry.map(|(k, v)| (k.value().to_vec(), *v.value())))
            .collect::<Result<_, _>>()?;
        for (key, row) in &rows {
            self.leases.insert(key.as_slice(), row)?;
            self.recent.remove(key.as_slice())?;
        }
        Ok(())
    }

    /// Writes `lease` under `key`: files it in the expiry index when it is live
    /// and not filed early enough (L2), keeps its details beside it.
    fn put(
        &mut self,
        key: &[u8],
        old: Option<&Lease>,
        mut lease: Lease,
        extension: &serde_json::Value,
    ) -> Result<Lease, StoreError> {
        let filed = old.map_or(NOT_FILED, |o| o.filed_at);
        let was_filed = (filed != NOT_FILED).then_some(filed);
        lease.filed_at = filed_at(lease.state, was_filed, lease.expire_time).unwrap_or(NOT_FILED);
        if filed != lease.filed_at {
            if filed != NOT_FILED {
                self.due.remove(due_key(filed, key).as_slice())?;
            }
            if lease.filed_at != NOT_FILED {
                self.due
                    .insert(due_key(lease.filed_at, key).as_slice(), ())?;
            }
        }
        let had_details = old.is_some_and(|o| o.has_details);
        if is_empty(extension) {
            lease.has_details = false;
            lease.details_crc = 0;
            if had_details {
                self.details.remove(key)?;
            }
        } else {
            let bytes = serde_json::to_vec(extension).map_err(|source| StoreError::Encode {
                what: "lease details",
                source,
            })?;
            let crc = crc32fast::hash(&bytes);
            lease.has_details = true;
            lease.details_crc = crc;
            if !had_details || old.is_some_and(|o| o.details_crc != crc) {
                self.details.insert(key, bytes.as_slice())?;
            }
        }
        self.leases.insert(key, &lease.encode())?;
        if !self.recent_empty && self.recent.get(key)?.is_some() {
            self.recent.remove(key)?;
        }
        Ok(lease)
    }

    /// The stored details of `key`, when its row says it has any.
    fn details_of(&self, key: &[u8], lease: &Lease) -> Result<serde_json::Value, StoreError> {
        if !lease.has_details {
            return Ok(empty_details());
        }
        read_details(&self.details, key)
    }
}

fn read_details(
    table: &impl ReadableTable<&'static [u8], &'static [u8]>,
    key: &[u8],
) -> Result<serde_json::Value, StoreError> {
    match table.get(key)? {
        Some(bytes) => serde_json::from_slice(bytes.value()).map_err(|source| StoreError::Decode {
            what: "lease details",
            source,
        }),
        None => Ok(empty_details()),
    }
}

fn empty_details() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

fn is_empty(extension: &serde_json::Value) -> bool {
    match extension {
        serde_json::Value::Null => true,
        serde_json::Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

fn seconds(timeout: u64) -> u32 {
    u32::try_from(timeout).unwrap_or(u32::MAX)
}

fn lease_ms(timeout_seconds: u32) -> i64 {
    i64::from(timeout_seconds) * 1000
}

fn state_row(
    key: &[u8],
    lease: &Lease,
    parent: &str,
    extension: serde_json::Value,
) -> Result<StateRow, StoreError> {
    let (entity_type, entity_id) = entity_of(key).ok_or_else(|| StoreError::Malformed {
        what: "lease key",
        reason: "not an entity type and a UTF-8 id".into(),
    })?;
    Ok(StateRow {
        entity_type,
        entity_id,
        parent_id: parent.to_owned(),
        state: lease.state,
        last_state: lease.last_state,
        last_heartbeat: lease.last_heartbeat,
        expire_time: lease.expire_time,
        lease_version: lease.lease_version,
        timeout_seconds: u64::from(lease.timeout_seconds),
        timeout_source: lease.timeout_source,
        extension,
        tenant_id: lease.tenant_id,
    })
}

impl StateStore for RedbStateStore {
    fn renew(&self, renewals: &[Renewal], now_ms: i64) -> Result<Vec<Transition>, StoreError> {
        let renewals = coalesced(renewals);
        if renewals.is_empty() {
            return Ok(Vec::new());
        }
        self.write(|tables, parents| {
            let mut transitions = Vec::new();
            let mut key = Vec::new();
            for renewal in renewals {
                entity_key_into(&mut key, renewal.entity_type, &renewal.entity_id);
                let old = tables.lease(&key)?;
                let before = old.as_ref().map_or(EntityState::Offline, |o| {
                    o.state.as_of(o.expire_time, now_ms)
                });
                let (state, last_state) =
                    renewed_state(old.map(|o| (o.state, o.last_state)), renewal, before);
                let timeout_seconds = seconds(renewal.timeout_seconds);
                let lease = Lease {
                    state,
                    last_state,
                    timeout_source: renewal.timeout_source,
                    has_details: false,
                    parent: parents.number(&renewal.parent_id, &mut tables.parents)?,
                    tenant_id: renewal.tenant_id,
                    timeout_seconds,
                    last_heartbeat: now_ms,
                    expire_time: now_ms.saturating_add(lease_ms(timeout_seconds)),
                    lease_version: old.as_ref().map_or(0, |o| o.lease_version) + 1,
                    filed_at: NOT_FILED,
                    details_crc: 0,
                };
                let lease = tables.put(&key, old.as_ref(), lease, &renewal.extension)?;
                if before != state {
                    let row =
                        state_row(&key, &lease, &renewal.parent_id, renewal.extension.clone())?;
                    transitions.push(Transition { row, from: before });
                }
            }
            tables.fold(FOLD_PER_BATCH)?;
            Ok(transitions)
        })
    }

    fn set_state(
        &self,
        entity_type: EntityType,
        entity_id: &str,
        state: EntityState,
        now_ms: i64,
    ) -> Result<Option<Transition>, StoreError> {
        let key = entity_key(entity_type, entity_id);
        self.write(|tables, parents| {
            let Some(old) = tables.lease(&key)? else {
                return Ok(None);
            };
            let before = old.state.as_of(old.expire_time, now_ms);
            let extension = tables.details_of(&key, &old)?;
            let lease = Lease {
                state,
                last_state: before,
                lease_version: old.lease_version + 1,
                ..old
            };
            let lease = tables.put(&key, Some(&old), lease, &extension)?;
            let row = state_row(&key, &lease, parents.name(lease.parent), extension)?;
            Ok(Some(Transition { row, from: before }))
        })
    }

    fn expire(&self, now_ms: i64, batch: usize) -> Result<Claimed, StoreError> {
        self.write(|tables, parents| {
            // The entries due by now leave the index in one pass over its head.
            let due: Vec<Vec<u8>> = tables
                .due
                .extract_from_if::<&[u8], _>(..due_after(now_ms).as_slice(), |_, ()| true)?
                .take(batch)
                .map(|entry| entry.map(|(k, _)| k.value().to_vec()))
                .collect::<Result<_, _>>()?;
            let more = due.len() == batch;
            // The batch is one transaction: its rows are visited in key order,
            // so the lookups walk the lease table once from left to right; the
            // transitions are reported in expiry order all the same.
            let mut visits: Vec<usize> = (0..due.len()).collect();
            visits.sort_unstable_by_key(|&i| split_due(&due[i]).map(|(_, key)| key));
            let mut transitions = Vec::new();
            for i in visits {
                let Some((filed_at, key)) = split_due(&due[i]) else {
                    continue;
                };
                let Some(old) = tables.lease(key)? else {
                    continue;
                };
                // The second check (L3): the row must still be filed where the
                // index saw it, live, and out of lease.
                if old.filed_at != filed_at || !old.state.is_live() {
                    continue;
                }
                if old.expire_time > now_ms {
                    // Renewed since it was filed: file it at its expiry now.
                    tables
                        .due
                        .insert(due_key(old.expire_time, key).as_slice(), ())?;
                    let refiled = Lease {
                        filed_at: old.expire_time,
                        ..old
                    };
                    tables.put_recent(key, &refiled)?;
                    continue;
                }
                let lease = Lease {
                    state: EntityState::Offline,
                    last_state: old.state,
                    lease_version: old.lease_version + 1,
                    expire_time: now_ms.saturating_add(lease_ms(old.timeout_seconds)),
                    filed_at: NOT_FILED,
                    ..old
                };
                tables.put_recent(key, &lease)?;
                let extension = tables.details_of(key, &lease)?;
                let row = state_row(key, &lease, parents.name(lease.parent), extension)?;
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

    fn get(
        &self,
        entity_type: EntityType,
        entity_id: &str,
    ) -> Result<Option<StateRow>, StoreError> {
        let snapshot = self.store.db().begin_read()?;
        let leases = match snapshot.open_table(LEASES) {
            Ok(table) => table,
            Err(TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        let key = entity_key(entity_type, entity_id);
        let recent = open_recent(&snapshot)?;
        let lease = match recent_of(recent.as_ref(), &key)? {
            Some(lease) => lease,
            None => match leases.get(key.as_slice())? {
                Some(bytes) => Lease::decode(bytes.value())?,
                None => return Ok(None),
            },
        };
        let details = open_details(&snapshot)?;
        self.row_of(&key, &lease, details.as_ref()).map(Some)
    }

    fn list(&self, filter: &StateFilter) -> Result<Vec<StateRow>, StoreError> {
        let snapshot = self.store.db().begin_read()?;
        let leases = match snapshot.open_table(LEASES) {
            Ok(table) => table,
            Err(TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(error) => return Err(error.into()),
        };
        let details = open_details(&snapshot)?;
        let recent = open_recent(&snapshot)?;
        let parent = filter
            .parent
            .as_ref()
            .map(|name| read(&self.parents).numbers.get(name).copied());
        if parent == Some(None) {
            return Ok(Vec::new());
        }
        let mut rows = Vec::with_capacity(leases.len()? as usize);
        let range = match filter.entity_type {
            Some(t) => leases.range::<&[u8]>([t.code()].as_slice()..[t.code() + 1].as_slice())?,
            None => leases.range::<&[u8]>(..)?,
        };
        for entry in range {
            let (key, value) = entry?;
            let lease = match recent_of(recent.as_ref(), key.value())? {
                Some(lease) => lease,
                None => Lease::decode(value.value())?,
            };
            if parent.is_some_and(|p| p != Some(lease.parent)) {
                continue;
            }
            rows.push(self.row_of(key.value(), &lease, details.as_ref())?);
        }
        Ok(rows)
    }
}

fn open_details(read: &redb::ReadTransaction) -> Result<Option<DetailsTable>, StoreError> {
    match read.open_table(DETAILS) {
        Ok(table) => Ok(Some(table)),
        Err(TableError::TableDoesNotExist(_)) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// The scanner's rows (L5), read-only; `None` while it holds none.
type RecentTable = redb::ReadOnlyTable<&'static [u8], &'static RowBytes>;

fn open_recent(read: &redb::ReadTransaction) -> Result<Option<RecentTable>, StoreError> {
    match read.open_table(RECENT) {
        Ok(table) if table.is_empty()? => Ok(None),
        Ok(table) => Ok(Some(table)),
        Err(TableError::TableDoesNotExist(_)) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// The scanner's version of the row under `key`, if it has one.
fn recent_of(recent: Option<&RecentTable>, key: &[u8]) -> Result<Option<Lease>, StoreError> {
    let Some(table) = recent else {
        return Ok(None);
    };
    match table.get(key)? {
        Some(row) => Ok(Some(Lease::decode(row.value())?)),
        None => Ok(None),
    }
}
