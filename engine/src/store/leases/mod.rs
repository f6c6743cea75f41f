//! The lease store: an interface every backend implements (the seed's
//! `FOR UPDATE SKIP LOCKED` claim maps onto [`StateStore::expire`]), and its
//! redb implementation with numbered fixed-size binary rows (docs/state.md).

mod migrate;
mod parents;
mod redb_table;
mod row;
mod tables;

pub use redb_table::RedbStateStore;
pub(crate) use row::{source_code, source_of, state_code, state_of};

use super::error::StoreError;
use crate::model::{EntityKey, EntityState, Renewal, StateFilter, StateRow, Transition};

/// What one claim of expired leases did.
#[derive(Debug, Default)]
pub struct Claimed {
    /// The rows set offline, in expiry order.
    pub transitions: Vec<Transition>,
    /// Whether the claim stopped at its batch size: more may be due.
    pub more: bool,
}

/// Storage of entity states and leases, implemented on redb and on PostgreSQL
/// (ARCH-2).
pub trait StateStore: Send + Sync + std::fmt::Debug {
    /// Applies heartbeats in one durable transaction (STATE-1); returns the state
    /// changes they made. Several heartbeats of one entity in a batch count as
    /// its last one.
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
        entity: &EntityKey,
        state: EntityState,
        now_ms: i64,
    ) -> Result<Option<Transition>, StoreError>;

    /// Claims up to `batch` live rows whose lease ran out at `now`, oldest first,
    /// re-checking each (lease version, expiry, live state) before setting it
    /// offline with a renewed (offline) lease (STATE-3).
    ///
    /// # Errors
    /// A storage failure; nothing of the batch is applied.
    fn expire(&self, now_ms: i64, batch: usize) -> Result<Claimed, StoreError>;

    /// One row, as stored (readers apply [`StateRow::effective_state`]).
    ///
    /// # Errors
    /// A storage failure.
    fn get(&self, entity: &EntityKey) -> Result<Option<StateRow>, StoreError>;

    /// Rows matching `filter`, in key order (tenant, type code, id bytewise).
    ///
    /// # Errors
    /// A storage failure.
    fn list(&self, filter: &StateFilter) -> Result<Vec<StateRow>, StoreError>;
}

/// The renewed row of `old` (if any) for `renewal` at `now`, and the state it
/// had before: the rule every backend applies to a heartbeat.
pub(crate) fn renewed_state(
    old: Option<(EntityState, EntityState)>,
    renewal: &Renewal,
    before: EntityState,
) -> (EntityState, EntityState) {
    let state = match (old.map(|(state, _)| state), renewal.state) {
        // An operator's maintenance outlives heartbeats.
        (Some(EntityState::Maintain), EntityState::Online) => EntityState::Maintain,
        (_, state) => state,
    };
    let last_state = if before == state {
        old.map_or(before, |(_, last)| last)
    } else {
        before
    };
    (state, last_state)
}

/// Where the expiry index files a row (STATE-2): nowhere when it is not live; where
/// it was filed if that is not after its new expiry; else at its expiry.
pub(crate) fn filed_at(state: EntityState, filed: Option<i64>, expire_time: i64) -> Option<i64> {
    match filed {
        _ if !state.is_live() => None,
        Some(filed) if filed <= expire_time => Some(filed),
        _ => Some(expire_time),
    }
}

/// The last renewal of each entity in `renewals`, in key order (tenant, type
/// code, id), each beside the position of the entity's first renewal in
/// `renewals`.
pub(crate) fn coalesced(renewals: &[Renewal]) -> Vec<(usize, &Renewal)> {
    let mut sorted: Vec<(usize, &Renewal)> = renewals.iter().enumerate().collect();
    let order = |r: &Renewal| (r.tenant_id, r.entity_type.code());
    sorted.sort_unstable_by(|(i, a), (j, b)| {
        (order(a), a.entity_id.as_str(), *i).cmp(&(order(b), b.entity_id.as_str(), *j))
    });
    let mut last: Vec<(usize, &Renewal)> = Vec::with_capacity(sorted.len());
    for (i, renewal) in sorted {
        match last.last_mut() {
            Some((_, kept))
                if order(kept) == order(renewal) && kept.entity_id == renewal.entity_id =>
            {
                *kept = renewal;
            }
            _ => last.push((i, renewal)),
        }
    }
    last
}

#[cfg(test)]
mod tests;
