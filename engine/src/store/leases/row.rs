//! The binary form of a lease row in redb, and the keys of its lookup and
//! expiry indexes (docs/state.md, STATE-1 to STATE-3, STATE-6).
//!
//! A row's fixed part is [`ROW_BYTES`] bytes, little-endian; the stored row
//! adds the entity's lease key after it:
//!
//! | bytes | field |
//! |---|---|
//! | 0 | state |
//! | 1 | last state |
//! | 2 | timeout source |
//! | 3 | flags (bit 0: details stored beside the row; bit 1: the lease ends unknown, not offline) |
//! | 4..8 | parent (a number of the parent table) |
//! | 8..12 | tenant |
//! | 12..16 | timeout, seconds |
//! | 16..24 | last heartbeat, ms |
//! | 24..32 | expire time, ms |
//! | 32..40 | lease version |
//! | 40..48 | where the expiry index files the row (ms; `i64::MIN`: not filed) |
//! | 48..52 | CRC-32 of the stored details |

use crate::model::{EntityKey, EntityState, EntityType, TimeoutSource};

pub(super) const ROW_BYTES: usize = 52;
pub(super) type RowBytes = [u8; ROW_BYTES];

/// Not filed in the expiry index (offline rows).
pub(super) const NOT_FILED: i64 = i64::MIN;

const HAS_DETAILS: u8 = 1;
const EXPIRES_UNKNOWN: u8 = 2;

/// One lease row as redb holds it: every field but the entity's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Lease {
    pub state: EntityState,
    pub last_state: EntityState,
    pub timeout_source: TimeoutSource,
    pub has_details: bool,
    /// Where the lease ends: offline, or unknown (`stateWhenExpired`).
    pub expired_state: EntityState,
    pub parent: u32,
    pub tenant_id: u32,
    pub timeout_seconds: u32,
    pub last_heartbeat: i64,
    pub expire_time: i64,
    pub lease_version: u64,
    /// The expiry the index files this row under (STATE-2): at or before
    /// `expire_time` while the row is live.
    pub filed_at: i64,
    pub details_crc: u32,
}

/// Why stored bytes are not a lease row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a stored lease row has a bad {0}")]
pub(super) struct BadRow(&'static str);

impl From<BadRow> for crate::store::StoreError {
    fn from(error: BadRow) -> Self {
        Self::Malformed {
            what: "lease row",
            reason: error.to_string(),
        }
    }
}

impl Lease {
    pub fn encode(&self) -> RowBytes {
        let mut b = [0u8; ROW_BYTES];
        b[0] = state_code(self.state);
        b[1] = state_code(self.last_state);
        b[2] = source_code(self.timeout_source);
        b[3] = if self.has_details { HAS_DETAILS } else { 0 }
            | if self.expired_state == EntityState::Unknown {
                EXPIRES_UNKNOWN
            } else {
                0
            };
        b[4..8].copy_from_slice(&self.parent.to_le_bytes());
        b[8..12].copy_from_slice(&self.tenant_id.to_le_bytes());
        b[12..16].copy_from_slice(&self.timeout_seconds.to_le_bytes());
        b[16..24].copy_from_slice(&self.last_heartbeat.to_le_bytes());
        b[24..32].copy_from_slice(&self.expire_time.to_le_bytes());
        b[32..40].copy_from_slice(&self.lease_version.to_le_bytes());
        b[40..48].copy_from_slice(&self.filed_at.to_le_bytes());
        b[48..52].copy_from_slice(&self.details_crc.to_le_bytes());
        b
    }

    /// # Errors
    /// An unknown state or timeout-source code.
    pub fn decode(b: &RowBytes) -> Result<Self, BadRow> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(word)
        };
        Ok(Self {
            state: state_of(b[0]).ok_or(BadRow("state code"))?,
            last_state: state_of(b[1]).ok_or(BadRow("last state code"))?,
            timeout_source: source_of(b[2]).ok_or(BadRow("timeout source code"))?,
            has_details: b[3] & HAS_DETAILS != 0,
            expired_state: if b[3] & EXPIRES_UNKNOWN != 0 {
                EntityState::Unknown
            } else {
                EntityState::Offline
            },
            parent: u32_at(4),
            tenant_id: u32_at(8),
            timeout_seconds: u32_at(12),
            last_heartbeat: u64_at(16) as i64,
            expire_time: u64_at(24) as i64,
            lease_version: u64_at(32),
            filed_at: u64_at(40) as i64,
            details_crc: u32_at(48),
        })
    }
}

