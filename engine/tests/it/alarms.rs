//! The alarm lifecycle against a real redb file and the real rules components:
//! every whitelist cell, the three supersede cases, the seed's five-alarm chain,
//! paired clears, concurrent triggers, restarts, crashes in the middle of a commit,
//! thresholds with hysteresis, a hostile tenant's rules, and the lease changes
//! that raise and clear the offline and fault alarms.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::common::{
    TS, TestDatabase, batch, builtin, runtime, scratch, setting, tag, test_component, whitelist,
};
use sluice::alarm::{
    AlarmAction, AlarmError, AlarmFilter, AlarmState, AlarmStore, Alarms, Applied, DeviceRules,
    EventError, RULE_FAILURE, Raise, Raised, Scope, Source, TenantRules,
};
use sluice::model::{
    ActionNotAllowed, DataType, EntityState, EntityType, SettingValue, StateRow, TimeoutSource,
    Transition, Value,
};
use sluice::runtime::{CallError, ComponentKind, Limits, RulesPool, Runtime};
use sluice::store::Store;

use crate::support::faults::{Faults, FaultyDisk};
use tokio::sync::{mpsc, watch};

const NOW: i64 = TS;

fn rules_pool(runtime: &Runtime, name: &str, bytes: &[u8], limits: Limits) -> Arc<RulesPool> {
    let component = runtime
        .load(ComponentKind::Rules, name, bytes)
        .expect("loads");
    runtime.rules_pool(&component, limits).expect("pool")
}

/// A sandbox of the built-in rules component.
fn default_rules(runtime: &Runtime) -> Arc<RulesPool> {
    rules_pool(
        runtime,
        "alarm_rules",
        &builtin("alarm_rules"),
        Limits::default(),
    )
}

struct Fixture {
    db: TestDatabase,
    runtime: Runtime,
    store: Arc<AlarmStore>,
}

fn open(db: &TestDatabase) -> Arc<AlarmStore> {
    Arc::new(AlarmStore::new(db.open(), whitelist().alarms))
}

fn fixture(name: &str) -> Fixture {
    let db = TestDatabase::new(name);
    let runtime = runtime();
    let store = open(&db);
    Fixture { db, runtime, store }
}

fn raise(device: &str, rule: &str, source: Source) -> Raise {
    Raise {
        tenant_id: 0,
        device_id: device.into(),
        rule_key: rule.into(),
        source,
        message: format!("{rule} on {device}"),
        ts_ms: NOW,
        event_id: None,
    }
}

fn opened(raised: Raised) -> (u64, Option<sluice::alarm::Alarm>) {
    match raised {
        Raised::Opened { alarm, previous } => (alarm.id, previous.map(|p| *p)),
        other => panic!("expected a new alarm, got {other:?}"),
    }
}

/// Opens an alarm for `device` and drives it into `state`; returns its id.
fn alarm_in(store: &AlarmStore, device: &str, state: AlarmState) -> u64 {
    use AlarmAction as A;
    let (id, _) = opened(
        store
            .raise(&raise(device, "R", Source::Event), NOW)
            .expect("raise"),
    );
    let path: &[AlarmAction] = match state {
        AlarmState::New => &[],
        AlarmState::Pushed => &[A::Push],
        AlarmState::Delayed => &[A::Delay],
        AlarmState::Confirmed => &[A::Confirm],
        AlarmState::Escalated => &[A::Confirm, A::Escalate],
        AlarmState::Handled => &[A::Handle],
        AlarmState::Closed => &[A::Handle, A::Close],
        AlarmState::False => &[A::False],
        AlarmState::Superseded => {
            store
                .raise(&raise(device, "R", Source::Event), NOW)
                .expect("raise again");
            &[]
        }
    };
    for action in path {
        store
            .act(id, *action, Scope::All, "test", None, NOW)
            .expect("path");
    }
    let alarm = store.get(id, Scope::All).expect("read").expect("exists");
    assert_eq!(alarm.state, state);
    id
}

