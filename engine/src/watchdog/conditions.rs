//! The alarms the engine keeps open while a condition lasts, each cleared when
//! it ends (a person still closes it): `COMPONENT_QUARANTINED` on a tenant
//! while one of its component pools is quarantined (its calls failed too many
//! times in a row), `CONNECTION_FAILED` on a device while a connection of its
//! reached FAILED (seed 003 §3.1: too many attempts in a row; reconnects go on
//! at the capped delay) and has not connected since, `PROTOCOL_ERROR` on a
//! device that answered and refused a request (an exception, an end code) in
//! ten rounds in a row, until a round without a refusal. Looked at every 2 s; at a
//! start the alarms an earlier run left open are taken over, so one whose
//! condition ended meanwhile is cleared.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::pools::pools;
use crate::alarm::{AlarmFilter, AlarmStore, Alarms, Raise, Scope, Source};
use crate::clock::now_ms;
use crate::collector::Fleet;

/// The rule key of the alarm of a quarantined pool.
pub const QUARANTINE_RULE: &str = "COMPONENT_QUARANTINED";
/// The rule key of the alarm of a device whose connection failed.
pub const CONNECTION_RULE: &str = "CONNECTION_FAILED";
/// The rule key of the alarm of a device that keeps refusing requests.
pub const PROTOCOL_RULE: &str = "PROTOCOL_ERROR";
/// Rounds in a row with a refused request that make a protocol error alarmed.
const REFUSING_ROUNDS: u32 = 10;
/// How often the conditions are looked at.
const WATCH_EVERY: Duration = Duration::from_secs(2);

/// One condition an alarm is open for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Condition {
    tenant: u32,
    /// The device the alarm is kept on (for a component, a name for it).
    subject: String,
    rule_key: &'static str,
}

/// Where the alarm of a tenant's quarantined component is kept.
fn component_subject(tenant: u32, component: &str) -> String {
    format!("{component}@tenant-{tenant}")
}

/// The conditions that hold now, each with its alarm's message.
fn conditions(fleet: &Fleet, alarms: &Alarms) -> HashMap<Condition, String> {
    let mut now = HashMap::new();
    let roster = fleet.roster();
    let devices = roster.devices();
    for pool in pools(devices, alarms) {
        if pool.health.quarantined {
            let component = pool.health.component;
            let condition = Condition {
                tenant: pool.tenant,
                subject: component_subject(pool.tenant, &component),
                rule_key: QUARANTINE_RULE,
            };
            let message = format!("component `{component}` failed too often and is quarantined");
            now.insert(condition, message);
        }
    }
    for device in devices {
        let refusing = device.refusing_rounds();
        if refusing >= REFUSING_ROUNDS {
            let condition = Condition {
                tenant: device.tenant_id,
                subject: device.id.clone(),
                rule_key: PROTOCOL_RULE,
            };
            let message = format!(
                "the device refused requests in {refusing} rounds in a row: {}",
                device.last_error().unwrap_or_default()
            );
            now.insert(condition, message);
        }
        for channel in device.channels.iter().filter(|c| c.link.failing()) {
            let condition = Condition {
                tenant: device.tenant_id,
                subject: device.id.clone(),
                rule_key: CONNECTION_RULE,
            };
            now.entry(condition).or_insert_with(|| {
                format!(
                    "channel {}: no connection after repeated attempts; still trying ({})",
                    channel.id,
                    device.last_error().unwrap_or_default()
                )
            });
        }
    }
    now
}

/// The alarms of these conditions an earlier run left open and not cleared.
fn left_open(store: &AlarmStore) -> HashSet<Condition> {
    let mut open = HashSet::new();
    for rule_key in [QUARANTINE_RULE, CONNECTION_RULE, PROTOCOL_RULE] {
        let filter = AlarmFilter {
            rule_key: Some(rule_key.to_owned()),
            limit: usize::MAX,
            ..AlarmFilter::default()
        };
        match store.list(&filter, Scope::All) {
            Ok(alarms) => open.extend(
                alarms
                    .into_iter()
                    .filter(|a| {
                        a.source == Source::Engine
                            && a.active_key.is_some()
                            && a.cleared_at.is_none()
                    })
                    .map(|a| Condition {
                        tenant: a.tenant_id,
                        subject: a.device_id,
                        rule_key,
                    }),
            ),
            Err(error) => tracing::error!(%error, rule_key, "cannot read the open alarms"),
        }
    }
    open
}

/// Raises `raise` and clears `clear`; returns the conditions whose alarm could
/// not be changed (tried again at the next look).
fn apply(
    store: &AlarmStore,
    raise: Vec<(Condition, String)>,
    clear: Vec<Condition>,
) -> HashSet<Condition> {
    let at = now_ms();
    let mut failed = HashSet::new();
    for (condition, message) in raise {
        let alarm = Raise {
            tenant_id: condition.tenant,
            device_id: condition.subject.clone(),
            rule_key: condition.rule_key.to_owned(),
            source: Source::Engine,
            message,
            ts_ms: at,
            event_id: None,
        };
        if let Err(error) = store.raise(&alarm, at) {
            tracing::error!(%error, subject = %condition.subject, rule = condition.rule_key, "cannot raise an alarm");
            failed.insert(condition);
        }
    }
    for condition in clear {
        if let Err(error) = store.clear(&condition.subject, condition.rule_key, at, None, at) {
            tracing::error!(%error, subject = %condition.subject, rule = condition.rule_key, "cannot clear an alarm");
            failed.insert(condition);
        }
    }
    failed
}

/// Raises and clears the alarms of these conditions until `shutdown`.
pub async fn watch(fleet: Arc<Fleet>, alarms: Arc<Alarms>, mut shutdown: watch::Receiver<bool>) {
    let store = Arc::clone(alarms.store());
    let mut open = tokio::task::spawn_blocking(move || left_open(&store))
        .await
        .unwrap_or_default();
    let mut timer = tokio::time::interval(WATCH_EVERY);
    while crate::clock::next_tick(&mut timer, &mut shutdown).await {
        let now = conditions(&fleet, &alarms);
        let raise: Vec<(Condition, String)> = now
            .iter()
            .filter(|(condition, _)| !open.contains(*condition))
            .map(|(condition, message)| (condition.clone(), message.clone()))
            .collect();
        let clear: Vec<Condition> = open
            .iter()
            .filter(|condition| !now.contains_key(*condition))
            .cloned()
            .collect();
        if raise.is_empty() && clear.is_empty() {
            continue;
        }
        let store = Arc::clone(alarms.store());
        let (raising, clearing) = (raise.clone(), clear.clone());
        let Ok(failed) =
            tokio::task::spawn_blocking(move || apply(&store, raising, clearing)).await
        else {
            continue;
        };
        for (condition, _) in raise {
            if !failed.contains(&condition) {
                open.insert(condition);
            }
        }
        for condition in clear {
            if !failed.contains(&condition) {
                open.remove(&condition);
            }
        }
    }
}
