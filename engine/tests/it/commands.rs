//! The command machine against a real redb file and the real rules component,
//! with an explicit clock: the whitelist, claims and leases, the seed's six-step
//! generation example, the receipt guards, retries, timeouts and cancellation.

use std::collections::HashMap;

use crate::common::{TS, TestDatabase, new_command, whitelist};
use serde_json::json;
use sluice::alarm::{AlarmStore, Raised, Scope, Source};
use sluice::command::node::{RECLAIMS_RULE, reclaim_alarm};
use sluice::command::{
    CommandAction, CommandError, CommandStatus, CommandStore, Created, Delivery, Receipt,
    ReceiptOutcome, ReceiptResult, Rejection, Timings,
};

const T0: i64 = TS;
const SECOND: i64 = 1000;

fn store(name: &str) -> CommandStore {
    CommandStore::new(
        TestDatabase::new(name).open(),
        whitelist().commands,
        Timings::default(),
    )
}

fn create(store: &CommandStore, delivery: Delivery) -> u64 {
    match store
        .create(&new_command("d", delivery, None), "test", T0)
        .expect("create")
    {
        Created::New(command) => command.id,
        other => panic!("{other:?}"),
    }
}

fn receipt(
    node: &str,
    generation: Option<u64>,
    result: ReceiptResult,
    code: Option<u8>,
) -> Receipt {
    Receipt {
        node_id: node.into(),
        claim_generation: generation,
        result,
        result_code: code,
        raw_result_code: None,
        raw_ack: None,
        message: None,
    }
}

fn status(store: &CommandStore, id: u64) -> CommandStatus {
    store
        .get(id, Scope::All)
        .expect("read")
        .expect("command")
        .status
}

fn accepted(outcome: ReceiptOutcome) -> CommandStatus {
    match outcome {
        ReceiptOutcome::Accepted(command) => command.status,
        other => panic!("expected accepted, got {other:?}"),
    }
}

#[test]
fn the_whitelist_is_the_seeds_seven_state_machine() {
    use CommandAction as A;
    use CommandStatus as S;
    let table: HashMap<S, Vec<(A, S)>> = HashMap::from([
        (
            S::Pending,
            vec![
                (A::Claim, S::Claimed),
                (A::Cancel, S::Cancelled),
                (A::Expire, S::Timeout),
                (A::Fail, S::Failed),
            ],
        ),
        (
            S::Claimed,
            vec![
                (A::ReportSent, S::Sent),
                (A::Ack, S::Acked),
                (A::Fail, S::Failed),
                (A::Requeue, S::Pending),
                (A::Expire, S::Timeout),
                (A::Cancel, S::Cancelled),
            ],
        ),
        (
            S::Sent,
            vec![
                (A::Ack, S::Acked),
                (A::Fail, S::Failed),
                (A::Requeue, S::Pending),
                (A::Expire, S::Timeout),
                (A::Cancel, S::Cancelled),
            ],
        ),
        (S::Acked, vec![]),
        (S::Failed, vec![]),
        (S::Timeout, vec![]),
        (S::Cancelled, vec![]),
    ]);
    let whitelist = whitelist().commands;
    for from in CommandStatus::ALL {
        let row = &table[&from];
        for action in CommandAction::ALL {
            let got = whitelist.next(from, action);
            match row.iter().find(|(a, _)| *a == action) {
                Some((_, to)) => assert_eq!(got, Ok(*to), "{from} --{action}-->"),
                None => {
                    let allowed: Vec<_> = row.iter().map(|(a, _)| *a).collect();
                    assert_eq!(got, Err(allowed), "{from} --{action}--> is refused");
                }
            }
        }
    }
}

/// The size and modification time of every file of a redb state directory.
fn written(dir: &std::path::Path) -> Vec<(std::path::PathBuf, u64, std::time::SystemTime)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("state dir")
        .map(|entry| {
            let path = entry.expect("entry").path();
            let meta = std::fs::metadata(&path).expect("metadata");
            (path, meta.len(), meta.modified().expect("mtime"))
        })
        .collect();
    files.sort();
    files
}

