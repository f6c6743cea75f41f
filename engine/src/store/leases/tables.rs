//! The lease tables of the engine's redb file, and what one write transaction
//! does with them (docs/state.md, STATE-2, STATE-5, STATE-6).

use std::ops::Bound;

use redb::{CursorError, ReadableTable, ReadableTableMetadata, TableDefinition};

use super::filed_at;
use super::parents::PARENTS;
use super::row::{
    DueKey, Lease, LookupKey, NOT_FILED, RowBytes, due_key, lookup_key, slot_of_lookup, slot_row,
    split_slot_row,
};
use crate::store::error::StoreError;

/// Row number -> the row's fixed part and its lease key (STATE-6). Numbers are given
/// in the order entities first report, so periodic heartbeats rewrite runs of
/// neighbouring rows. (Rows of keys without their tenant, of earlier versions,
/// are moved here at open: `migrate.rs`.)
pub(super) const ROWS: TableDefinition<u32, &[u8]> = TableDefinition::new("tenant_lease_row");
/// Row number -> the fixed part of a row the scanner changed since it was last
/// written (STATE-5): a claim writes a few pages of this small table instead of a
/// page of [`ROWS`] per row; the row's next write, or a renewal batch's fold,
/// moves it back.
pub(super) const RECENT: TableDefinition<u32, &RowBytes> =
    TableDefinition::new("entity_lease_row_recent");
/// Lookup index: (CRC-32 of the lease key, row number) for every row (STATE-6).
pub(super) const LOOKUP: TableDefinition<LookupKey, ()> =
    TableDefinition::new("tenant_lease_lookup");
/// Expiry index: (filed time, row number) for every live row (STATE-2).
pub(super) const DUE: TableDefinition<&DueKey, ()> = TableDefinition::new("entity_lease_expiry");
/// Lease key -> details (JSON), for the rows whose details are not empty.
pub(super) const DETAILS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("tenant_lease_details");
/// Rows of [`RECENT`] each renewal batch moves back to [`ROWS`].
pub(super) const FOLD_PER_BATCH: usize = 2_000;

/// The number and stored fixed part of the row of `key` (STATE-6): the lookup
/// index's candidates for the key's checksum, checked against the key each
/// row holds.
///
/// # Errors
/// A storage failure, or a stored row too short to be one.
pub(super) fn find_row(
    lookup: &impl ReadableTable<LookupKey, ()>,
    rows: &impl ReadableTable<u32, &'static [u8]>,
    key: &[u8],
) -> Result<Option<(u32, RowBytes)>, StoreError> {
    let (low, high) = (lookup_key(key, 0), lookup_key(key, u32::MAX));
    for entry in lookup.range(low..=high)? {
        let slot = slot_of_lookup(entry?.0.value());
        if let Some(stored) = rows.get(slot)? {
            let (fixed, stored_key) = split_slot_row(stored.value())?;
            if stored_key == key {
                return Ok(Some((slot, *fixed)));
            }
        }
    }
    Ok(None)
}

/// The lease of row `slot`, whose stored fixed part is `fixed`: the scanner's
/// version when it changed the row (STATE-5).
///
/// # Errors
/// A storage failure, or bytes that are not a row.
pub(super) fn current_lease(
    recent: Option<&impl ReadableTable<u32, &'static RowBytes>>,
    slot: u32,
    fixed: &RowBytes,
) -> Result<Lease, StoreError> {
    if let Some(recent) = recent
        && let Some(row) = recent.get(slot)?
    {
        return Ok(Lease::decode(row.value())?);
    }
    Ok(Lease::decode(fixed)?)
}

/// The tables of one write transaction. Rows it creates are appended when
/// it finishes ([`Tables::finish`]), so that they fill whole pages.
pub(super) struct Tables<'t> {
    pub tx: &'t redb::WriteTransaction,
    rows: redb::Table<'t, u32, &'static [u8]>,
    recent: redb::Table<'t, u32, &'static RowBytes>,
    /// Whether [`RECENT`] holds no row: then nothing is looked up there.
    recent_empty: bool,
    lookup: redb::Table<'t, LookupKey, ()>,
    pub due: redb::Table<'t, &'static DueKey, ()>,
    details: redb::Table<'t, &'static [u8], &'static [u8]>,
    pub parents: redb::Table<'t, u32, &'static str>,
    /// The number the next created row gets, once known.
    next_slot: Option<u64>,
    /// Created rows (number, stored bytes), in number order.
    created: Vec<(u32, Vec<u8>)>,
    /// The expiry index entries of the created rows.
    created_due: Vec<DueKey>,
    /// A stored row being put together.
    buffer: Vec<u8>,
}

