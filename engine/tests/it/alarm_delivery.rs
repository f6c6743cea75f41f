//! The engine's own alarm transitions, driven with an explicit clock: delivery
//! (NEW -> PUSHED only on the broker's acknowledgement), quiet hours (NEW ->
//! DELAYED -> NEW) and escalation of confirmed alarms not handled in time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::common::{TestDatabase, whitelist};
use sluice::alarm::{
    AlarmAction, AlarmState, AlarmStore, Delivery, DeliverySettings, Notifier, QuietHours, Raise,
    Raised, Recipient, Scope, Source, TickReport,
};
use tokio::sync::oneshot;

const HOUR: i64 = 3_600_000;
/// 2026-11-30 00:00 UTC.
const DAY: i64 = 1_796_000_400_000 - HOUR;

/// A broker stand-in: acknowledges, or not, and keeps what was published.
#[derive(Debug, Default)]
struct Broker {
    down: std::sync::atomic::AtomicBool,
    published: Mutex<Vec<(String, serde_json::Value)>>,
}

impl Notifier for Broker {
    fn publish(&self, topic: &str, payload: Vec<u8>) -> oneshot::Receiver<()> {
        let (done, acked) = oneshot::channel();
        if !self.down.load(std::sync::atomic::Ordering::Relaxed) {
            let json = serde_json::from_slice(&payload).expect("JSON");
            self.published
                .lock()
                .expect("lock")
                .push((topic.to_owned(), json));
            let _ = done.send(());
        }
        acked
    }
}

impl Broker {
    fn types(&self) -> Vec<String> {
        let published = self.published.lock().expect("lock");
        published
            .iter()
            .map(|(_, m)| format!("{} {}", m["type"].as_str().unwrap_or(""), m["alarm"]["id"]))
            .collect()
    }
}

fn setup(name: &str, plan: DeliverySettings) -> (Arc<AlarmStore>, Arc<Broker>, Delivery) {
    let store = Arc::new(AlarmStore::new(
        TestDatabase::new(&format!("delivery-{name}")).open(),
        whitelist().alarms,
    ));
    let broker = Arc::new(Broker::default());
    let delivery = Delivery::new(
        Arc::clone(&store),
        Arc::clone(&broker) as Arc<dyn Notifier>,
        plan,
    );
    (store, broker, delivery)
}

fn open(store: &AlarmStore, tenant: u32, device: &str, now: i64) -> u64 {
    let raise = Raise {
        tenant_id: tenant,
        device_id: device.into(),
        rule_key: "SOS".into(),
        source: Source::Event,
        message: "SOS button pressed".into(),
        ts_ms: now,
        event_id: None,
    };
    match store.raise(&raise, now).expect("raise") {
        Raised::Opened { alarm, .. } => alarm.id,
        other => panic!("{other:?}"),
    }
}

fn state(store: &AlarmStore, id: u64) -> AlarmState {
    store
        .get(id, Scope::All)
        .expect("read")
        .expect("alarm")
        .state
}

fn plan() -> DeliverySettings {
    DeliverySettings {
        topic: "site/alarm/post".into(),
        escalate_after_ms: Some(30 * 60_000),
        recipients: HashMap::new(),
    }
}

#[tokio::test]
async fn new_alarms_become_pushed_only_once_the_broker_acknowledged_them() {
    let (store, broker, delivery) = setup("push", plan());
    let id = open(&store, 0, "d", DAY);
    broker
        .down
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let report = delivery.tick(DAY + 1000).await.expect("tick");
    assert_eq!(
        report,
        TickReport {
            unacknowledged: 1,
            ..TickReport::default()
        }
    );
    assert_eq!(state(&store, id), AlarmState::New);
    broker
        .down
        .store(false, std::sync::atomic::Ordering::Relaxed);
    let report = delivery.tick(DAY + 2000).await.expect("tick");
    assert_eq!(report.pushed, 1);
    let alarm = store.get(id, Scope::All).expect("read").expect("alarm");
    assert_eq!(
        (alarm.state, alarm.pushed_at),
        (AlarmState::Pushed, Some(DAY + 2000))
    );
    let published = broker.published.lock().expect("lock").clone();
    assert_eq!(published.len(), 1);
    assert_eq!(published[0].0, "site/alarm/post");
    assert_eq!(published[0].1["alarm"]["deviceId"], "d");
    assert_eq!(published[0].1["alarm"]["state"], "NEW");
    // Nothing is left to deliver.
    assert_eq!(
        delivery.tick(DAY + 3000).await.expect("tick"),
        TickReport::default()
    );
    let history = store.history(id).expect("history");
    assert_eq!(
        history.last().and_then(|r| r.action),
        Some(AlarmAction::Push)
    );
    assert_eq!(history.last().map(|r| r.actor.as_str()), Some("engine"));
}