/// A lease length in seconds as a row holds it (saturated).
pub(super) fn seconds(timeout: u64) -> u32 {
    u32::try_from(timeout).unwrap_or(u32::MAX)
}

/// The seed's state flags: 0 online, 1 offline, 2 maintain, 3 fault; and 4
/// unknown (the seed's "to be confirmed", which it names without a flag).
pub(crate) fn state_code(state: EntityState) -> u8 {
    match state {
        EntityState::Online => 0,
        EntityState::Offline => 1,
        EntityState::Maintain => 2,
        EntityState::Fault => 3,
        EntityState::Unknown => 4,
    }
}

pub(crate) fn state_of(code: u8) -> Option<EntityState> {
    Some(match code {
        0 => EntityState::Online,
        1 => EntityState::Offline,
        2 => EntityState::Maintain,
        3 => EntityState::Fault,
        4 => EntityState::Unknown,
        _ => return None,
    })
}

/// The seed's timeout sources: 0 system, 1 driver, 2 device, 3 profile.
pub(crate) fn source_code(source: TimeoutSource) -> u8 {
    match source {
        TimeoutSource::System => 0,
        TimeoutSource::Driver => 1,
        TimeoutSource::Device => 2,
        TimeoutSource::Profile => 3,
    }
}

pub(crate) fn source_of(code: u8) -> Option<TimeoutSource> {
    Some(match code {
        0 => TimeoutSource::System,
        1 => TimeoutSource::Driver,
        2 => TimeoutSource::Device,
        3 => TimeoutSource::Profile,
        _ => return None,
    })
}

/// An entity's lease key (seed 000's unique key, STATE-6): the tenant
/// (big-endian, so keys sort by tenant first), the entity type's code, then
/// the id's bytes. Rows hold it after their fixed part; details are filed
/// under it.
pub(super) fn entity_key(entity: &EntityKey) -> Vec<u8> {
    let mut key = Vec::with_capacity(5 + entity.entity_id.len());
    entity_key_into(
        &mut key,
        entity.tenant_id,
        entity.entity_type,
        &entity.entity_id,
    );
    key
}

/// [`entity_key`] of its parts, into a buffer the caller reuses.
pub(super) fn entity_key_into(
    key: &mut Vec<u8>,
    tenant_id: u32,
    entity_type: EntityType,
    entity_id: &str,
) {
    key.clear();
    key.extend_from_slice(&tenant_id.to_be_bytes());
    key.push(entity_type.code());
    key.extend_from_slice(entity_id.as_bytes());
}

/// The entity a lease key names; `None` for bytes no key of this table has.
pub(super) fn entity_of(key: &[u8]) -> Option<EntityKey> {
    let (tenant, rest) = key.split_first_chunk::<4>()?;
    let (&code, id) = rest.split_first()?;
    Some(EntityKey {
        tenant_id: u32::from_be_bytes(*tenant),
        entity_type: entity_type_of(code)?,
        entity_id: String::from_utf8(id.to_vec()).ok()?,
    })
}

/// The entity type of its seed code.
pub(super) fn entity_type_of(code: u8) -> Option<EntityType> {
    [EntityType::Driver, EntityType::Device]
        .into_iter()
        .find(|t| t.code() == code)
}

/// A stored row: the fixed part, then the lease key (STATE-6).
pub(super) fn slot_row(lease: &Lease, key: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(ROW_BYTES + key.len());
    bytes.extend_from_slice(&lease.encode());
    bytes.extend_from_slice(key);
    bytes
}

/// The fixed part and the lease key of a stored row.
///
/// # Errors
/// Bytes too short to be a row.
pub(super) fn split_slot_row(bytes: &[u8]) -> Result<(&RowBytes, &[u8]), BadRow> {
    bytes
        .split_first_chunk::<ROW_BYTES>()
        .ok_or(BadRow("length"))
}

/// A key of the lookup index (STATE-6): the CRC-32 of the lease key in the high
/// half, the row's number in the low half (an integer, so that comparing two
/// is one instruction).
pub(super) type LookupKey = u64;

pub(super) fn lookup_key(key: &[u8], slot: u32) -> LookupKey {
    (u64::from(crc32fast::hash(key)) << 32) | u64::from(slot)
}