#[test]
fn timers_and_claims_with_nothing_to_do_write_nothing() {
    let db = TestDatabase::new("idle-pass");
    let store = CommandStore::new(db.open(), whitelist().commands, Timings::default());
    let id = create(&store, Delivery::Deferrable);
    let claimed = store.claim("a", 10, None, T0).expect("claim");
    assert_eq!(claimed.iter().map(|c| c.id).collect::<Vec<_>>(), [id]);
    let done = receipt(
        "a",
        Some(claimed[0].claim_generation),
        ReceiptResult::Acked,
        Some(0),
    );
    let outcome = store.receipt(id, &done, T0).expect("receipt");
    assert_eq!(accepted(outcome), CommandStatus::Acked);
    // PostgreSQL has no file to watch; the passes below still run on it.
    let files = match &db {
        TestDatabase::Redb(dir) => Some((dir.clone(), written(dir))),
        TestDatabase::Postgres(_) => None,
    };
    for pass in 1..=3 {
        let now = T0 + pass * 500;
        let swept = store.sweep(now).expect("sweep");
        assert!(swept.expired.is_empty() && swept.reclaimed.is_empty());
        assert!(store.claim("a", 10, None, now).expect("claim").is_empty());
    }
    if let Some((dir, before)) = files {
        assert_eq!(
            written(&dir),
            before,
            "an idle pass committed to the state file"
        );
    }
    // A new command is claimed by the next pass as before.
    let next = create(&store, Delivery::Deferrable);
    let claimed = store.claim("a", 10, None, T0 + 2000).expect("claim");
    assert_eq!(claimed.iter().map(|c| c.id).collect::<Vec<_>>(), [next]);
}

#[test]
fn the_seeds_six_step_generation_example() {
    let store = store("generations");
    // 1. Created: generation 0.
    let id = create(&store, Delivery::Deferrable);
    assert_eq!(
        store
            .get(id, Scope::All)
            .expect("read")
            .expect("c")
            .claim_generation,
        0
    );
    // 2. Node A claims: generation 1.
    let claimed = store.claim("node-a", 10, None, T0).expect("claim");
    assert_eq!((claimed[0].id, claimed[0].claim_generation), (id, 1));
    assert_eq!(claimed[0].lease_expire_at, Some(T0 + 60 * SECOND));
    // 3. The 60 s lease runs out without a word: back to PENDING, still generation 1.
    assert!(
        store
            .sweep(T0 + 59 * SECOND)
            .expect("sweep")
            .reclaimed
            .is_empty()
    );
    let swept = store.sweep(T0 + 60 * SECOND).expect("sweep");
    assert_eq!(swept.reclaimed, [id]);
    let command = store.get(id, Scope::All).expect("read").expect("c");
    assert_eq!(
        (
            command.status,
            command.claim_generation,
            command.reclaim_count
        ),
        (CommandStatus::Pending, 1, 1)
    );
    // 4. Node B claims: generation 2.
    let claimed = store
        .claim("node-b", 10, None, T0 + 61 * SECOND)
        .expect("claim");
    assert_eq!(claimed[0].claim_generation, 2);
    // 5. A's late receipt (generation 1): duplicated, nothing changes.
    let late = store
        .receipt(
            id,
            &receipt("node-a", Some(1), ReceiptResult::Acked, Some(0)),
            T0 + 62 * SECOND,
        )
        .expect("receipt");
    assert_eq!(late, ReceiptOutcome::Duplicated);
    let unchanged = store.get(id, Scope::All).expect("read").expect("c");
    assert_eq!(
        (unchanged.status, unchanged.claimed_node_id.as_deref()),
        (CommandStatus::Claimed, Some("node-b"))
    );
    assert_eq!(unchanged.result, None);
    // 6. B's receipt (generation 2) applies.
    let done = store
        .receipt(
            id,
            &receipt("node-b", Some(2), ReceiptResult::Acked, Some(0)),
            T0 + 63 * SECOND,
        )
        .expect("receipt");
    assert_eq!(accepted(done), CommandStatus::Acked);
    // Once final, even the right receipt again is a duplicate.
    let again = store
        .receipt(
            id,
            &receipt("node-b", Some(2), ReceiptResult::Failed, Some(3)),
            T0 + 64 * SECOND,
        )
        .expect("receipt");
    assert_eq!(again, ReceiptOutcome::Duplicated);
    assert_eq!(status(&store, id), CommandStatus::Acked);
}