impl<'t> Tables<'t> {
    pub fn open(tx: &'t redb::WriteTransaction) -> Result<Self, StoreError> {
        let recent = tx.open_table(RECENT)?;
        Ok(Self {
            tx,
            rows: tx.open_table(ROWS)?,
            recent_empty: recent.is_empty()?,
            recent,
            lookup: tx.open_table(LOOKUP)?,
            due: tx.open_table(DUE)?,
            details: tx.open_table(DETAILS)?,
            parents: tx.open_table(PARENTS)?,
            next_slot: None,
            created: Vec::new(),
            created_due: Vec::new(),
            buffer: Vec::new(),
        })
    }

    /// The number of the row of `key`, if there is one. Rows created in this
    /// transaction are not found: a transaction creates a key once.
    pub fn find(&self, key: &[u8]) -> Result<Option<u32>, StoreError> {
        Ok(find_row(&self.lookup, &self.rows, key)?.map(|(slot, _)| slot))
    }

    /// The one row filed under the checksum of `key`, not checked against
    /// the key (the caller does that with [`Tables::entry_of`], in row order);
    /// where several are, the one that is the key's, checked.
    pub fn probe(&self, key: &[u8]) -> Result<Option<u32>, StoreError> {
        let (low, high) = (lookup_key(key, 0), lookup_key(key, u32::MAX));
        let mut filed = self.lookup.range(low..=high)?;
        let Some(first) = filed.next().transpose()? else {
            return Ok(None);
        };
        if filed.next().is_none() {
            return Ok(Some(slot_of_lookup(first.0.value())));
        }
        drop(filed);
        self.find(key)
    }

    /// The current lease of row `slot` if it is the row of `key`.
    pub fn entry_of(&self, slot: u32, key: &[u8]) -> Result<Option<Lease>, StoreError> {
        Ok(self
            .with_row(slot, |lease, stored| (stored == key).then_some(lease))?
            .flatten())
    }

    /// The current lease of row `slot`, its lease key put in `key`.
    pub fn entry(&self, slot: u32, key: &mut Vec<u8>) -> Result<Option<Lease>, StoreError> {
        self.with_row(slot, |lease, stored| {
            key.clear();
            key.extend_from_slice(stored);
            lease
        })
    }

    /// `read` of the current lease and the stored lease key of row `slot`.
    fn with_row<R>(
        &self,
        slot: u32,
        read: impl FnOnce(Lease, &[u8]) -> R,
    ) -> Result<Option<R>, StoreError> {
        let Some(stored) = self.rows.get(slot)? else {
            return Ok(None);
        };
        let (fixed, key) = split_slot_row(stored.value())?;
        Ok(Some(read(self.lease_of(slot, fixed)?, key)))
    }

    fn lease_of(&self, slot: u32, fixed: &RowBytes) -> Result<Lease, StoreError> {
        current_lease((!self.recent_empty).then_some(&self.recent), slot, fixed)
    }

    /// Keeps the scanner's change of row `slot` apart (STATE-5).
    pub fn put_recent(&mut self, slot: u32, lease: &Lease) -> Result<(), StoreError> {
        self.recent.insert(slot, &lease.encode())?;
        self.recent_empty = false;
        Ok(())
    }

    /// Moves up to `max` of the scanner's rows back to the row table.
    pub fn fold(&mut self, max: usize) -> Result<(), StoreError> {
        if self.recent_empty {
            return Ok(());
        }
        let folded: Vec<(u32, RowBytes)> = self
            .recent
            .extract_if(|_, _| true)?
            .take(max)
            .map(|entry| entry.map(|(slot, row)| (slot.value(), *row.value())))
            .collect::<Result<_, _>>()?;
        for (slot, fixed) in folded {
            let Some(stored) = self.rows.get(slot)? else {
                continue;
            };
            let (_, key) = split_slot_row(stored.value())?;
            self.buffer.clear();
            self.buffer.extend_from_slice(&fixed);
            self.buffer.extend_from_slice(key);
            drop(stored);
            self.rows.insert(slot, self.buffer.as_slice())?;
        }
        Ok(())
    }

    /// Writes `lease` as row `slot` of `key`, which held `old`: files it in the
    /// expiry index when it is live and not filed early enough (STATE-2), keeps its
    /// details beside it (`None`: as the lease says they are).
    pub fn put(
        &mut self,
        slot: u32,
        key: &[u8],
        old: &Lease,
        mut lease: Lease,
        extension: Option<&serde_json::Value>,
    ) -> Result<Lease, StoreError> {
        if let Some(due) = self.settle(slot, key, Some(old), &mut lease, extension)? {
            self.due.insert(&due, ())?;
        }
        self.buffer.clear();
        self.buffer.extend_from_slice(&lease.encode());
        self.buffer.extend_from_slice(key);
        self.rows.insert(slot, self.buffer.as_slice())?;
        if !self.recent_empty {
            self.recent.remove(slot)?;
        }
        Ok(lease)
    }