/// The seed's whitelist, written out independently of the component.
fn seed_whitelist() -> HashMap<AlarmState, Vec<(AlarmAction, AlarmState)>> {
    use AlarmAction as A;
    use AlarmState as S;
    HashMap::from([
        (
            S::New,
            vec![
                (A::Push, S::Pushed),
                (A::Delay, S::Delayed),
                (A::Confirm, S::Confirmed),
                (A::Handle, S::Handled),
                (A::False, S::False),
                (A::Supersede, S::Superseded),
            ],
        ),
        (
            S::Pushed,
            vec![
                (A::Confirm, S::Confirmed),
                (A::Handle, S::Handled),
                (A::False, S::False),
                (A::Supersede, S::Superseded),
            ],
        ),
        (
            S::Delayed,
            vec![
                (A::Wake, S::New),
                (A::Confirm, S::Confirmed),
                (A::Handle, S::Handled),
                (A::Supersede, S::Superseded),
            ],
        ),
        (
            S::Confirmed,
            vec![
                (A::Handle, S::Handled),
                (A::Escalate, S::Escalated),
                (A::False, S::False),
            ],
        ),
        (
            S::Escalated,
            vec![
                (A::Confirm, S::Confirmed),
                (A::Handle, S::Handled),
                (A::False, S::False),
            ],
        ),
        (S::Handled, vec![(A::Close, S::Closed)]),
        (S::Closed, vec![]),
        (S::False, vec![]),
        (S::Superseded, vec![]),
    ])
}

#[test]
fn every_whitelist_cell_is_applied_or_refused_with_the_allowed_actions() {
    let f = fixture("whitelist");
    let table = seed_whitelist();
    let mut cells = 0;
    for from in AlarmState::ALL {
        let row = &table[&from];
        let allowed: Vec<AlarmAction> = row.iter().map(|(a, _)| *a).collect();
        for action in AlarmAction::ALL {
            cells += 1;
            let device = format!("{from}-{action}");
            let id = alarm_in(&f.store, &device, from);
            let history = f.store.history(id).expect("history").len();
            let result = f.store.act(id, action, Scope::All, "tester", None, NOW + 1);
            let now = f.store.get(id, Scope::All).expect("read").expect("exists");
            match row.iter().find(|(a, _)| *a == action) {
                Some((_, to)) => {
                    let alarm = result.unwrap_or_else(|e| panic!("{from} --{action}--> : {e}"));
                    assert_eq!(alarm.state, *to, "{from} --{action}-->");
                    assert_eq!(now.state, *to);
                    let records = f.store.history(id).expect("history");
                    let last = records.last().expect("a record");
                    assert_eq!(records.len(), history + 1);
                    assert_eq!(
                        (last.action, last.from, last.to),
                        (Some(action), Some(from), *to)
                    );
                    assert_eq!(last.actor, "tester");
                }
                None => {
                    match result {
                        Err(AlarmError::Refused(ActionNotAllowed {
                            state,
                            action: refused,
                            allowed: given,
                        })) => {
                            assert_eq!((state, refused), (from, action));
                            assert_eq!(given, allowed, "allowed actions in {from}");
                        }
                        other => panic!("{from} --{action}--> should be refused: {other:?}"),
                    }
                    assert_eq!(now.state, from, "a refused action changes nothing");
                    assert_eq!(f.store.history(id).expect("history").len(), history);
                }
            }
        }
        assert_eq!(f.store.allowed(from), allowed);
    }
    assert_eq!(cells, 81);
}

#[test]
fn a_new_trigger_supersedes_unattended_alarms_keeps_attended_ones_and_leaves_terminal_ones() {
    let f = fixture("supersede");
    for (state, expect) in [
        (AlarmState::New, AlarmState::Superseded),
        (AlarmState::Pushed, AlarmState::Superseded),
        (AlarmState::Delayed, AlarmState::Superseded),
        (AlarmState::Confirmed, AlarmState::Confirmed),
        (AlarmState::Escalated, AlarmState::Escalated),
        (AlarmState::Handled, AlarmState::Handled),
    ] {
        let device = format!("dev-{state}");
        let old = alarm_in(&f.store, &device, state);
        let (new, previous) = opened(
            f.store
                .raise(&raise(&device, "R", Source::Event), NOW + 5)
                .expect("raise"),
        );
        let previous = previous.expect("the old alarm held the key");
        let stored = f.store.get(old, Scope::All).expect("read").expect("old");
        assert_eq!(previous, stored);
        assert_eq!(stored.state, expect, "old alarm in {state}");
        assert_eq!(stored.active_key, None, "the key was released");
        let superseded = expect == AlarmState::Superseded;
        assert_eq!(stored.superseded_by, superseded.then_some(new));
        let holder = f.store.get(new, Scope::All).expect("read").expect("new");
        assert_eq!(
            holder.active_key.as_deref(),
            Some(format!("{device}:R").as_str())
        );
        assert_eq!(holder.state, AlarmState::New);
        // A superseded alarm refuses every action.
        if superseded {
            for action in AlarmAction::BY_PEOPLE {
                let refused = f.store.act(old, action, Scope::All, "p", None, NOW + 6);
                assert!(matches!(refused, Err(AlarmError::Refused(_))), "{action}");
            }
        }
    }
    for state in [AlarmState::Closed, AlarmState::False] {
        let device = format!("dev-{state}");
        let old = alarm_in(&f.store, &device, state);
        let before = f.store.get(old, Scope::All).expect("read").expect("old");
        let history = f.store.history(old).expect("history");
        let (_, previous) = opened(
            f.store
                .raise(&raise(&device, "R", Source::Event), NOW + 5)
                .expect("raise"),
        );
        assert_eq!(previous, None, "a terminal alarm holds no key");
        assert_eq!(f.store.get(old, Scope::All).expect("read"), Some(before));
        assert_eq!(f.store.history(old).expect("history"), history);
    }
}