#[test]
fn receipts_need_a_generation_the_claiming_node_and_a_result_code_for_acked() {
    let store = store("guards");
    let id = create(&store, Delivery::Realtime);
    // No claim yet: no node to check a receipt against.
    let early = store
        .receipt(
            id,
            &receipt("a", Some(0), ReceiptResult::Acked, Some(0)),
            T0,
        )
        .expect("receipt");
    assert_eq!(early, ReceiptOutcome::Rejected(Rejection::NodeUnknown));
    store.claim("a", 1, None, T0).expect("claim");
    let cases = [
        (
            receipt("a", None, ReceiptResult::Acked, Some(0)),
            ReceiptOutcome::Rejected(Rejection::ClaimGenerationRequired),
        ),
        (
            receipt("b", Some(1), ReceiptResult::Acked, Some(0)),
            ReceiptOutcome::Rejected(Rejection::NodeMismatch),
        ),
        (
            receipt("a", Some(1), ReceiptResult::Acked, None),
            ReceiptOutcome::Rejected(Rejection::ResultCodeRequired),
        ),
    ];
    for (bad, expected) in cases {
        assert_eq!(store.receipt(id, &bad, T0 + 1).expect("receipt"), expected);
        assert_eq!(
            status(&store, id),
            CommandStatus::Claimed,
            "{expected:?} changes nothing"
        );
    }
    assert!(matches!(
        store.receipt(999, &receipt("a", Some(1), ReceiptResult::Sent, None), T0),
        Err(CommandError::NotFound(999))
    ));
}

#[test]
fn acked_with_a_nonzero_code_is_failed_and_raw_codes_are_kept_apart() {
    let store = store("acked-codes");
    let id = create(&store, Delivery::Realtime);
    store.claim("a", 1, None, T0).expect("claim");
    let mut refused = receipt("a", Some(1), ReceiptResult::Acked, Some(3));
    refused.raw_result_code = Some(json!("0x0055"));
    refused.raw_ack = Some(json!("d0 00 00 ff ff 03 00 02 00 55 00"));
    let command = match store.receipt(id, &refused, T0 + 1).expect("receipt") {
        ReceiptOutcome::Accepted(command) => command,
        other => panic!("{other:?}"),
    };
    assert_eq!(command.status, CommandStatus::Failed);
    assert_eq!(command.result, Some(ReceiptResult::Acked));
    assert_eq!(command.result_code, Some(3));
    assert_eq!(command.raw_result_code, Some(json!("0x0055")));
    assert_eq!(
        command.raw_ack,
        Some(json!("d0 00 00 ff ff 03 00 02 00 55 00"))
    );
    let stored = serde_json::to_string(&command).expect("json");
    assert!(
        !stored.contains("EFFECT") && !stored.contains("effective"),
        "{stored}"
    );
}

#[test]
fn deferrable_failures_requeue_with_backoff_until_the_retry_limit() {
    let store = store("retries");
    let id = create(&store, Delivery::Deferrable);
    let mut now = T0;
    for retry in 1..=10u32 {
        let claimed = store.claim("a", 1, None, now).expect("claim");
        let generation = claimed[0].claim_generation;
        let outcome = store
            .receipt(
                id,
                &receipt("a", Some(generation), ReceiptResult::DeviceOffline, None),
                now,
            )
            .expect("receipt");
        assert_eq!(accepted(outcome), CommandStatus::Pending);
        let command = store.get(id, Scope::All).expect("read").expect("c");
        assert_eq!(command.retry_count, retry);
        let backoff = (1000i64 << (retry - 1)).min(300_000);
        assert_eq!(command.next_attempt_at, now + backoff, "retry {retry}");
        // Not claimable before its backoff is over.
        assert!(
            store
                .claim("a", 1, None, now + backoff - 1)
                .expect("claim")
                .is_empty()
        );
        now += backoff;
    }
    let claimed = store.claim("a", 1, None, now).expect("claim");
    let last = store
        .receipt(
            id,
            &receipt(
                "a",
                Some(claimed[0].claim_generation),
                ReceiptResult::Timeout,
                None,
            ),
            now,
        )
        .expect("receipt");
    assert_eq!(accepted(last), CommandStatus::Timeout);

    // A realtime command fails at once; an invalid parameter fails even a deferrable one.
    let realtime = create(&store, Delivery::Realtime);
    let generation = store.claim("a", 1, None, now).expect("claim")[0].claim_generation;
    let outcome = store
        .receipt(
            realtime,
            &receipt("a", Some(generation), ReceiptResult::DeviceOffline, None),
            now,
        )
        .expect("receipt");
    assert_eq!(accepted(outcome), CommandStatus::Failed);
    let invalid = create(&store, Delivery::Deferrable);
    let generation = store.claim("a", 1, None, now).expect("claim")[0].claim_generation;
    let outcome = store
        .receipt(
            invalid,
            &receipt("a", Some(generation), ReceiptResult::Failed, Some(2)),
            now,
        )
        .expect("receipt");
    assert_eq!(accepted(outcome), CommandStatus::Failed);
}