    /// Creates the row of `key` with `lease`: numbered after every row so far,
    /// filed and with its details as [`Tables::put`] does.
    pub fn create(
        &mut self,
        key: &[u8],
        mut lease: Lease,
        extension: Option<&serde_json::Value>,
    ) -> Result<Lease, StoreError> {
        let next = match self.next_slot {
            Some(next) => next,
            None => self
                .rows
                .last()?
                .map_or(0, |(n, _)| u64::from(n.value()) + 1),
        };
        let slot = u32::try_from(next).map_err(|_| StoreError::Malformed {
            what: "lease table",
            reason: "more than 2^32 rows".into(),
        })?;
        self.next_slot = Some(next + 1);
        if let Some(due) = self.settle(slot, key, None, &mut lease, extension)? {
            self.created_due.push(due);
        }
        self.lookup.insert(lookup_key(key, slot), ())?;
        self.created.push((slot, slot_row(&lease, key)));
        Ok(lease)
    }

    /// Sets where `lease`, row `slot` of `key`, is filed, returning the expiry
    /// index entry to add, and stores its details. An entry the row leaves behind (filed later, or
    /// the row no longer live) stays in the index until its time comes, when
    /// the claim finds the row filed elsewhere and drops it (STATE-2, STATE-3): removing
    /// it would rewrite a page of the index for every shortened lease.
    fn settle(
        &mut self,
        slot: u32,
        key: &[u8],
        old: Option<&Lease>,
        lease: &mut Lease,
        extension: Option<&serde_json::Value>,
    ) -> Result<Option<DueKey>, StoreError> {
        let filed = old.map_or(NOT_FILED, |o| o.filed_at);
        let was_filed = (filed != NOT_FILED).then_some(filed);
        lease.filed_at = filed_at(lease.state, was_filed, lease.expire_time).unwrap_or(NOT_FILED);
        if let Some(extension) = extension {
            self.keep_details(key, old, lease, extension)?;
        }
        Ok((lease.filed_at != filed && lease.filed_at != NOT_FILED)
            .then(|| due_key(lease.filed_at, slot)))
    }

    fn keep_details(
        &mut self,
        key: &[u8],
        old: Option<&Lease>,
        lease: &mut Lease,
        extension: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let had_details = old.is_some_and(|o| o.has_details);
        if is_empty(extension) {
            lease.has_details = false;
            lease.details_crc = 0;
            if had_details {
                self.details.remove(key)?;
            }
            return Ok(());
        }
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
        Ok(())
    }

    /// The stored details of `key`, when its row says it has any.
    pub fn details_of(&self, key: &[u8], lease: &Lease) -> Result<serde_json::Value, StoreError> {
        if !lease.has_details {
            return Ok(empty_details());
        }
        read_details(&self.details, key)
    }

    /// Appends the created rows after every other (whole pages, through a
    /// cursor at the table's end) and files them.
    pub fn finish(mut self) -> Result<(), StoreError> {
        if !self.created.is_empty() {
            let mut end = self.rows.upper_bound_mut(Bound::<u32>::Unbounded)?;
            for (slot, stored) in &self.created {
                end.insert_before(slot, stored.as_slice())?;
            }
            end.close()?;
        }
        self.created_due.sort_unstable();
        insert_sorted(&mut self.due, &self.created_due)
    }
}

/// Inserts `keys` (sorted) into the expiry index through cursors, so that runs
/// of neighbouring keys fill whole pages; a cursor is opened again where the
/// next key does not fit its gap.
fn insert_sorted(
    due: &mut redb::Table<'_, &'static DueKey, ()>,
    keys: &[DueKey],
) -> Result<(), StoreError> {
    let mut next = 0;
    while let Some(first) = keys.get(next) {
        let mut cursor = due.upper_bound_mut(Bound::Excluded(first))?;
        let opened_at = next;
        while let Some(key) = keys.get(next) {
            match cursor.insert_before(key, ()) {
                Ok(()) => next += 1,
                Err(CursorError::UnorderedKey) => break,
                Err(error) => return Err(error.into()),
            }
        }
        cursor.close()?;
        if next == opened_at {
            // The gap's next entry is this key: it is filed already.
            next += 1;
        }
    }
    Ok(())
}

pub(super) fn read_details(
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

pub(super) fn empty_details() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

fn is_empty(extension: &serde_json::Value) -> bool {
    match extension {
        serde_json::Value::Null => true,
        serde_json::Value::Object(map) => map.is_empty(),
        _ => false,
    }
}