#[tokio::test]
async fn alarms_wait_out_quiet_hours_as_delayed_and_are_delivered_when_they_end() {
    let night = QuietHours {
        start: 22 * 60,
        end: 7 * 60,
        utc_offset_min: 0,
    };
    let mut plan = plan();
    plan.recipients.insert(
        1,
        vec![Recipient {
            name: "warden".into(),
            quiet_hours: Some(night),
        }],
    );
    let (store, broker, delivery) = setup("quiet", plan);
    let quiet = open(&store, 1, "flat", DAY + 23 * HOUR);
    let loud = open(&store, 0, "hall", DAY + 23 * HOUR);
    let report = delivery.tick(DAY + 23 * HOUR).await.expect("tick");
    assert_eq!((report.delayed, report.pushed), (1, 1));
    assert_eq!(state(&store, quiet), AlarmState::Delayed);
    assert_eq!(state(&store, loud), AlarmState::Pushed);
    // Still night at 03:00 the next day: nothing moves, nothing is published.
    let report = delivery.tick(DAY + 27 * HOUR).await.expect("tick");
    assert_eq!(report, TickReport::default());
    assert_eq!(broker.types(), [format!("alarm {loud}")]);
    // 07:00: quiet hours are over; the alarm is woken and delivered in one tick.
    let report = delivery.tick(DAY + 31 * HOUR).await.expect("tick");
    assert_eq!((report.woken, report.pushed), (1, 1));
    assert_eq!(state(&store, quiet), AlarmState::Pushed);
    let actions: Vec<_> = store
        .history(quiet)
        .expect("history")
        .iter()
        .filter_map(|r| r.action)
        .collect();
    assert_eq!(
        actions,
        [AlarmAction::Delay, AlarmAction::Wake, AlarmAction::Push]
    );
}

#[tokio::test]
async fn confirmed_alarms_escalate_when_not_handled_in_time() {
    let (store, broker, delivery) = setup("escalate", plan());
    let slow = open(&store, 0, "a", DAY);
    let quick = open(&store, 0, "b", DAY);
    for id in [slow, quick] {
        store
            .act(
                id,
                AlarmAction::Confirm,
                Scope::All,
                "ann",
                None,
                DAY + HOUR,
            )
            .expect("confirm");
    }
    store
        .act(
            quick,
            AlarmAction::Handle,
            Scope::All,
            "ann",
            None,
            DAY + HOUR + 60_000,
        )
        .expect("handle");
    let report = delivery.tick(DAY + HOUR + 29 * 60_000).await.expect("tick");
    assert_eq!(report.escalated, 0);
    assert_eq!(state(&store, slow), AlarmState::Confirmed);
    let report = delivery.tick(DAY + HOUR + 30 * 60_000).await.expect("tick");
    assert_eq!(report.escalated, 1);
    assert_eq!(state(&store, slow), AlarmState::Escalated);
    assert_eq!(state(&store, quick), AlarmState::Handled);
    assert_eq!(broker.types(), [format!("escalation {slow}")]);
    // Confirmed again after the escalation, it escalates again only after another delay.
    store
        .act(
            slow,
            AlarmAction::Confirm,
            Scope::All,
            "bob",
            None,
            DAY + 2 * HOUR,
        )
        .expect("confirm");
    let report = delivery.tick(DAY + 2 * HOUR + 60_000).await.expect("tick");
    assert_eq!(report.escalated, 0);
}
