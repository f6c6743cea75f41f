//! Rows of earlier versions moved into the numbered row table at open (STATE-4):
//! the JSON table of the first versions, the table keyed by entity (with its
//! expiry index and scanner rows) of the versions before numbered rows, and
//! the numbered rows whose keys did not hold their tenant (before two tenants
//! could have a driver each of one name).

use redb::{ReadableTable, TableDefinition};

use super::redb_table::RedbStateStore;
use super::row::{
    Lease, NOT_FILED, RowBytes, entity_key, entity_key_into, entity_type_of, lookup_key, seconds,
    split_slot_row,
};
use super::tables::{DETAILS, LOOKUP, ROWS};
use crate::model::StateRow;
use crate::store::database::Store;
use crate::store::error::StoreError;

/// The JSON rows of the first versions.
const JSON_ROWS: TableDefinition<&str, &[u8]> = TableDefinition::new("entity_state");
/// Lease key -> row, before rows were numbered.
const KEYED_ROWS: TableDefinition<&[u8], &RowBytes> = TableDefinition::new("entity_lease");
/// Lease key -> the scanner's version of a row, before rows were numbered.
const KEYED_RECENT: TableDefinition<&[u8], &RowBytes> = TableDefinition::new("entity_lease_recent");
/// (filed time, lease key), before rows were numbered.
const KEYED_DUE: TableDefinition<&[u8], ()> = TableDefinition::new("entity_lease_due");
/// Row number -> fixed part and a lease key without the tenant (the entity
/// type's code, then the id), before keys held their tenant.
const UNTENANTED_ROWS: TableDefinition<u32, &[u8]> = TableDefinition::new("entity_lease_row");
/// The lookup index of [`UNTENANTED_ROWS`].
const UNTENANTED_LOOKUP: TableDefinition<u64, ()> = TableDefinition::new("entity_lease_lookup");
/// Lease key without the tenant -> details, before keys held their tenant (the
/// keyed rows' details are here too).
const UNTENANTED_DETAILS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("entity_lease_details");

impl RedbStateStore {
    /// Opens the lease tables, moving rows an earlier version kept otherwise.
    ///
    /// # Errors
    /// A storage failure, or stored rows that do not decode.
    pub fn open(store: &Store) -> Result<Self, StoreError> {
        let leases = Self::unmigrated(store)?;
        move_earlier_rows(&leases)?;
        Ok(leases)
    }
}

/// Moves the rows of every earlier layout found in the file, each layout in
/// one transaction.
///
/// # Errors
/// A storage failure, or stored rows that do not decode; nothing of that
/// layout is moved then.
fn move_earlier_rows(leases: &RedbStateStore) -> Result<(), StoreError> {
    move_untenanted_rows(leases)?;
    move_keyed_rows(leases)?;
    move_json_rows(leases)?;
    // Last, once no layout still to move has details there.
    if leases.store().read_table(UNTENANTED_DETAILS)?.is_some() {
        leases.store().transaction(|tx| {
            tx.delete_table(UNTENANTED_DETAILS)?;
            Ok::<_, StoreError>(())
        })?;
    }
    Ok(())
}

/// The key with its tenant of a key without: `tenant` from the row's fixed
/// part, then the type code and id the old key held.
fn tenanted_key(old: &[u8], tenant_id: u32) -> Result<Vec<u8>, StoreError> {
    let malformed = || StoreError::Malformed {
        what: "lease key",
        reason: "not an entity type and a UTF-8 id".into(),
    };
    let (&code, id) = old.split_first().ok_or_else(malformed)?;
    let entity_type = entity_type_of(code).ok_or_else(malformed)?;
    let id = std::str::from_utf8(id).map_err(|_| malformed())?;
    let mut key = Vec::with_capacity(old.len() + 4);
    entity_key_into(&mut key, tenant_id, entity_type, id);
    Ok(key)
}

/// The details stored under `old` (a key without its tenant) for a row that
/// has some.
fn untenanted_details(
    table: Option<&redb::ReadOnlyTable<&'static [u8], &'static [u8]>>,
    old: &[u8],
    lease: &Lease,
) -> Result<Option<Vec<u8>>, StoreError> {
    match table {
        Some(table) if lease.has_details => Ok(table.get(old)?.map(|d| d.value().to_vec())),
        _ => Ok(None),
    }
}