/// The row number a lookup key points at.
pub(super) fn slot_of_lookup(lookup: LookupKey) -> u32 {
    lookup as u32
}

/// A key of the expiry index: the time (ordered as unsigned big-endian bytes),
/// then the row's number, so a range scan returns rows in expiry order.
pub(super) type DueKey = [u8; 12];

pub(super) fn due_key(at: i64, slot: u32) -> DueKey {
    let mut bytes = [0u8; 12];
    bytes[..8].copy_from_slice(&((at as u64) ^ (1 << 63)).to_be_bytes());
    bytes[8..].copy_from_slice(&slot.to_be_bytes());
    bytes
}

/// The first key of the expiry index past everything due at `at`.
pub(super) fn due_after(at: i64) -> DueKey {
    due_key(at.saturating_add(1), 0)
}

/// The time and row number of an expiry index key.
pub(super) fn split_due(bytes: &DueKey) -> (i64, u32) {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[..8]);
    let slot = u32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    ((u64::from_be_bytes(word) ^ (1 << 63)) as i64, slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_survives_its_encoding() {
        let lease = Lease {
            state: EntityState::Fault,
            last_state: EntityState::Maintain,
            timeout_source: TimeoutSource::Profile,
            has_details: true,
            expired_state: EntityState::Unknown,
            parent: 7,
            tenant_id: u32::MAX,
            timeout_seconds: 45,
            last_heartbeat: -5,
            expire_time: 1_800_000_045_000,
            lease_version: u64::MAX,
            filed_at: NOT_FILED,
            details_crc: 0xdead_beef,
        };
        assert_eq!(Lease::decode(&lease.encode()), Ok(lease));
        let gone = Lease {
            state: EntityState::Unknown,
            expired_state: EntityState::Offline,
            has_details: false,
            ..lease
        };
        assert_eq!(Lease::decode(&gone.encode()), Ok(gone));
        let mut bytes = lease.encode();
        bytes[0] = 9;
        assert_eq!(Lease::decode(&bytes), Err(BadRow("state code")));
    }

    #[test]
    fn due_keys_sort_in_time_order_across_the_epoch() {
        let times = [i64::MIN + 1, -1_000, 0, 1, 1_800_000_000_000];
        let keys: Vec<DueKey> = times.iter().map(|&t| due_key(t, u32::MAX)).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        for (&t, key) in times.iter().zip(&keys) {
            assert_eq!(split_due(key), (t, u32::MAX));
            assert!(key < &due_after(t));
            assert!(due_key(t + 1, 0) >= due_after(t));
        }
        let entity = EntityKey::driver(7, "modbus_tcp");
        assert_eq!(entity_of(&entity_key(&entity)), Some(entity));
        assert_eq!(entity_of(b"\0\0\0\x07\x09x"), None, "no entity type 9");
        assert_eq!(entity_of(b"\x06x"), None, "too short for a tenant");
        // Keys sort by tenant, then type, then id.
        let keys: Vec<Vec<u8>> = [
            EntityKey::driver(1, "s7"),
            EntityKey::device(1, "a"),
            EntityKey::driver(2, "modbus_tcp"),
        ]
        .iter()
        .map(entity_key)
        .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn a_stored_row_holds_its_key_and_the_lookup_its_number() {
        let lease = Lease {
            state: EntityState::Online,
            last_state: EntityState::Offline,
            timeout_source: TimeoutSource::System,
            has_details: false,
            expired_state: EntityState::Offline,
            parent: 0,
            tenant_id: 0,
            timeout_seconds: 30,
            last_heartbeat: 1,
            expire_time: 30_001,
            lease_version: 1,
            filed_at: 30_001,
            details_crc: 0,
        };
        let key = entity_key(&EntityKey::device(0, "d-1"));
        let stored = slot_row(&lease, &key);
        let (fixed, stored_key) = split_slot_row(&stored).expect("row");
        assert_eq!(
            (Lease::decode(fixed), stored_key),
            (Ok(lease), key.as_slice())
        );
        assert_eq!(split_slot_row(&stored[..10]), Err(BadRow("length")));
        let lookup = lookup_key(&key, 0x0102_0304);
        assert_eq!(slot_of_lookup(lookup), 0x0102_0304);
        assert_eq!(
            lookup >> 32,
            lookup_key(&key, 0) >> 32,
            "one checksum per key"
        );
    }
}
