//! Two engines' stores on one PostgreSQL database, each with a pool of its
//! own, racing: every command is claimed by one node only; a receipt from a
//! node whose claim was superseded is a duplicate or `NODE_MISMATCH`; one
//! alarm key raised from both at once leaves one active alarm; a request id
//! sent to both is one command; a device's report numbers go on from engine
//! to engine, with what a crash left unused announced (WAL-10).

use std::collections::HashSet;
use std::sync::{Arc, Barrier};

use crate::common::{new_command, whitelist};
use crate::support::postgres::Postgres;
use sluice::alarm::{AlarmStore, Raise, Raised, Scope, Source};
use sluice::command::{
    CommandStatus, CommandStore, Created, Delivery, Receipt, ReceiptOutcome, ReceiptResult,
    Rejection, Timings,
};
use sluice::store::{Postgres as Database, SeqAllocator, StateDatabase, Store};

const T0: i64 = 1_700_000_000_000;

/// One engine's view of the shared database: a pool of its own.
fn engine(url: &str) -> StateDatabase {
    StateDatabase::Postgres(Database::open(url, 4).expect("postgres"))
}

fn receipt(node: &str, generation: u64) -> Receipt {
    Receipt {
        node_id: node.into(),
        claim_generation: Some(generation),
        result: ReceiptResult::Acked,
        result_code: Some(0),
        raw_result_code: None,
        raw_ack: None,
        message: None,
    }
}

#[test]
fn two_engines_claim_every_command_once_and_late_receipts_are_refused() {
    let pg = Postgres::start();
    let url = pg.database("commands");
    let stores: Vec<Arc<CommandStore>> = (0..2)
        .map(|_| {
            Arc::new(CommandStore::new(
                engine(&url),
                whitelist().commands,
                Timings::default(),
            ))
        })
        .collect();
    let mut ids = Vec::new();
    for i in 0..300 {
        let store = &stores[i % 2];
        match store
            .create(
                &new_command(&format!("d{}", i % 7), Delivery::Deferrable, None),
                "test",
                T0,
            )
            .expect("create")
        {
            Created::New(command) => ids.push(command.id),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 300, "fresh ids");

    // Both claim at once, in small batches, until nothing is left.
    let barrier = Arc::new(Barrier::new(2));
    let claimers: Vec<_> = stores
        .iter()
        .enumerate()
        .map(|(n, store)| {
            let (store, barrier) = (Arc::clone(store), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                let node = format!("node-{n}");
                let mut mine = Vec::new();
                loop {
                    let claimed = store.claim(&node, 7, None, T0 + 1).expect("claim");
                    if claimed.is_empty() {
                        return mine;
                    }
                    mine.extend(claimed.into_iter().map(|c| c.id));
                }
            })
        })
        .collect();
    let claimed: Vec<Vec<u64>> = claimers
        .into_iter()
        .map(|t| t.join().expect("claimer"))
        .collect();
    let (a, b): (HashSet<u64>, HashSet<u64>) = (
        claimed[0].iter().copied().collect(),
        claimed[1].iter().copied().collect(),
    );
    assert!(
        a.is_disjoint(&b),
        "claimed by both: {:?}",
        a.intersection(&b)
    );
    assert_eq!(a.len() + b.len(), 300);
    assert!(!a.is_empty() && !b.is_empty(), "both took a share");

    // node-0's claim runs out; the sweep of node-1's engine requeues it and
    // node-1 claims it anew.
    let id = claimed[0][0];
    let first = stores[0].get(id, Scope::All).expect("get").expect("kept");
    let later = T0 + Timings::default().lease_ms + 2;
    let swept = stores[1].sweep(later).expect("sweep");
    assert!(swept.reclaimed.contains(&id), "{swept:?}");
    let reclaimed = loop {
        let batch = stores[1].claim("node-1", 50, None, later).expect("claim");
        if let Some(c) = batch.into_iter().find(|c| c.id == id) {
            break c;
        }
    };
    assert_eq!(reclaimed.claim_generation, first.claim_generation + 1);
    // The old node's receipt of its own claim is late: a duplicate, nothing applied.
    let late = stores[0]
        .receipt(id, &receipt("node-0", first.claim_generation), later)
        .expect("receipt");
    assert_eq!(late, ReceiptOutcome::Duplicated);
    // Of the current claim, from the wrong node: refused.
    let wrong = stores[0]
        .receipt(id, &receipt("node-0", reclaimed.claim_generation), later)
        .expect("receipt");
    assert_eq!(wrong, ReceiptOutcome::Rejected(Rejection::NodeMismatch));
    // The claiming node's receipt, through the other engine's store: applied.
    let applied = stores[0]
        .receipt(id, &receipt("node-1", reclaimed.claim_generation), later)
        .expect("receipt");
    assert!(
        matches!(applied, ReceiptOutcome::Accepted(_)),
        "{applied:?}"
    );
    let done = stores[1].get(id, Scope::All).expect("get").expect("kept");
    assert_eq!(done.status, CommandStatus::Acked);
    let history = stores[1].history(id).expect("history");
    assert_eq!(
        history.last().map(|r| r.to),
        Some(CommandStatus::Acked),
        "the change and its history row are kept together"
    );

    // One request id sent to both engines at once is one command.
    let barrier = Arc::new(Barrier::new(2));
    let creators: Vec<_> = stores
        .iter()
        .map(|store| {
            let (store, barrier) = (Arc::clone(store), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                store
                    .create(
                        &new_command("d0", Delivery::Deferrable, Some("req-1")),
                        "test",
                        T0,
                    )
                    .expect("create")
                    .command()
                    .id
            })
        })
        .collect();
    let made: HashSet<u64> = creators
        .into_iter()
        .map(|t| t.join().expect("creator"))
        .collect();
    assert_eq!(made.len(), 1, "{made:?}");
}

