//! The binary lease table: what the index files where, the details kept beside
//! the rows, and rows moved from the JSON table of earlier versions.

use redb::TableDefinition;

use super::row::{Lease, NOT_FILED, entity_key};
use super::*;
use crate::model::{EntityType, TimeoutSource};
use crate::store::Store;

const T0: i64 = 1_800_000_000_000;

fn open(name: &str) -> (RedbStateStore, Store, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("sluice-leases-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(&dir).expect("store");
    (RedbStateStore::open(&store).expect("leases"), store, dir)
}

fn device(id: &str, parent: &str, timeout_seconds: u64) -> Renewal {
    Renewal {
        expired_state: EntityState::Offline,
        entity_type: EntityType::Device,
        entity_id: id.into(),
        parent_id: parent.into(),
        tenant_id: 4,
        state: EntityState::Online,
        timeout_seconds,
        timeout_source: TimeoutSource::Device,
        extension: serde_json::json!({}),
    }
}

fn row(leases: &RedbStateStore, id: &str) -> StateRow {
    leases
        .get(&EntityKey::device(4, id))
        .expect("get")
        .expect("row")
}

#[test]
fn a_longer_lease_is_refiled_by_the_scan_and_a_shorter_one_at_once() {
    let (leases, _store, dir) = open("refile");
    leases.renew(&[device("d", "p", 10)], T0).expect("renew");
    leases
        .renew(&[device("d", "p", 10)], T0 + 5_000)
        .expect("renew");
    // Filed at +10 s still; the scan finds it renewed and files it at +15 s.
    let claimed = leases.expire(T0 + 12_000, 10).expect("scan");
    assert!(claimed.transitions.is_empty() && !claimed.more);
    // A one-second lease at +13 s ends before +15 s: filed at +14 s at once.
    leases
        .renew(&[device("d", "p", 1)], T0 + 13_000)
        .expect("renew");
    assert!(
        leases
            .expire(T0 + 13_999, 10)
            .expect("scan")
            .transitions
            .is_empty()
    );
    let expired = leases.expire(T0 + 14_000, 10).expect("scan").transitions;
    assert_eq!(expired.len(), 1);
    assert_eq!(
        (expired[0].row.lease_version, expired[0].row.expire_time),
        (4, T0 + 15_000),
        "three renewals and the expiry; an offline lease renewed for its timeout"
    );
    assert!(
        leases
            .expire(T0 + 100_000, 10)
            .expect("scan")
            .transitions
            .is_empty(),
        "offline rows are not filed"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn heartbeats_of_one_entity_in_a_batch_count_once() {
    let (leases, _store, dir) = open("coalesce");
    let mut fault = device("d", "p", 30);
    fault.state = EntityState::Fault;
    let changes = leases
        .renew(&[device("d", "p", 10), fault], T0)
        .expect("renew");
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].event(), "device-fault");
    let stored = row(&leases, "d");
    assert_eq!(
        (stored.lease_version, stored.expire_time, stored.tenant_id),
        (1, T0 + 30_000, 4)
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn details_and_parents_are_kept_beside_the_rows() {
    let (leases, store, dir) = open("details");
    let mut failing = device("a", "modbus", 30);
    failing.extension = serde_json::json!({ "lastError": "timed out" });
    leases
        .renew(&[failing, device("b", "s7", 30)], T0)
        .expect("renew");
    assert_eq!(
        row(&leases, "a").extension,
        serde_json::json!({ "lastError": "timed out" })
    );
    leases
        .renew(&[device("a", "modbus", 30)], T0 + 1)
        .expect("renew");
    assert_eq!(row(&leases, "a").extension, serde_json::json!({}));
    drop(leases);
    let leases = RedbStateStore::open(&store).expect("reopen");
    let by_parent = |parent: &str| {
        leases
            .list(&StateFilter {
                tenant: None,
                entity_type: Some(EntityType::Device),
                parent: Some(parent.into()),
            })
            .expect("list")
            .into_iter()
            .map(|r| r.entity_id)
            .collect::<Vec<_>>()
    };
    assert_eq!(by_parent("modbus"), ["a"]);
    assert_eq!(by_parent("s7"), ["b"]);
    assert!(by_parent("mc").is_empty());
    assert!(
        leases
            .list(&StateFilter {
                tenant: None,
                entity_type: Some(EntityType::Driver),
                parent: None,
            })
            .expect("list")
            .is_empty()
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn rows_of_the_json_table_move_into_the_binary_one() {
    const JSON_ROWS: TableDefinition<&str, &[u8]> = TableDefinition::new("entity_state");
    let (store, dir) = empty_store("json");
    let old = StateRow {
        entity_type: EntityType::Device,
        entity_id: "d".into(),
        parent_id: "modbus".into(),
        state: EntityState::Online,
        last_state: EntityState::Offline,
        last_heartbeat: T0,
        expire_time: T0 + 30_000,
        lease_version: 7,
        timeout_seconds: 30,
        timeout_source: TimeoutSource::Device,
        extension: serde_json::json!({ "lastError": "" }),
        tenant_id: 2,
        expired_state: EntityState::Offline,
    };
    store
        .transaction(|tx| {
            let mut table = tx.open_table(JSON_ROWS)?;
            // As those versions wrote it: no `expiredState`.
            let mut json = serde_json::to_value(&old).expect("json");
            json.as_object_mut()
                .expect("an object")
                .remove("expiredState");
            let bytes = serde_json::to_vec(&json).expect("json");
            table.insert("6:d", bytes.as_slice())?;
            Ok::<_, crate::store::StoreError>(())
        })
        .expect("old row");
    let leases = RedbStateStore::open(&store).expect("moved");
    let moved = leases
        .get(&EntityKey::device(2, "d"))
        .expect("get")
        .expect("row");
    assert_eq!(moved, old);
    assert!(store.read_table(JSON_ROWS).expect("read").is_none());
    assert_eq!(
        leases
            .expire(T0 + 30_000, 10)
            .expect("scan")
            .transitions
            .len(),
        1,
        "a moved live row is filed for expiry"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Rows in the scanner's table (STATE-5).
fn recent_rows(store: &Store) -> u64 {
    use redb::ReadableTableMetadata;
    match store.read_table(super::tables::RECENT).expect("read") {
        Some(table) => table.len().expect("len"),
        None => 0,
    }
}

/// The lease keys of the row table, in number order (STATE-6).
fn numbered(store: &Store) -> Vec<Vec<u8>> {
    use redb::ReadableTable;
    let table = store
        .read_table(super::tables::ROWS)
        .expect("read")
        .expect("rows");
    table
        .iter()
        .expect("iter")
        .map(|entry| {
            let (_, stored) = entry.expect("entry");
            let (_, key) = super::row::split_slot_row(stored.value()).expect("row");
            key.to_vec()
        })
        .collect()
}

#[test]
fn the_scanners_rows_are_read_first_and_folded_back_by_later_writes() {
    let (leases, store, dir) = open("recent");
    let ids: Vec<String> = (0..3_000).map(|i| format!("d{i:04}")).collect();
    let all: Vec<Renewal> = ids.iter().map(|id| device(id, "p", 1)).collect();
    leases.renew(&all, T0).expect("renew");
    let expired = leases.expire(T0 + 1_000, 10_000).expect("scan").transitions;
    assert_eq!(expired.len(), 3_000);
    assert_eq!(recent_rows(&store), 3_000, "the scan wrote beside the rows");
    // Readers and writers see the scanner's version.
    assert_eq!(row(&leases, "d0007").state, EntityState::Offline);
    assert_eq!(row(&leases, "d0007").lease_version, 2);
    let listed = leases.list(&StateFilter::default()).expect("list");
    assert!(listed.iter().all(|r| r.state == EntityState::Offline));
    // A renewal of one row folds it back, and every batch folds others too.
    let back = leases
        .renew(&[device("d0007", "p", 60)], T0 + 2_000)
        .expect("renew");
    assert_eq!(back.len(), 1, "offline -> online");
    assert_eq!(back[0].from, EntityState::Offline);
    assert_eq!(row(&leases, "d0007").lease_version, 3);
    assert_eq!(
        recent_rows(&store),
        3_000 - 1 - super::tables::FOLD_PER_BATCH as u64
    );
    leases
        .renew(&[device("d0007", "p", 60)], T0 + 3_000)
        .expect("renew");
    assert_eq!(recent_rows(&store), 0, "all folded back");
    let listed = leases.list(&StateFilter::default()).expect("list");
    let offline = listed
        .iter()
        .filter(|r| r.state == EntityState::Offline && r.lease_version == 2)
        .count();
    assert_eq!(offline, 2_999, "folded rows are the scanner's versions");
    drop((leases, store));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn rows_are_numbered_in_the_order_entities_first_report() {
    let (leases, store, dir) = open("numbered");
    let batch = [
        device("z", "p", 30),
        device("a", "p", 30),
        device("z", "p", 30),
        device("m", "p", 30),
    ];
    leases.renew(&batch, T0).expect("renew");
    leases
        .renew(&[device("b", "p", 30), device("a", "p", 30)], T0 + 1)
        .expect("renew");
    let key = |id: &str| entity_key(&EntityKey::device(4, id));
    assert_eq!(numbered(&store), [key("z"), key("a"), key("m"), key("b")]);
    let listed: Vec<String> = leases
        .list(&StateFilter::default())
        .expect("list")
        .into_iter()
        .map(|r| r.entity_id)
        .collect();
    assert_eq!(listed, ["a", "b", "m", "z"], "listed in key order");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn entities_whose_keys_share_a_checksum_are_kept_apart() {
    // Two ids whose lease keys (tenant 4) have the same CRC-32 (STATE-6).
    let (one, other) = ("m-0008ddf9", "m-02008894");
    assert_eq!(
        crc32fast::hash(&entity_key(&EntityKey::device(4, one))),
        crc32fast::hash(&entity_key(&EntityKey::device(4, other)))
    );
    let (leases, _store, dir) = open("collision");
    leases.renew(&[device(one, "p", 10)], T0).expect("renew");
    assert!(
        leases
            .get(&EntityKey::device(4, other))
            .expect("get")
            .is_none()
    );
    leases
        .renew(&[device(other, "p", 20)], T0 + 1)
        .expect("renew");
    leases
        .renew(&[device(one, "p", 10)], T0 + 2)
        .expect("renew");
    assert_eq!(
        (
            row(&leases, one).lease_version,
            row(&leases, one).timeout_seconds
        ),
        (2, 10)
    );
    assert_eq!(
        (
            row(&leases, other).lease_version,
            row(&leases, other).timeout_seconds
        ),
        (1, 20)
    );
    let expired = leases.expire(T0 + 10_002, 10).expect("scan").transitions;
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].row.entity_id, one);
    assert_eq!(row(&leases, other).state, EntityState::Online);
    let _ = std::fs::remove_dir_all(dir);
}

/// A store in a new directory named after `name`.
fn empty_store(name: &str) -> (Store, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("sluice-leases-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    (Store::open(&dir).expect("store"), dir)
}

/// A 30 s lease of tenant `tenant_id` as earlier versions stored it, filed at
/// its expiry.
fn earlier_lease(tenant_id: u32, state: EntityState, has_details: bool) -> Lease {
    Lease {
        state,
        last_state: EntityState::Offline,
        timeout_source: TimeoutSource::Device,
        has_details,
        expired_state: EntityState::Offline,
        parent: 0,
        tenant_id,
        timeout_seconds: 30,
        last_heartbeat: T0,
        expire_time: T0 + 30_000,
        lease_version: 1,
        filed_at: T0 + 30_000,
        details_crc: 0,
    }
}

#[test]
fn rows_keyed_by_entity_move_into_numbered_rows() {
    const ROWS: TableDefinition<&[u8], &[u8; 52]> = TableDefinition::new("entity_lease");
    const RECENT: TableDefinition<&[u8], &[u8; 52]> = TableDefinition::new("entity_lease_recent");
    const DUE: TableDefinition<&[u8], ()> = TableDefinition::new("entity_lease_due");
    const DETAILS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("entity_lease_details");
    let (store, dir) = empty_store("keyed");
    let lease = |state: EntityState, version, has_details| Lease {
        lease_version: version,
        filed_at: if state.is_live() {
            T0 + 30_000
        } else {
            NOT_FILED
        },
        ..earlier_lease(3, state, has_details)
    };
    // Those versions' keys: the type's code, then the id; no tenant.
    let key = |id: &str| [&[6u8][..], id.as_bytes()].concat();
    store
        .transaction(|tx| {
            let mut rows = tx.open_table(ROWS)?;
            let mut recent = tx.open_table(RECENT)?;
            let mut due = tx.open_table(DUE)?;
            let mut parents = tx.open_table(super::parents::PARENTS)?;
            let mut details = tx.open_table(DETAILS)?;
            parents.insert(0, "modbus")?;
            for id in ["a", "b", "c"] {
                let has_details = id == "c";
                let stored = lease(EntityState::Online, 1, has_details).encode();
                rows.insert(key(id).as_slice(), &stored)?;
                let mut filed = ((T0 + 30_000) as u64 ^ (1 << 63)).to_be_bytes().to_vec();
                filed.extend_from_slice(&key(id));
                due.insert(filed.as_slice(), ())?;
            }
            // The scanner set b offline; its version is the one that counts.
            recent.insert(
                key("b").as_slice(),
                &lease(EntityState::Offline, 2, false).encode(),
            )?;
            details.insert(
                key("c").as_slice(),
                br#"{"lastError":"timed out"}"#.as_slice(),
            )?;
            Ok::<_, crate::store::StoreError>(())
        })
        .expect("old layout");
    let leases = RedbStateStore::open(&store).expect("moved");
    assert!(store.read_table(ROWS).expect("read").is_none());
    assert!(store.read_table(RECENT).expect("read").is_none());
    assert!(store.read_table(DUE).expect("read").is_none());
    assert!(store.read_table(DETAILS).expect("read").is_none());
    let tenanted = |id: &str| entity_key(&EntityKey::device(3, id));
    assert_eq!(
        numbered(&store),
        [tenanted("a"), tenanted("b"), tenanted("c")]
    );
    let row = |id: &str| {
        leases
            .get(&EntityKey::device(3, id))
            .expect("get")
            .expect("row")
    };
    let b = row("b");
    assert_eq!((b.state, b.lease_version), (EntityState::Offline, 2));
    let c = row("c");
    assert_eq!(c.extension, serde_json::json!({ "lastError": "timed out" }));
    assert_eq!((c.parent_id.as_str(), c.tenant_id), ("modbus", 3));
    let expired: Vec<String> = leases
        .expire(T0 + 30_000, 10)
        .expect("scan")
        .transitions
        .into_iter()
        .map(|t| t.row.entity_id)
        .collect();
    assert_eq!(
        expired,
        ["a", "c"],
        "the live rows are filed at their expiry"
    );
    drop((leases, store));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn numbered_rows_whose_keys_lack_their_tenant_keep_their_numbers_and_get_it() {
    const ROWS: TableDefinition<u32, &[u8]> = TableDefinition::new("entity_lease_row");
    const LOOKUP: TableDefinition<u64, ()> = TableDefinition::new("entity_lease_lookup");
    const DETAILS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("entity_lease_details");
    let (store, dir) = empty_store("untenanted");
    let lease = earlier_lease;
    // Those versions' keys: the type's code, then the id.
    let old_key = |code: u8, id: &str| [&[code][..], id.as_bytes()].concat();
    let old_rows = [
        (
            old_key(3, "modbus_tcp"),
            lease(5, EntityState::Online, false),
        ),
        (old_key(6, "pump"), lease(5, EntityState::Online, true)),
        (old_key(6, "fan"), lease(0, EntityState::Online, false)),
    ];
    store
        .transaction(|tx| {
            let mut rows = tx.open_table(ROWS)?;
            let mut lookup = tx.open_table(LOOKUP)?;
            let mut details = tx.open_table(DETAILS)?;
            let mut due = tx.open_table(super::tables::DUE)?;
            let mut recent = tx.open_table(super::tables::RECENT)?;
            tx.open_table(super::parents::PARENTS)?
                .insert(0, "modbus_tcp")?;
            for (slot, (key, lease)) in (0u32..).zip(&old_rows) {
                let stored = [&lease.encode()[..], key].concat();
                rows.insert(slot, stored.as_slice())?;
                lookup.insert(super::row::lookup_key(key, slot), ())?;
                due.insert(&super::row::due_key(T0 + 30_000, slot), ())?;
            }
            details.insert(
                old_key(6, "pump").as_slice(),
                br#"{"lastError":"timed out"}"#.as_slice(),
            )?;
            // The scanner's version of the fan (row 2) counts over the row's.
            let mut fan = lease(0, EntityState::Fault, false);
            fan.lease_version = 2;
            recent.insert(2, &fan.encode())?;
            Ok::<_, crate::store::StoreError>(())
        })
        .expect("old layout");
    let leases = RedbStateStore::open(&store).expect("moved");
    assert!(store.read_table(ROWS).expect("read").is_none());
    assert!(store.read_table(LOOKUP).expect("read").is_none());
    assert!(store.read_table(DETAILS).expect("read").is_none());
    assert_eq!(
        numbered(&store),
        [
            entity_key(&EntityKey::driver(5, "modbus_tcp")),
            entity_key(&EntityKey::device(5, "pump")),
            entity_key(&EntityKey::device(0, "fan")),
        ],
        "each row keeps its number and gets its tenant"
    );
    let get = |entity: EntityKey| leases.get(&entity).expect("get").expect("row");
    let pump = get(EntityKey::device(5, "pump"));
    assert_eq!(
        pump.extension,
        serde_json::json!({ "lastError": "timed out" })
    );
    let fan = get(EntityKey::device(0, "fan"));
    assert_eq!((fan.state, fan.lease_version), (EntityState::Fault, 2));
    assert_eq!(
        get(EntityKey::driver(5, "modbus_tcp")).parent_id,
        "modbus_tcp"
    );
    assert!(
        leases
            .get(&EntityKey::device(0, "pump"))
            .expect("get")
            .is_none()
    );
    // Another tenant's driver of the same name is a row of its own, numbered
    // after the moved ones; the moved rows expire where they were filed.
    let mut other = device("modbus_tcp", "", 30);
    other.entity_type = EntityType::Driver;
    other.tenant_id = 6;
    leases.renew(&[other], T0 + 1).expect("renew");
    assert_eq!(
        numbered(&store)[3],
        entity_key(&EntityKey::driver(6, "modbus_tcp"))
    );
    let expired = leases.expire(T0 + 30_000, 10).expect("scan").transitions;
    let expired: Vec<EntityKey> = expired.iter().map(|t| t.row.key()).collect();
    assert_eq!(
        expired,
        [
            EntityKey::driver(5, "modbus_tcp"),
            EntityKey::device(5, "pump"),
            EntityKey::device(0, "fan"),
        ]
    );
    drop((leases, store));
    let _ = std::fs::remove_dir_all(dir);
}