#[test]
fn the_chain_of_the_seeds_five_alarm_example() {
    let f = fixture("chain");
    let trigger = || {
        opened(
            f.store
                .raise(&raise("door", "DOOR_OPEN", Source::Event), NOW)
                .expect("raise"),
        )
        .0
    };
    let a1 = trigger();
    let a2 = trigger();
    let a3 = trigger();
    f.store
        .act(a3, AlarmAction::Confirm, Scope::All, "p", None, NOW)
        .expect("confirm");
    f.store
        .act(a3, AlarmAction::Handle, Scope::All, "p", None, NOW)
        .expect("handle");
    let a4 = trigger();
    let a5 = trigger();
    let ids = |id: u64| {
        let chain = f
            .store
            .chain(id, Scope::All)
            .expect("chain")
            .expect("exists");
        (
            chain.alarms.iter().map(|a| a.id).collect::<Vec<_>>(),
            chain.superseded_by,
        )
    };
    assert_eq!(ids(a5), (vec![a4, a5], None));
    assert_eq!(ids(a3), (vec![a1, a2, a3], None));
    assert_eq!(ids(a1), (vec![a1], Some(a2)));
    assert_eq!(ids(a2), (vec![a2], Some(a3)));
    assert_eq!(ids(a4), (vec![a4], Some(a5)));
    let states: Vec<AlarmState> = [a1, a2, a3, a4, a5]
        .iter()
        .map(|id| {
            f.store
                .get(*id, Scope::All)
                .expect("read")
                .expect("alarm")
                .state
        })
        .collect();
    use AlarmState::{Handled, New, Superseded};
    assert_eq!(states, [Superseded, Superseded, Handled, Superseded, New]);
}

fn service(f: &Fixture, devices: &[(&str, u32, Arc<RulesPool>)]) -> Arc<Alarms> {
    let devices = devices
        .iter()
        .map(|(id, tenant, pool)| {
            let evaluator = pool.evaluator(&[], Arc::default()).expect("evaluator");
            (
                (*id).to_owned(),
                DeviceRules {
                    tenant_id: *tenant,
                    evaluator,
                },
            )
        })
        .collect();
    Alarms::new(Arc::clone(&f.store), devices, HashMap::new())
}

fn results(applied: &[Applied]) -> Vec<(String, Option<AlarmState>)> {
    applied
        .iter()
        .map(|a| match a {
            Applied::Raised(Raised::Opened { alarm, .. }) => {
                (format!("opened {}", alarm.rule_key), Some(alarm.state))
            }
            Applied::Raised(other) => (format!("{other:?}"), None),
            Applied::Cleared { rule_key, alarm } => (
                format!("cleared {rule_key}: {}", alarm.is_some()),
                alarm.as_ref().map(|a| a.state),
            ),
        })
        .collect()
}

