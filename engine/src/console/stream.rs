//! `GET /console/stream`: live changes for the console as server-sent events,
//! seen through the caller's token (a tenant's stream names its own devices only).
//!
//! - `values`: devices whose rounds brought samples since the last event: each
//!   tag's last value, quality, time (and unit and precision, when it has
//!   them), the round's latency, the connections and the device's last error;
//!   at most one such event every [`VALUES_EVERY`], whatever the fleet's pace.
//! - `states`: devices whose lease state changed (checked every [`STATES_EVERY`]).
//! - `alarms`: alarms changed; the page reads the list again.
//!
//! The first events carry everything known; `?device=ID` narrows `values` to one
//! device. The stream ends at shutdown.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::api::{ApiState, Caller};
use crate::clock::now_ms;
use crate::collector::Device;
use crate::lease::{EntityType, StateFilter, StateRow};
use crate::model::Scope;

/// The shortest time between two `values` events.
const VALUES_EVERY: Duration = Duration::from_millis(250);
/// How often lease states and alarms are looked at.
const STATES_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StreamQuery {
    /// Only this device's values.
    device: Option<String>,
}

#[utoipa::path(get, path = "/console/stream", tag = "console", security(("bearer" = [])),
    params(StreamQuery),
    responses((status = 200, description = "Server-sent events: `values`, `states`, `alarms`",
        content_type = "text/event-stream")))]
pub async fn stream(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Query(query): Query<StreamQuery>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let watcher = Watcher {
        shutdown: state.shutdown.clone(),
        state,
        scope,
        device: query.device,
        seen: 0,
        states: HashMap::new(),
        alarm_changes: None,
        queue: VecDeque::new(),
        last_values: None,
        next_states: Instant::now(),
    };
    let events = futures_util::stream::unfold(watcher, |mut watcher| async move {
        let event = watcher.next().await?;
        Some((Ok(event), watcher))
    });
    Sse::new(events).keep_alive(KeepAlive::default())
}

/// One console's view: what it was last told.
struct Watcher {
    state: ApiState,
    scope: Scope,
    device: Option<String>,
    /// The rounds generation the last `values` event covered.
    seen: u64,
    /// Each device's state as last sent: (state, since, last heartbeat, lease end).
    states: HashMap<String, (&'static str, Option<i64>, i64, i64)>,
    alarm_changes: Option<u64>,
    queue: VecDeque<Event>,
    last_values: Option<Instant>,
    next_states: Instant,
    shutdown: watch::Receiver<bool>,
}

impl Watcher {
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            if *self.shutdown.borrow() {
                return None;
            }
            if self.last_values.is_none() {
                // The first events: everything known now.
                self.fill().await;
                continue;
            }
            let rounds = Arc::clone(self.state.fleet.rounds_done());
            tokio::select! {
                _ = rounds.after(self.seen) => {
                    if let Some(last) = self.last_values {
                        tokio::time::sleep_until(last + VALUES_EVERY).await;
                    }
                }
                () = tokio::time::sleep_until(self.next_states) => {}
                _ = self.shutdown.changed() => return None,
            }
            self.fill().await;
        }
    }

    /// Queues the events of what changed.
    async fn fill(&mut self) {
        let generation = self.state.fleet.rounds_done().generation();
        if generation > self.seen || self.last_values.is_none() {
            let devices = self.changed_values();
            self.seen = generation;
            self.last_values = Some(Instant::now());
            if !devices.is_empty() {
                self.queue
                    .push_back(event("values", &json!({ "devices": devices })));
            }
        }
        if Instant::now() >= self.next_states {
            self.next_states = Instant::now() + STATES_EVERY;
            self.look_at_states().await;
            let changes = self.state.alarms.store().changes(self.scope);
            if self.alarm_changes.is_some_and(|seen| seen != changes) {
                self.queue
                    .push_back(event("alarms", &json!({ "changes": changes })));
            }
            self.alarm_changes = Some(changes);
        }
    }

    fn visible(&self, device: &Device) -> bool {
        self.scope.sees(device.tenant_id) && self.device.as_ref().is_none_or(|id| *id == device.id)
    }

    /// The devices of the caller with samples newer than the last event's.
    fn changed_values(&self) -> Vec<Value> {
        let roster = self.state.fleet.roster();
        roster
            .devices()
            .iter()
            .filter(|d| self.visible(d) && d.latest.generation() > self.seen)
            .map(|d| device_values(d))
            .collect()
    }

    /// Queues a `states` event with the devices whose lease state changed.
    async fn look_at_states(&mut self) {
        let leases = Arc::clone(&self.state.leases);
        let scope = self.scope;
        let rows = tokio::task::spawn_blocking(move || {
            leases.store().list(&StateFilter {
                tenant: scope.tenant(),
                entity_type: Some(EntityType::Device),
                parent: None,
            })
        })
        .await;
        let Ok(Ok(rows)) = rows else {
            // Looked at again at the next turn.
            return;
        };
        let now = now_ms();
        let mut changed = Vec::new();
        // The rows of the devices as configured now (not one a device that
        // moved to another tenant left behind).
        let roster = self.state.fleet.roster();
        let current = |row: &&StateRow| {
            roster
                .get(&row.entity_id)
                .is_some_and(|device| device.tenant_id == row.tenant_id)
        };
        for row in rows
            .iter()
            .filter(|r| self.scope.sees(r.tenant_id))
            .filter(current)
        {
            let seen = (
                row.effective_state(now).as_str(),
                self.state.leases.state_since(row, now),
                row.last_heartbeat,
                row.expire_time,
            );
            if self.states.get(&row.entity_id) != Some(&seen) {
                self.states.insert(row.entity_id.clone(), seen);
                changed.push(json!({
                    "deviceId": row.entity_id,
                    "state": seen.0,
                    "since": seen.1,
                    "lastHeartbeat": seen.2,
                    "expireTime": seen.3,
                }));
            }
        }
        if !changed.is_empty() {
            self.queue
                .push_back(event("states", &json!({ "devices": changed })));
        }
    }
}

fn event(name: &str, data: &Value) -> Event {
    Event::default().event(name).data(data.to_string())
}

/// A device's last values, round and connections.
fn device_values(device: &Device) -> Value {
    let latest = device.latest.view();
    let values: Vec<Value> = latest
        .samples
        .iter()
        .zip(device.tags.iter())
        .enumerate()
        .map(|(index, (sample, tag))| {
            let mut value = json!({
                "key": tag.key.as_str(),
                "value": sample.value.to_json(),
                "quality": sample.quality.as_str(),
                "ts": (sample.ts_ms > 0).then_some(sample.ts_ms),
            });
            if let Some(display) = device.display.get(index) {
                if let Some(unit) = &display.unit {
                    value["unit"] = json!(unit);
                }
                if let Some(precision) = display.precision {
                    value["precision"] = json!(precision);
                }
            }
            value
        })
        .collect();
    let connections: Vec<Value> = device
        .connections()
        .map(|(channel, state)| json!({ "channelId": channel, "state": state.as_str() }))
        .collect();
    let latency = device.counters.rounds.last_latency();
    json!({
        "deviceId": device.id,
        "roundAt": latest.round_at_ms,
        "latencyMs": latency.map(|l| l.as_secs_f64() * 1000.0),
        "connections": connections,
        "lastError": device.last_error(),
        "values": values,
    })
}