#[test]
fn one_alarm_key_raised_from_two_engines_at_once_leaves_one_active_alarm() {
    let pg = Postgres::start();
    let url = pg.database("alarms");
    let stores: Vec<Arc<AlarmStore>> = (0..2)
        .map(|_| Arc::new(AlarmStore::new(engine(&url), whitelist().alarms)))
        .collect();
    let barrier = Arc::new(Barrier::new(8));
    let raisers: Vec<_> = (0..8)
        .map(|i| {
            let (store, barrier) = (Arc::clone(&stores[i % 2]), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                store
                    .raise(
                        &Raise {
                            tenant_id: 0,
                            device_id: "pump".into(),
                            rule_key: "HIGH".into(),
                            source: Source::Event,
                            message: "high".into(),
                            ts_ms: T0,
                            event_id: None,
                        },
                        T0,
                    )
                    .expect("raise")
            })
        })
        .collect();
    for raiser in raisers {
        assert!(matches!(
            raiser.join().expect("raiser"),
            Raised::Opened { .. }
        ));
    }
    crate::common::assert_one_active(&stores[0], 8);
    // The database itself refuses a second holder of an active key.
    let refused = pg.try_sql(
        "alarms",
        "UPDATE sluice_record SET body = jsonb_set(body, '{activeKey}', '\"pump:HIGH\"')
         WHERE kind = 'alarm' AND id = (SELECT min(id) FROM sluice_record WHERE kind = 'alarm')
           AND body->>'activeKey' IS NULL",
    );
    let message = refused.expect_err("a second active alarm of one key");
    assert!(message.contains("alarm_active_key_unique"), "{message}");
}

#[test]
fn report_numbers_go_on_from_engine_to_engine_and_a_crash_is_announced() {
    let pg = Postgres::start();
    let url = pg.database("numbers");
    let dir = std::env::temp_dir().join(format!("sluice-it-numbers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(&dir).expect("store");
    let engine = || {
        let shared = Database::open(&url, 2).expect("postgres");
        SeqAllocator::open(&store, Some(shared), ["d"]).expect("numbers")
    };
    let next = |numbers: &SeqAllocator| {
        let numbered = numbers.next("d").expect("a number");
        (numbered.seq, numbered.skipped)
    };
    let first = engine();
    assert_eq!(next(&first), (1, None));
    assert_eq!(next(&first), (2, None));
    first.mark().expect("marks");
    assert_eq!(next(&first), (3, None));
    // It dies: the next engine announces what it may have left unused.
    drop(first);
    let second = engine();
    assert_eq!(next(&second), (1001, Some((3, 1000))));
    assert_eq!(next(&second), (1002, None));
    // A clean stop gives the rest of its block back.
    second.close().expect("close");
    drop(second);
    let third = engine();
    assert_eq!(next(&third), (1003, None));
    drop((third, store));
    let _ = std::fs::remove_dir_all(&dir);
}