#[tokio::test]
async fn clears_are_paired_by_type_and_never_change_the_state() {
    let f = fixture("clears");
    let pool = default_rules(&f.runtime);
    let alarms = service(&f, &[("home", 0, pool)]);
    for kind in ["SOS", "POWER_OFF", "DOOR_OPEN"] {
        alarms
            .post_event(Scope::All, "home", kind, NOW, None)
            .await
            .expect(kind);
    }
    let power_on = alarms
        .post_event(Scope::All, "home", "POWER_ON", NOW + 10, Some("evt-9"))
        .await
        .expect("POWER_ON");
    assert_eq!(
        results(&power_on),
        [
            ("cleared POWER_OFF: true".to_owned(), Some(AlarmState::New)),
            ("cleared POWER_CUT: false".to_owned(), None),
        ]
    );
    let list = f
        .store
        .list(
            &sluice::alarm::AlarmFilter {
                limit: 10,
                ..Default::default()
            },
            Scope::All,
        )
        .expect("list");
    for alarm in &list {
        assert_eq!(
            alarm.state,
            AlarmState::New,
            "a clear never changes the state"
        );
        if alarm.rule_key == "POWER_OFF" {
            assert_eq!(alarm.cleared_at, Some(NOW + 10));
            assert_eq!(alarm.clear_event_id.as_deref(), Some("evt-9"));
        } else {
            assert_eq!(
                alarm.cleared_at, None,
                "POWER_ON cleared {}",
                alarm.rule_key
            );
        }
    }
    let door = alarms
        .post_event(Scope::All, "home", "DOOR_CLOSE", NOW + 20, None)
        .await
        .expect("close");
    assert_eq!(
        results(&door),
        [("cleared DOOR_OPEN: true".to_owned(), Some(AlarmState::New))]
    );
    let leak = alarms
        .post_event(Scope::All, "home", "WATER_LEAK_CLEAR", NOW, None)
        .await
        .expect("leak");
    assert_eq!(
        results(&leak),
        [("cleared WATER_LEAK: false".to_owned(), None)]
    );
    let unknown = alarms
        .post_event(Scope::All, "home", "COFFEE", NOW, None)
        .await;
    assert!(
        matches!(unknown, Err(EventError::NoRule { .. })),
        "{unknown:?}"
    );
    let stranger = alarms
        .post_event(Scope::Tenant(4), "home", "SOS", NOW, None)
        .await;
    assert!(
        matches!(stranger, Err(EventError::UnknownDevice(_))),
        "{stranger:?}"
    );
    // A repeated event id is the same event: no second alarm.
    let first = alarms
        .post_event(Scope::All, "home", "SMOKE", NOW, Some("e-1"))
        .await
        .expect("smoke");
    let again = alarms
        .post_event(Scope::All, "home", "SMOKE", NOW, Some("e-1"))
        .await
        .expect("again");
    let Applied::Raised(Raised::Opened { alarm, .. }) = &first[0] else {
        panic!("{first:?}")
    };
    assert_eq!(again, [Applied::Raised(Raised::Duplicate(alarm.id))]);
}

#[test]
fn concurrent_triggers_for_one_key_leave_exactly_one_active_alarm() {
    let f = fixture("concurrent");
    let barrier = Arc::new(std::sync::Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let store = Arc::clone(&f.store);
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                store
                    .raise(&raise("pump", "HIGH", Source::Event), NOW)
                    .expect("raise")
            })
        })
        .collect();
    for thread in threads {
        assert!(matches!(
            thread.join().expect("thread"),
            Raised::Opened { .. }
        ));
    }
    crate::common::assert_one_active(&f.store, 8);
}

#[test]
fn alarms_their_history_and_active_keys_survive_a_restart() {
    let f = fixture("restart");
    let (id, _) = opened(
        f.store
            .raise(&raise("tank", "LEAK", Source::Event), NOW)
            .expect("raise"),
    );
    f.store
        .act(
            id,
            AlarmAction::Confirm,
            Scope::All,
            "ann",
            Some("on my way"),
            NOW + 1,
        )
        .expect("confirm");
    let Fixture { db, store, .. } = f;
    drop(store);
    let store = open(&db);
    let alarm = store.get(id, Scope::All).expect("read").expect("kept");
    assert_eq!(alarm.state, AlarmState::Confirmed);
    assert_eq!(alarm.confirmed_by.as_deref(), Some("ann"));
    let history = store.history(id).expect("history");
    assert_eq!(history.len(), 2);
    assert_eq!(history[1].note.as_deref(), Some("on my way"));
    // The key is still held: a new trigger finds the confirmed alarm and keeps it.
    let (new, previous) = opened(
        store
            .raise(&raise("tank", "LEAK", Source::Event), NOW + 2)
            .expect("raise"),
    );
    assert!(new > id);
    let previous = previous.expect("held the key");
    assert_eq!(
        (previous.id, previous.state, previous.active_key),
        (id, AlarmState::Confirmed, None)
    );
}

