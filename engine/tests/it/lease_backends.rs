//! The lease store's behaviour, the same scenarios on both backends: the redb
//! table and a real PostgreSQL 15; then three stores sharing one PostgreSQL
//! database claim expired leases at once and never expire a row twice.

use std::collections::HashSet;
use std::sync::Arc;

use crate::support::postgres::Postgres as Server;
use sluice::lease::{
    EntityKey, EntityState, EntityType, RedbStateStore, Renewal, StateFilter, StateStore,
    TimeoutSource, Transition,
};
use sluice::store::{PgStateStore, Postgres, Store};

const T0: i64 = 1_800_000_000_000;

fn device(id: &str, timeout_seconds: u64, state: EntityState) -> Renewal {
    Renewal {
        expired_state: EntityState::Offline,
        entity_type: EntityType::Device,
        entity_id: id.into(),
        parent_id: "modbus_tcp".into(),
        tenant_id: 3,
        state,
        timeout_seconds,
        timeout_source: TimeoutSource::Device,
        extension: serde_json::json!({}),
    }
}

fn expired(store: &dyn StateStore, now: i64) -> Vec<Transition> {
    store.expire(now, 500).expect("scan").transitions
}

fn renew(store: &dyn StateStore, renewals: &[Renewal], now: i64) -> Vec<Transition> {
    store.renew(renewals, now).expect("renew")
}

