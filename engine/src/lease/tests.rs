//! The lease store under a controlled clock: every `now` below is chosen by the test.

use super::*;
use crate::store::Store;

const T0: i64 = 1_800_000_000_000;
/// The devices' tenant.
const T: u32 = 2;

fn store(name: &str) -> (RedbStateStore, Store, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("sluice-lease-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(&dir).expect("store");
    (RedbStateStore::open(&store).expect("leases"), store, dir)
}

fn device(id: &str, timeout_seconds: u64, state: EntityState) -> Renewal {
    Renewal {
        expired_state: EntityState::Offline,
        entity_type: EntityType::Device,
        entity_id: id.into(),
        parent_id: "modbus_tcp".into(),
        tenant_id: T,
        state,
        timeout_seconds,
        timeout_source: TimeoutSource::Device,
        extension: serde_json::json!({}),
    }
}

fn claim(leases: &RedbStateStore, now: i64, batch: usize) -> Vec<Transition> {
    leases.expire(now, batch).expect("scan").transitions
}

#[test]
fn a_heartbeat_opens_and_renews_a_lease() {
    let (leases, _store, dir) = store("renew");
    let changes = leases
        .renew(&[device("d1", 30, EntityState::Online)], T0)
        .expect("renew");
    assert_eq!(changes.len(), 1);
    assert_eq!(
        (changes[0].from, changes[0].event()),
        (EntityState::Offline, "device-online".to_owned())
    );
    let row = leases
        .get(&EntityKey::device(T, "d1"))
        .expect("get")
        .expect("row");
    assert_eq!(
        (
            row.state,
            row.lease_version,
            row.expire_time,
            row.last_heartbeat
        ),
        (EntityState::Online, 1, T0 + 30_000, T0)
    );
    assert!(
        leases
            .renew(&[device("d1", 30, EntityState::Online)], T0 + 10_000)
            .expect("renew")
            .is_empty()
    );
    let row = leases
        .get(&EntityKey::device(T, "d1"))
        .expect("get")
        .expect("row");
    assert_eq!(
        (row.lease_version, row.expire_time),
        (2, T0 + 40_000),
        "every renewal bumps the version"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_expired_lease_reads_offline_before_the_scan_and_the_scan_sets_it() {
    let (leases, _store, dir) = store("expire");
    leases
        .renew(&[device("d1", 30, EntityState::Online)], T0)
        .expect("renew");
    assert!(claim(&leases, T0 + 29_999, 100).is_empty(), "not yet");
    let row = leases
        .get(&EntityKey::device(T, "d1"))
        .expect("get")
        .expect("row");
    assert_eq!(
        row.effective_state(T0 + 30_000),
        EntityState::Offline,
        "reads offline at expiry"
    );
    assert_eq!(row.state, EntityState::Online, "reading changed nothing");
    let expired = claim(&leases, T0 + 30_000, 100);
    assert_eq!(expired.len(), 1);
    assert_eq!(
        (
            expired[0].row.state,
            expired[0].row.last_state,
            expired[0].row.lease_version
        ),
        (EntityState::Offline, EntityState::Online, 2)
    );
    assert_eq!(expired[0].event(), "device-offline");
    assert!(
        claim(&leases, T0 + 60_000, 100).is_empty(),
        "expired once only"
    );
    let back = leases
        .renew(&[device("d1", 30, EntityState::Online)], T0 + 70_000)
        .expect("renew");
    assert_eq!(back[0].event(), "device-online");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn expired_rows_are_claimed_in_batches_and_leases_survive_a_reopen() {
    let (leases, store, dir) = store("batches");
    let renewals: Vec<Renewal> = (0..1200)
        .map(|i| device(&format!("d{i}"), 10 + (i % 3), EntityState::Online))
        .collect();
    leases.renew(&renewals, T0).expect("renew");
    let first = claim(&leases, T0 + 60_000, 500);
    assert_eq!(first.len(), 500);
    assert!(
        first
            .windows(2)
            .all(|w| w[0].row.expire_time <= w[1].row.expire_time),
        "oldest first"
    );
    assert_eq!(claim(&leases, T0 + 60_000, 500).len(), 500);
    drop(leases);
    drop(store);
    let store = Store::open(&dir).expect("reopen");
    let leases = RedbStateStore::open(&store).expect("leases");
    assert_eq!(
        claim(&leases, T0 + 60_000, 500).len(),
        200,
        "the rest, after a restart"
    );
    let all = leases
        .list(&StateFilter {
            tenant: Some(T),
            entity_type: Some(EntityType::Device),
            parent: Some("modbus_tcp".into()),
        })
        .expect("list");
    assert_eq!(all.len(), 1200);
    assert!(all.iter().all(|r| r.state == EntityState::Offline));
    drop(store);
    let _ = std::fs::remove_dir_all(dir);
}