/// Every alarm, oldest first.
fn all_alarms(store: &AlarmStore) -> Vec<sluice::alarm::Alarm> {
    let filter = AlarmFilter {
        limit: usize::MAX,
        ..AlarmFilter::default()
    };
    let mut alarms = store.list(&filter, Scope::All).expect("list");
    alarms.reverse();
    alarms
}

#[test]
fn a_supersede_cut_off_by_a_crash_is_there_whole_or_not_at_all() {
    // A disk cut in the middle of a commit is redb's; the run on PostgreSQL
    // has nothing to add.
    if std::env::var(crate::common::POSTGRES_VAR).is_ok() {
        return;
    }
    let (mut none, mut whole) = (0, 0);
    for cut in 0..1000 {
        let dir = scratch(&format!("crash-{cut}"));
        let faults = Faults::healthy();
        let disk = Store::open_on(&dir, |path| FaultyDisk::open(path, Arc::clone(&faults)))
            .expect("store");
        let store = AlarmStore::new(&disk, whitelist().alarms);
        let (first, _) = opened(
            store
                .raise(&raise("gate", "DOOR_OPEN", Source::Event), NOW)
                .expect("raise"),
        );
        faults.cut_after(cut);
        let result = store.raise(&raise("gate", "DOOR_OPEN", Source::Event), NOW + 1);
        let crashed = faults.was_cut();
        if let Err(error) = &result {
            assert!(matches!(error, AlarmError::Store(_)), "{error}");
            assert_eq!(store.audit_failures(), 1, "a rolled-back change is counted");
        }
        drop((store, disk));
        // The restart: the file as the crash left it.
        let store = open(&TestDatabase::Redb(dir.clone()));
        let alarms = all_alarms(&store);
        let history = |id| store.history(id).expect("history");
        match alarms.as_slice() {
            [only] => {
                assert!(result.is_err(), "a supersede that said ok is kept");
                assert_eq!((only.id, only.state), (first, AlarmState::New));
                assert_eq!(only.active_key.as_deref(), Some("gate:DOOR_OPEN"));
                assert_eq!(history(first).len(), 1, "no audit record of what was lost");
                none += 1;
            }
            [old, new] => {
                assert_eq!((old.id, old.state), (first, AlarmState::Superseded));
                assert_eq!(old.superseded_by, Some(new.id));
                assert_eq!(old.active_key, None);
                assert_eq!(
                    (new.state, new.active_key.as_deref()),
                    (AlarmState::New, Some("gate:DOOR_OPEN"))
                );
                assert_eq!(history(old.id).len(), 2, "the raise and the supersede");
                assert_eq!(history(new.id).len(), 1, "the raise");
                let chain = store
                    .chain(new.id, Scope::All)
                    .expect("chain")
                    .expect("some");
                assert_eq!(chain.alarms.len(), 2, "the chain link came with it");
                whole += 1;
            }
            other => panic!("after a cut at write {cut}: {other:?}"),
        }
        let _ = std::fs::remove_dir_all(&dir);
        if !crashed {
            assert!(result.is_ok(), "no cut, no error");
            assert!(
                none > 0 && whole > 0,
                "{none} cut before, {whole} after the commit"
            );
            return;
        }
    }
    panic!("the supersede never finished without a cut");
}