/// Every scenario, on one empty store.
fn scenarios(store: &dyn StateStore) {
    // A heartbeat opens a lease; the next renews it and bumps the version.
    let opened = renew(store, &[device("d1", 30, EntityState::Online)], T0);
    assert_eq!(opened[0].event(), "device-online");
    assert!(renew(store, &[device("d1", 30, EntityState::Online)], T0 + 10_000).is_empty());
    let row = store
        .get(&EntityKey::device(3, "d1"))
        .expect("get")
        .expect("row");
    assert_eq!(
        (
            row.lease_version,
            row.expire_time,
            row.last_heartbeat,
            row.tenant_id
        ),
        (2, T0 + 40_000, T0 + 10_000, 3)
    );
    // Not yet expired; then expired exactly once, with an offline lease.
    assert!(expired(store, T0 + 39_999).is_empty());
    let gone = expired(store, T0 + 40_000);
    assert_eq!(gone.len(), 1);
    assert_eq!(
        (gone[0].event(), gone[0].from, gone[0].row.lease_version),
        ("device-offline".to_owned(), EntityState::Online, 3)
    );
    assert_eq!(gone[0].row.expire_time, T0 + 70_000);
    assert!(expired(store, T0 + 100_000).is_empty(), "expired once only");
    assert_eq!(
        renew(
            store,
            &[device("d1", 30, EntityState::Online)],
            T0 + 100_000
        )[0]
        .event(),
        "device-online"
    );
    // The second check: a renewal after the row was filed wins; a shorter lease
    // is filed at once.
    renew(store, &[device("d2", 10, EntityState::Online)], T0);
    renew(store, &[device("d2", 10, EntityState::Online)], T0 + 5_000);
    assert!(expired(store, T0 + 12_000).is_empty());
    renew(store, &[device("d2", 1, EntityState::Online)], T0 + 13_000);
    assert_eq!(expired(store, T0 + 14_000).len(), 1);
    // Maintain and fault are live states that end offline.
    renew(
        store,
        &[
            device("m", 30, EntityState::Online),
            device("f", 30, EntityState::Online),
        ],
        T0,
    );
    let maintained = store
        .set_state(&EntityKey::device(3, "m"), EntityState::Maintain, T0 + 1)
        .expect("set")
        .expect("row");
    assert_eq!(
        (maintained.from, maintained.row.state),
        (EntityState::Online, EntityState::Maintain)
    );
    assert!(renew(store, &[device("m", 30, EntityState::Online)], T0 + 2).is_empty());
    assert_eq!(
        renew(store, &[device("f", 30, EntityState::Fault)], T0 + 2)[0].event(),
        "device-fault"
    );
    let mut lasts: Vec<_> = expired(store, T0 + 31_000)
        .iter()
        .map(|t| (t.row.entity_id.clone(), t.row.last_state))
        .collect();
    lasts.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        lasts,
        [
            ("f".to_owned(), EntityState::Fault),
            ("m".to_owned(), EntityState::Maintain)
        ]
    );
    assert!(
        store
            .set_state(&EntityKey::device(3, "nobody"), EntityState::Maintain, T0)
            .expect("set")
            .is_none()
    );
    // Several heartbeats of one entity in a batch count as its last one.
    let mut fault = device("c", 30, EntityState::Fault);
    fault.extension = serde_json::json!({ "lastError": "timed out" });
    let changes = renew(store, &[device("c", 10, EntityState::Online), fault], T0);
    assert_eq!(changes.len(), 1);
    let row = store
        .get(&EntityKey::device(3, "c"))
        .expect("get")
        .expect("row");
    assert_eq!(
        (row.lease_version, row.state, row.extension),
        (
            1,
            EntityState::Fault,
            serde_json::json!({ "lastError": "timed out" })
        )
    );
    // Batches, oldest first; what is left comes in the next claim.
    let many: Vec<Renewal> = (0..1200)
        .map(|i| device(&format!("b{i:04}"), 200 + (i % 3), EntityState::Online))
        .collect();
    renew(store, &many, T0 + 1_000_000);
    let first = store.expire(T0 + 2_000_000, 500).expect("scan");
    assert!(first.more);
    assert_eq!(first.transitions.len(), 500);
    assert!(
        first
            .transitions
            .windows(2)
            .all(|w| w[0].row.timeout_seconds <= w[1].row.timeout_seconds),
        "oldest first"
    );
    assert_eq!(expired(store, T0 + 2_000_000).len(), 500);
    // The 200 left, and d1 and c, whose leases ran out long before.
    assert_eq!(expired(store, T0 + 2_000_000).len(), 202);
    let listed = store
        .list(&StateFilter {
            tenant: None,
            entity_type: Some(EntityType::Device),
            parent: Some("modbus_tcp".into()),
        })
        .expect("list");
    assert_eq!(listed.len(), 1200 + 5);
    assert!(
        store
            .list(&StateFilter {
                tenant: None,
                entity_type: Some(EntityType::Driver),
                parent: None,
            })
            .expect("list")
            .is_empty()
    );
    // A device whose silence is no alarm ends unknown, not offline
    // (`stateWhenExpired: unknown`); readers see it so before the scanner.
    let mut slow = device("slow", 30, EntityState::Online);
    slow.expired_state = EntityState::Unknown;
    let t = T0 + 3_000_000;
    renew(store, std::slice::from_ref(&slow), t);
    let row = store
        .get(&EntityKey::device(3, "slow"))
        .expect("get")
        .expect("row");
    assert_eq!(row.effective_state(t + 29_999), EntityState::Online);
    assert_eq!(row.effective_state(t + 30_000), EntityState::Unknown);
    let ended = expired(store, t + 30_000);
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(
        (ended[0].event(), ended[0].from, ended[0].row.expired_state),
        (
            "device-unknown".to_owned(),
            EntityState::Online,
            EntityState::Unknown
        )
    );
    assert!(
        expired(store, t + 100_000).is_empty(),
        "unknown is not live: not filed again"
    );
    let back = renew(store, &[slow], t + 100_000);
    assert_eq!(
        (back[0].event(), back[0].from),
        ("device-online".to_owned(), EntityState::Unknown)
    );
    tenants_have_a_driver_row_each(store, T0 + 4_000_000);
}

