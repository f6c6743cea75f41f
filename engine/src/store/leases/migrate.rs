//! Rows of earlier versions moved into the numbered row table at open (STATE-4):
//! the JSON table of the first versions, and the table keyed by entity (with
//! its expiry index and scanner rows) of the versions before numbered rows.

use redb::{ReadableTable, TableDefinition};

use super::redb_table::RedbStateStore;
use super::row::{Lease, NOT_FILED, RowBytes, entity_key, seconds};
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
    move_keyed_rows(leases)?;
    move_json_rows(leases)
}

/// Moves the rows keyed by entity, the scanner's version where it has one,
/// numbered in key order and filed at their expiry; their details stay where
/// they are (they are keyed by entity still).
fn move_keyed_rows(leases: &RedbStateStore) -> Result<(), StoreError> {
    let Some(old) = leases.store().read_table(KEYED_ROWS)? else {
        return Ok(());
    };
    let recent = leases.store().read_table(KEYED_RECENT)?;
    let mut rows = Vec::new();
    for entry in old.iter()? {
        let (key, row) = entry?;
        let key = key.value().to_vec();
        let newer = match &recent {
            Some(recent) => recent.get(key.as_slice())?.map(|row| *row.value()),
            None => None,
        };
        let lease = Lease::decode(&newer.unwrap_or(*row.value()))?;
        rows.push((key, lease));
    }
    drop((old, recent));
    let moved = rows.len();
    leases.write(|tables, _| {
        for (key, lease) in rows {
            let lease = Lease {
                filed_at: NOT_FILED,
                ..lease
            };
            tables.create(&key, lease, None)?;
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
            let key = entity_key(row.entity_type, &row.entity_id);
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