#[test]
fn tenants_see_only_their_own_alarms() {
    let f = fixture("tenants");
    let mut mine = raise("a", "SOS", Source::Event);
    mine.tenant_id = 1;
    let mut theirs = raise("b", "SOS", Source::Event);
    theirs.tenant_id = 2;
    let (id1, _) = opened(f.store.raise(&mine, NOW).expect("raise"));
    let (id2, _) = opened(f.store.raise(&theirs, NOW).expect("raise"));
    assert!(f.store.get(id2, Scope::Tenant(1)).expect("read").is_none());
    assert!(
        f.store
            .chain(id2, Scope::Tenant(1))
            .expect("read")
            .is_none()
    );
    let touch = f
        .store
        .act(id2, AlarmAction::Confirm, Scope::Tenant(1), "x", None, NOW);
    assert!(matches!(touch, Err(AlarmError::NotFound(_))), "{touch:?}");
    let listed = f
        .store
        .list(
            &sluice::alarm::AlarmFilter {
                limit: 10,
                ..Default::default()
            },
            Scope::Tenant(1),
        )
        .expect("list");
    assert_eq!(listed.iter().map(|a| a.id).collect::<Vec<_>>(), [id1]);
    let stats = f.store.stats(Scope::Tenant(2), NOW - 1).expect("stats");
    assert_eq!(
        (stats.pending, stats.raised_today, stats.handled_today),
        (1, 1, 0)
    );
    f.store
        .act(id2, AlarmAction::Handle, Scope::Tenant(2), "y", None, NOW)
        .expect("handle");
    let stats = f.store.stats(Scope::All, NOW - 1).expect("stats");
    assert_eq!(
        (stats.pending, stats.raised_today, stats.handled_today),
        (1, 2, 1)
    );
    // Alarms of an earlier day are not today's.
    let stats = f.store.stats(Scope::All, NOW + 1).expect("stats");
    assert_eq!((stats.pending, stats.raised_today), (1, 0));
}

async fn wait_for<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    for _ in 0..200 {
        if let Some(value) = probe() {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what} did not happen within 2 s");
}

fn running(alarms: &Arc<Alarms>) -> watch::Sender<bool> {
    let (stop, shutdown) = watch::channel(false);
    let (_changes, lease_events) = mpsc::unbounded_channel();
    tokio::spawn(Arc::clone(alarms).run(lease_events, shutdown));
    stop
}

/// The rules are called with the samples of the tags they watch only, and not at
/// all for a round without any: the built-in rules watch the tags their
/// thresholds name, so rules without thresholds are never called on samples.
#[tokio::test]
async fn the_rules_see_the_samples_of_the_tags_they_watch_and_nothing_else() {
    let f = fixture("watched");
    let pool = default_rules(&f.runtime);
    let tags: Arc<[_]> = Arc::from(
        &[
            tag("door", "00001", DataType::Bool),
            tag("temp", "40001", DataType::Float32),
        ][..],
    );
    let none = pool.evaluator(&[], Arc::clone(&tags)).expect("evaluator");
    let settings = [
        setting("thresholds.0.tag", SettingValue::Text("temp".into())),
        setting("thresholds.0.above", SettingValue::Float(80.0)),
    ];
    let temp = pool.evaluator(&settings, tags).expect("evaluator");
    let calls = || temp.health().calls;
    let round = |door: bool, temp: f64| batch(&[Value::Bool(door), Value::Float(temp)]).samples;

    let before = calls();
    for _ in 0..3 {
        let signals = none
            .on_samples(&round(true, 99.0))
            .expect("no call to fail");
        assert!(signals.is_empty());
    }
    assert_eq!(calls(), before, "rules without thresholds are not called");
    assert!(!none.watches_any(&round(true, 99.0)));

    // Only the door's sample: nothing the thresholds watch, no call.
    let door_only = &round(true, 0.0)[..1];
    assert!(!temp.watches_any(door_only));
    assert!(temp.on_samples(door_only).expect("no call").is_empty());
    assert_eq!(calls(), before);
    assert!(temp.watches_any(&round(false, 85.0)));

    // The temperature crosses, alone (the door's sample stays behind).
    let signals = temp.on_samples(&round(false, 85.0)).expect("rules");
    assert_eq!(calls(), before + 1);
    assert_eq!(signals.len(), 1, "{signals:?}");
    assert_eq!(signals[0].rule_key, "TEMP_HIGH");
}