#[test]
fn leases_reclaims_sent_timeouts_and_expiry_follow_the_clock() {
    let store = store("timers");
    let id = create(&store, Delivery::Deferrable);
    let mut now = T0;
    for round in 1..=6u32 {
        let claimed = store
            .claim(&format!("flaky-{round}"), 1, None, now)
            .expect("claim");
        assert_eq!(claimed.len(), 1);
        now += 60 * SECOND;
        let swept = store.sweep(now).expect("sweep");
        assert_eq!(swept.reclaimed, [id]);
        // The sixth reclaim is one too many: a person is to be told, once.
        assert_eq!(
            swept.too_many_reclaims.len(),
            usize::from(round == 6),
            "round {round}"
        );
    }
    let command = store.get(id, Scope::All).expect("read").expect("c");
    assert_eq!(
        (
            command.reclaim_count,
            command.claim_generation,
            command.retry_count
        ),
        (6, 6, 0)
    );
    // The engine raises that alarm in the alarm store.
    let alarms = AlarmStore::new(
        TestDatabase::new("reclaim-alarm").open(),
        whitelist().alarms,
    );
    let raised = alarms
        .raise(&reclaim_alarm(&command, now), now)
        .expect("raise");
    let Raised::Opened { alarm, .. } = raised else {
        panic!("{raised:?}")
    };
    assert_eq!(
        (
            alarm.rule_key.as_str(),
            alarm.source,
            alarm.device_id.as_str()
        ),
        (RECLAIMS_RULE, Source::Engine, "d")
    );
    assert!(alarm.message.contains("flaky-6"), "{}", alarm.message);

    // SENT without a receipt for 24 h fails.
    let generation = store.claim("quiet", 1, None, now).expect("claim")[0].claim_generation;
    let sent = store
        .receipt(
            id,
            &receipt("quiet", Some(generation), ReceiptResult::Sent, None),
            now,
        )
        .expect("receipt");
    assert_eq!(accepted(sent), CommandStatus::Sent);
    assert!(
        store
            .sweep(now + 24 * 3_600 * SECOND - 1)
            .expect("sweep")
            .unanswered
            .is_empty()
    );
    assert_eq!(
        store
            .sweep(now + 24 * 3_600 * SECOND)
            .expect("sweep")
            .unanswered,
        [id]
    );
    assert_eq!(status(&store, id), CommandStatus::Failed);

    // Anything not done 72 h after creation times out.
    let old = create(&store, Delivery::Deferrable);
    assert!(
        store
            .sweep(T0 + 72 * 3_600 * SECOND - 1)
            .expect("sweep")
            .expired
            .is_empty()
    );
    assert_eq!(
        store
            .sweep(T0 + 72 * 3_600 * SECOND)
            .expect("sweep")
            .expired,
        [old]
    );
    assert_eq!(status(&store, old), CommandStatus::Timeout);
}