/// Rows are keyed by tenant (seed 000's unique key): two tenants on one codec
/// have a driver row each, and what happens to one leaves the other alone.
fn tenants_have_a_driver_row_each(store: &dyn StateStore, t: i64) {
    use EntityState::{Fault, Maintain, Online};
    let driver = |tenant_id, state| Renewal {
        expired_state: EntityState::Offline,
        entity_type: EntityType::Driver,
        entity_id: "modbus_tcp".into(),
        parent_id: String::new(),
        tenant_id,
        state,
        timeout_seconds: 45,
        timeout_source: TimeoutSource::System,
        extension: serde_json::json!({}),
    };
    let events = |changes: &[Transition]| -> Vec<(u32, String)> {
        changes
            .iter()
            .map(|c| (c.row.tenant_id, c.event()))
            .collect()
    };
    let state_of = |tenant| {
        let row = store.get(&EntityKey::driver(tenant, "modbus_tcp"));
        row.expect("get").expect("row").state
    };
    // Whatever the scenarios before left live runs out first.
    expired(store, t);
    let opened = renew(store, &[driver(1, Online), driver(2, Online)], t);
    assert_eq!(
        events(&opened),
        [(1, "driver-online".into()), (2, "driver-online".into())]
    );
    let faulted = renew(store, &[driver(1, Fault), driver(2, Online)], t + 15_000);
    assert_eq!(events(&faulted), [(1, "driver-fault".into())]);
    assert_eq!((state_of(1), state_of(2)), (Fault, Online));
    let maintained = store
        .set_state(&EntityKey::driver(2, "modbus_tcp"), Maintain, t + 16_000)
        .expect("set")
        .expect("row");
    assert_eq!(maintained.row.tenant_id, 2);
    assert_eq!((state_of(1), state_of(2)), (Fault, Maintain));
    let drivers = |tenant| {
        let filter = StateFilter {
            tenant,
            entity_type: Some(EntityType::Driver),
            parent: None,
        };
        let rows = store.list(&filter).expect("list");
        rows.iter().map(|r| r.tenant_id).collect::<Vec<_>>()
    };
    assert_eq!(drivers(None), [1, 2], "in key order: tenant first");
    assert_eq!(drivers(Some(2)), [2]);
    assert!(
        store
            .get(&EntityKey::driver(3, "modbus_tcp"))
            .expect("get")
            .is_none()
    );
    // Tenant 1's driver stops renewing: its lease alone runs out.
    renew(store, &[driver(2, Online)], t + 40_000);
    let gone = expired(store, t + 60_000);
    assert_eq!(events(&gone), [(1, "driver-offline".into())]);
    assert_eq!(state_of(2), Maintain);
}

#[test]
fn the_lease_scenarios_hold_on_redb() {
    let dir = std::env::temp_dir().join(format!("sluice-lease-backends-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(&dir).expect("store");
    scenarios(&RedbStateStore::open(&store).expect("leases"));
    drop(store);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_lease_scenarios_hold_on_postgres_and_three_engines_never_expire_a_row_twice() {
    let server = Server::start();
    let db = Postgres::open(&server.database("scenarios"), 4).expect("postgres");
    scenarios(&PgStateStore::new(&db));
    // Opening again finds the schema in place; a schema from a newer engine
    // is refused, not written.
    let shared = server.database("shared");
    let again = Postgres::open(&shared, 4).expect("postgres");
    drop(Postgres::open(&shared, 2).expect("reopen"));
    let newer = server.database("newer");
    drop(Postgres::open(&newer, 1).expect("postgres"));
    server.sql("newer", "INSERT INTO sluice_schema (version) VALUES (99)");
    let refused = Postgres::open(&newer, 1).expect_err("a newer schema");
    assert!(
        refused
            .to_string()
            .contains("version 99, newer than this engine knows (6)"),
        "{refused}"
    );
    let unreachable = Postgres::open("postgresql://postgres@127.0.0.1:1/none", 1)
        .expect_err("nothing listens on port 1");
    assert!(
        unreachable.to_string().starts_with("PostgreSQL: "),
        "{unreachable}"
    );

    let stores: Vec<Arc<PgStateStore>> = (0..3)
        .map(|_| Arc::new(PgStateStore::new(&again)))
        .collect();
    let renewals: Vec<Renewal> = (0..3000)
        .map(|i| device(&format!("s{i:04}"), 10, EntityState::Online))
        .collect();
    stores[0].renew(&renewals, T0).expect("renew");
    let claims: Vec<Vec<String>> = std::thread::scope(|scope| {
        let workers: Vec<_> = stores
            .iter()
            .map(|store| {
                scope.spawn(move || {
                    let mut ids = Vec::new();
                    loop {
                        let claimed = store.expire(T0 + 20_000, 100).expect("claim");
                        ids.extend(claimed.transitions.into_iter().map(|t| t.row.entity_id));
                        if !claimed.more {
                            return ids;
                        }
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("worker"))
            .collect()
    });
    let total: usize = claims.iter().map(Vec::len).sum();
    let distinct: HashSet<&String> = claims.iter().flatten().collect();
    assert_eq!(
        (total, distinct.len()),
        (3000, 3000),
        "each row expired once"
    );
}