#[tokio::test]
async fn thresholds_raise_once_clear_with_hysteresis_and_do_not_reopen_after_a_restart() {
    let f = fixture("thresholds");
    let pool = default_rules(&f.runtime);
    let settings = [
        setting("thresholds.0.tag", SettingValue::Text("temp".into())),
        setting("thresholds.0.above", SettingValue::Float(80.0)),
        setting("thresholds.0.clearAt", SettingValue::Float(75.0)),
    ];
    let tags = [tag("temp", "40001", DataType::Float32)];
    let build = || {
        let evaluator = pool
            .evaluator(&settings, Arc::from(&tags[..]))
            .expect("evaluator");
        let devices = HashMap::from([(
            "oven".to_owned(),
            DeviceRules {
                tenant_id: 0,
                evaluator,
            },
        )]);
        Alarms::new(Arc::clone(&f.store), devices, HashMap::new())
    };
    let alarms = build();
    let _stop = running(&alarms);
    let listed = |state: Option<AlarmState>| {
        f.store
            .list(
                &sluice::alarm::AlarmFilter {
                    state,
                    limit: 10,
                    ..Default::default()
                },
                Scope::All,
            )
            .expect("list")
    };
    alarms.on_samples("oven", 0, &batch(&[Value::Float(85.0)]).samples);
    let first = wait_for("the raise", || listed(None).first().cloned()).await;
    assert_eq!(
        (first.rule_key.as_str(), first.source),
        ("TEMP_HIGH", Source::Rule)
    );
    alarms.on_samples("oven", 0, &batch(&[Value::Float(90.0)]).samples);
    // The engine restarts: the rules' memory is gone, the alarm is not.
    let restarted = build();
    let _stop2 = running(&restarted);
    restarted.on_samples("oven", 0, &batch(&[Value::Float(88.0)]).samples);
    restarted.on_samples("oven", 0, &batch(&[Value::Float(76.0)]).samples);
    restarted.on_samples("oven", 0, &batch(&[Value::Float(74.0)]).samples);
    let cleared = wait_for("the clear", || {
        f.store
            .get(first.id, Scope::All)
            .expect("read")
            .filter(|a| a.cleared_at.is_some())
    })
    .await;
    assert_eq!(cleared.state, AlarmState::New);
    assert_eq!(
        listed(None).len(),
        1,
        "still high after the restart is the same alarm"
    );
    restarted.on_samples("oven", 0, &batch(&[Value::Float(81.0)]).samples);
    let second = wait_for("the second raise", || {
        listed(Some(AlarmState::New))
            .first()
            .cloned()
            .filter(|a| a.id != first.id)
    })
    .await;
    let old = f
        .store
        .get(first.id, Scope::All)
        .expect("read")
        .expect("first");
    assert_eq!(
        (old.state, old.superseded_by),
        (AlarmState::Superseded, Some(second.id))
    );
}

#[tokio::test]
async fn a_hostile_tenant_rule_fails_only_for_its_tenant_and_raises_a_rule_failure() {
    let f = fixture("hostile");
    let small = Limits {
        memory_bytes: 4 << 20,
        fuel_per_call: 2_000_000,
        instances: 1,
        ..Limits::DEFAULT
    };
    let hostile = rules_pool(
        &f.runtime,
        "hostile_rules",
        &test_component("hostile_rules"),
        small,
    );
    let good = default_rules(&f.runtime);
    let mut devices = HashMap::new();
    for mode in ["loop", "memory", "trap"] {
        let evaluator = hostile
            .evaluator(
                &[setting("mode", SettingValue::Text(mode.into()))],
                Arc::default(),
            )
            .expect("evaluator");
        devices.insert(
            format!("bad-{mode}"),
            DeviceRules {
                tenant_id: 1,
                evaluator,
            },
        );
    }
    let evaluator = good.evaluator(&[], Arc::default()).expect("evaluator");
    devices.insert(
        "fine".to_owned(),
        DeviceRules {
            tenant_id: 2,
            evaluator,
        },
    );
    let alarms = Alarms::new(Arc::clone(&f.store), devices, HashMap::new());
    let _stop = running(&alarms);
    for mode in ["loop", "memory", "trap"] {
        let device = format!("bad-{mode}");
        let failed = alarms
            .post_event(Scope::All, &device, "BOOM", NOW, None)
            .await;
        match failed {
            Err(EventError::Rules(CallError::LimitExceeded { .. } | CallError::Trap { .. })) => {}
            other => panic!("{mode}: {other:?}"),
        }
        let opened = alarms
            .post_event(Scope::All, "fine", "DOOR_OPEN", NOW, None)
            .await
            .expect("tenant 2 carries on");
        assert!(matches!(opened[0], Applied::Raised(_)));
        // The failing tenant's own rules work again on the next call.
        let after = alarms
            .post_event(Scope::All, &device, "PING", NOW, None)
            .await
            .expect("rebuilt");
        assert!(matches!(after[0], Applied::Raised(Raised::Opened { .. })));
    }
    assert_eq!(
        alarms.rule_failures(),
        std::collections::BTreeMap::from([(1, 3)])
    );
    let failures = wait_for("three RULE_FAILURE alarms, cleared", || {
        let list = f
            .store
            .list(
                &sluice::alarm::AlarmFilter {
                    rule_key: Some(RULE_FAILURE.into()),
                    limit: 10,
                    ..Default::default()
                },
                Scope::Tenant(1),
            )
            .expect("list");
        (list.len() == 3 && list.iter().all(|a| a.cleared_at.is_some())).then_some(list)
    })
    .await;
    assert!(
        failures
            .iter()
            .all(|a| a.source == Source::Engine && a.tenant_id == 1)
    );
    let tenant2 = f
        .store
        .list(
            &sluice::alarm::AlarmFilter {
                limit: 10,
                ..Default::default()
            },
            Scope::Tenant(2),
        )
        .expect("list");
    assert!(
        tenant2.iter().all(|a| a.rule_key == "DOOR_OPEN"),
        "{tenant2:?}"
    );
}