#[test]
fn cancel_request_ids_and_history() {
    let store = store("cancel");
    let first = store
        .create(
            &new_command("d", Delivery::Realtime, Some("req-1")),
            "test",
            T0,
        )
        .expect("create");
    let again = store
        .create(
            &new_command("d", Delivery::Realtime, Some("req-1")),
            "test",
            T0 + 1,
        )
        .expect("create");
    assert!(matches!(first, Created::New(_)));
    assert_eq!(again, Created::Existing(Box::new(first.command().clone())));
    let id = first.command().id;
    let cancelled = store
        .cancel(id, Scope::All, "admin", "changed my mind", T0 + 2)
        .expect("cancel");
    assert_eq!(cancelled.status, CommandStatus::Cancelled);
    match store.cancel(id, Scope::All, "admin", "again", T0 + 3) {
        Err(CommandError::Refused(refused)) => {
            assert_eq!(
                (refused.state, refused.allowed),
                (CommandStatus::Cancelled, vec![])
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        store.cancel(id, Scope::Tenant(9), "t", "x", T0),
        Err(CommandError::NotFound(_))
    ));
    let history = store.history(id).expect("history");
    let steps: Vec<_> = history.iter().map(|r| (r.action, r.to)).collect();
    assert_eq!(
        steps,
        [
            (None, CommandStatus::Pending),
            (Some(CommandAction::Cancel), CommandStatus::Cancelled)
        ]
    );
    // Commands of a device that is gone are found for cancelling.
    let orphan = create(&store, Delivery::Deferrable);
    let known = std::collections::HashSet::from(["other".to_owned()]);
    assert_eq!(store.orphans(&known).expect("orphans"), [orphan]);
}

#[test]
fn a_final_command_has_its_reply_due_until_it_is_safely_out_even_across_a_reopen() {
    let db = TestDatabase::new("replies-due");
    let open = || CommandStore::new(db.open(), whitelist().commands, Timings::default());
    let due = |store: &CommandStore| -> Vec<u64> {
        let due = store.replies_due().expect("due");
        due.iter().map(|c| c.id).collect()
    };
    let store = open();
    let open_one = create(&store, Delivery::Realtime);
    let done = create(&store, Delivery::Realtime);
    assert!(due(&store).is_empty(), "nothing final yet");
    store
        .cancel(done, Scope::All, "admin", "no longer wanted", T0 + 1)
        .expect("cancel");
    assert_eq!(
        due(&store),
        [done],
        "due from the final transition's own transaction"
    );

    // A stop before the reply was out: still due after the file is opened again.
    drop(store);
    let store = open();
    assert_eq!(due(&store), [done]);
    store.replied(done).expect("replied");
    assert!(due(&store).is_empty());
    assert_eq!(status(&store, open_one), CommandStatus::Pending);
}

/// A command change whose history record cannot be written is rolled back
/// whole and counted, as the alarms' are (`auditFailures` in `/health`).
#[test]
fn a_change_that_cannot_be_recorded_is_rolled_back_and_counted() {
    use crate::support::faults::{Faults, FaultyDisk};
    use std::sync::Arc;
    let dir = crate::common::scratch("command-audit");
    let faults = Faults::healthy();
    let disk =
        sluice::store::Store::open_on(&dir, |path| FaultyDisk::open(path, Arc::clone(&faults)))
            .expect("store");
    let store = CommandStore::new(&disk, whitelist().commands, Timings::default());
    let id = create(&store, Delivery::Deferrable);
    assert_eq!(store.audit_failures(), 0);
    faults.cut_after(0);
    let cancelled = store.cancel(id, Scope::All, "test", "no longer wanted", T0 + SECOND);
    assert!(
        matches!(cancelled, Err(CommandError::Store(_))),
        "{cancelled:?}"
    );
    assert_eq!(store.audit_failures(), 1, "a rolled-back change is counted");
    drop((store, disk));
    let store = CommandStore::new(
        TestDatabase::Redb(dir.clone()).open(),
        whitelist().commands,
        Timings::default(),
    );
    let command = store
        .get(id, Scope::All)
        .expect("read")
        .expect("the command");
    assert_eq!(
        command.status,
        CommandStatus::Pending,
        "nothing of the change was kept"
    );
    assert_eq!(
        store.history(id).expect("history").len(),
        1,
        "the create only"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