/// Moves the numbered rows whose keys lack their tenant: each keeps its
/// number (the expiry index and the scanner's rows are by number, and stay),
/// its key gets the tenant its fixed part holds, and its details follow it.
fn move_untenanted_rows(leases: &RedbStateStore) -> Result<(), StoreError> {
    let Some(old) = leases.store().read_table(UNTENANTED_ROWS)? else {
        return Ok(());
    };
    let details = leases.store().read_table(UNTENANTED_DETAILS)?;
    // (number, stored row with its new key, the key, its details).
    let mut rows = Vec::new();
    for entry in old.iter()? {
        let (slot, stored) = entry?;
        let (fixed, old_key) = split_slot_row(stored.value())?;
        let lease = Lease::decode(fixed)?;
        let key = tenanted_key(old_key, lease.tenant_id)?;
        let extension = untenanted_details(details.as_ref(), old_key, &lease)?;
        let mut row = fixed.to_vec();
        row.extend_from_slice(&key);
        rows.push((slot.value(), row, key, extension));
    }
    drop((old, details));
    let moved = rows.len();
    leases.store().transaction(|tx| {
        {
            let mut table = tx.open_table(ROWS)?;
            let mut lookup = tx.open_table(LOOKUP)?;
            let mut details = tx.open_table(DETAILS)?;
            for (slot, row, key, extension) in &rows {
                table.insert(slot, row.as_slice())?;
                lookup.insert(lookup_key(key, *slot), ())?;
                if let Some(extension) = extension {
                    details.insert(key.as_slice(), extension.as_slice())?;
                }
            }
        }
        tx.delete_table(UNTENANTED_ROWS)?;
        tx.delete_table(UNTENANTED_LOOKUP)?;
        Ok::<_, StoreError>(())
    })?;
    tracing::info!(rows = moved, "lease rows keyed by tenant");
    Ok(())
}

/// Moves the rows keyed by entity, the scanner's version where it has one,
/// numbered in key order and filed at their expiry, each key with its tenant
/// and its details beside it.
fn move_keyed_rows(leases: &RedbStateStore) -> Result<(), StoreError> {
    let Some(old) = leases.store().read_table(KEYED_ROWS)? else {
        return Ok(());
    };
    let recent = leases.store().read_table(KEYED_RECENT)?;
    let details = leases.store().read_table(UNTENANTED_DETAILS)?;
    let mut rows = Vec::new();
    for entry in old.iter()? {
        let (key, row) = entry?;
        let old_key = key.value();
        let newer = match &recent {
            Some(recent) => recent.get(old_key)?.map(|row| *row.value()),
            None => None,
        };
        let lease = Lease::decode(&newer.unwrap_or(*row.value()))?;
        let extension = match untenanted_details(details.as_ref(), old_key, &lease)? {
            Some(bytes) => serde_json::from_slice(&bytes).map_err(|source| StoreError::Decode {
                what: "lease details",
                source,
            })?,
            None => serde_json::Value::Null,
        };
        rows.push((tenanted_key(old_key, lease.tenant_id)?, lease, extension));
    }
    drop((old, recent, details));
    // Keys with their tenant sort as the rows are to be numbered.
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let moved = rows.len();
    leases.write(|tables, _| {
        for (key, lease, extension) in rows {
            let lease = Lease {
                filed_at: NOT_FILED,
                has_details: false,
                ..lease
            };
            tables.create(&key, lease, Some(&extension))?;
        }
        tables.tx.delete_table(KEYED_ROWS)?;
        tables.tx.delete_table(KEYED_RECENT)?;
        tables.tx.delete_table(KEYED_DUE)?;
        Ok(())
    })?;
    tracing::info!(rows = moved, "lease rows moved to the numbered table");
    Ok(())
}

/// Moves the JSON rows; a row whose entity the numbered table has already
/// keeps the numbered one.
fn move_json_rows(leases: &RedbStateStore) -> Result<(), StoreError> {
    let Some(old) = leases.store().read_table(JSON_ROWS)? else {
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
    leases.write(|tables, parents| {
        for row in &rows {
            let key = entity_key(&row.key());
            if tables.find(&key)?.is_some() {
                continue;
            }
            let lease = Lease {
                state: row.state,
                last_state: row.last_state,
                timeout_source: row.timeout_source,
                has_details: false,
                expired_state: row.expired_state,
                parent: parents.number(&row.parent_id, &mut tables.parents)?,
                tenant_id: row.tenant_id,
                timeout_seconds: seconds(row.timeout_seconds),
                last_heartbeat: row.last_heartbeat,
                expire_time: row.expire_time,
                lease_version: row.lease_version,
                filed_at: NOT_FILED,
                details_crc: 0,
            };
            tables.create(&key, lease, Some(&row.extension))?;
        }
        tables.tx.delete_table(JSON_ROWS)?;
        Ok(())
    })?;
    tracing::info!(rows = moved, "lease rows moved from the JSON table");
    Ok(())
}