/// A lease change of `entity` (tenant 0) from `from` to `to`.
fn change(entity_type: EntityType, id: &str, from: EntityState, to: EntityState) -> Transition {
    Transition {
        row: StateRow {
            entity_type,
            entity_id: id.into(),
            parent_id: String::new(),
            state: to,
            last_state: from,
            last_heartbeat: NOW,
            expire_time: NOW + 30_000,
            lease_version: 1,
            timeout_seconds: 30,
            timeout_source: TimeoutSource::System,
            extension: serde_json::json!({}),
            tenant_id: 0,
            expired_state: EntityState::Offline,
        },
        from,
    }
}

/// Seed 000's fault alarms: a device or driver in fault raises one, and its
/// return online clears it with the offline one; maintenance does neither.
#[tokio::test]
async fn faults_raise_alarms_that_the_return_online_clears() {
    use EntityState::{Fault, Maintain, Offline, Online};
    let f = fixture("faults");
    let rules = default_rules(&f.runtime);
    let drivers = Arc::new(rules.evaluator(&[], Arc::default()).expect("evaluator"));
    let devices = [("pump", 0, Arc::clone(&rules))]
        .iter()
        .map(|(id, tenant, pool)| {
            let evaluator = pool.evaluator(&[], Arc::default()).expect("evaluator");
            let rules = DeviceRules {
                tenant_id: *tenant,
                evaluator,
            };
            ((*id).to_owned(), rules)
        })
        .collect();
    let tenants = HashMap::from([(
        0,
        TenantRules {
            pool: rules,
            drivers: Some(drivers),
        },
    )]);
    let alarms = Alarms::new(Arc::clone(&f.store), devices, tenants);
    let (changes, lease_changes) = mpsc::unbounded_channel();
    let (stop, shutdown) = watch::channel(false);
    let running = tokio::spawn(Arc::clone(&alarms).run(lease_changes, shutdown));
    let open_and_cleared = |rule: &str| {
        let found: Vec<_> = all_alarms(&f.store)
            .into_iter()
            .filter(|a| a.rule_key == rule)
            .collect();
        (
            found.len(),
            found.iter().filter(|a| a.cleared_at.is_some()).count(),
        )
    };
    let until = async |rule: &str, wanted: (usize, usize)| {
        for _ in 0..200 {
            if open_and_cleared(rule) == wanted {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{rule}: {:?}, not {wanted:?}", open_and_cleared(rule));
    };
    for (entity_type, id, key) in [
        (EntityType::Device, "pump", "DEVICE"),
        (EntityType::Driver, "modbus_tcp", "DRIVER"),
    ] {
        let fault = format!("{key}_FAULT");
        let offline = format!("{key}_OFFLINE");
        let send = |from, to| {
            changes
                .send(change(entity_type, id, from, to))
                .expect("sent")
        };
        send(Online, Fault);
        until(&fault, (1, 0)).await;
        // Maintenance neither raises nor clears; offline raises its own.
        send(Fault, Maintain);
        send(Maintain, Offline);
        until(&offline, (1, 0)).await;
        assert_eq!(open_and_cleared(&fault), (1, 0));
        send(Offline, Online);
        until(&fault, (1, 1)).await;
        until(&offline, (1, 1)).await;
        let raised = all_alarms(&f.store);
        let pair = raised
            .iter()
            .find(|a| a.rule_key == fault)
            .expect("the fault");
        assert_eq!((pair.device_id.as_str(), pair.source), (id, Source::Lease));
    }
    stop.send(true).expect("stop");
    running.await.expect("the service stops");
}
