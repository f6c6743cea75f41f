//! The alarm API. Every route needs a bearer token; a tenant's token sees only its
//! own alarms (another tenant's alarm is 404, as if it did not exist).
//!
//! - `GET /alarms?state=&pending=&tenantId=&deviceId=&ruleKey=&since=&until=&limit=`
//! - `GET /alarms/stats`: pending count and today's handling rate
//! - `GET /alarms/{id}`: the alarm, its history and what the caller may do now
//! - `GET /alarms/{id}/actions`, `GET /alarms/{id}/chain`
//! - `POST /alarms/{id}/{confirm|handle|close|false}` with `{"by"?, "note"?}`
//! - `POST /events` with `{deviceId, type, ts?, eventId?}`: a device event

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Caller;
use super::reply::{Reply, error};
use super::state::ApiState;
use crate::alarm::{
    AlarmAction, AlarmError, AlarmFilter, AlarmState, AlarmStore, Applied, EventError, Raised,
    Scope,
};
use crate::clock::now_ms;

const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1000;
const DAY_MS: i64 = 86_400_000;

fn ok(value: Value) -> Reply {
    (StatusCode::OK, Json(value))
}

/// Runs a store call off the async workers.
async fn blocking<R: Send + 'static>(
    store: &Arc<AlarmStore>,
    call: impl FnOnce(&AlarmStore) -> Result<R, AlarmError> + Send + 'static,
) -> Result<R, Reply> {
    let store = Arc::clone(store);
    match tokio::task::spawn_blocking(move || call(&store)).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(alarm_error(&e)),
        Err(e) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
    }
}

fn alarm_error(e: &AlarmError) -> Reply {
    match e {
        AlarmError::NotFound(_) => error(StatusCode::NOT_FOUND, e.to_string()),
        AlarmError::Refused(refused) => {
            let allowed: Vec<&str> = by_people(&refused.allowed);
            (
                StatusCode::BAD_REQUEST,
                Json(json!({ "error": e.to_string(), "state": refused.state, "allowed": allowed })),
            )
        }
        _ => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// The actions a person may request among `allowed`.
fn by_people(allowed: &[AlarmAction]) -> Vec<&'static str> {
    allowed
        .iter()
        .filter(|a| a.by_people())
        .map(|a| a.as_str())
        .collect()
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListQuery {
    state: Option<String>,
    pending: Option<bool>,
    tenant_id: Option<u32>,
    device_id: Option<String>,
    rule_key: Option<String>,
    since: Option<i64>,
    until: Option<i64>,
    limit: Option<usize>,
}

pub async fn list(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Query(query): Query<ListQuery>,
) -> Reply {
    let wanted = match query.state.as_deref().map(|s| (s, AlarmState::parse(s))) {
        None => None,
        Some((_, Some(s))) => Some(s),
        Some((given, None)) => {
            let names: Vec<&str> = AlarmState::ALL.iter().map(|s| s.as_str()).collect();
            return error(
                StatusCode::BAD_REQUEST,
                format!("unknown state `{given}`; one of {}", names.join(", ")),
            );
        }
    };
    let filter = AlarmFilter {
        state: wanted,
        pending: query.pending,
        tenant_id: query.tenant_id,
        device_id: query.device_id,
        rule_key: query.rule_key,
        since: query.since,
        until: query.until,
        limit: query.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT),
    };
    match blocking(state.alarms.store(), move |s| s.list(&filter, scope)).await {
        Ok(alarms) => ok(json!({ "alarms": alarms })),
        Err(reply) => reply,
    }
}

/// Start of the local day holding `now`, for a gateway `offset_min` east of UTC.
fn day_start(now: i64, offset_min: i16) -> i64 {
    let offset = i64::from(offset_min) * 60_000;
    let local = now + offset;
    local - local.rem_euclid(DAY_MS) - offset
}

pub async fn stats(State(state): State<ApiState>, Caller(scope): Caller) -> Reply {
    let since = day_start(now_ms(), state.utc_offset_min);
    match blocking(state.alarms.store(), move |s| s.stats(scope, since)).await {
        Ok(stats) => {
            let rate = (stats.raised_today > 0)
                .then(|| stats.handled_today as f64 / stats.raised_today as f64);
            ok(json!({
                "pending": stats.pending,
                "today": {
                    "since": since,
                    "raised": stats.raised_today,
                    "handled": stats.handled_today,
                    "handlingRate": rate,
                },
            }))
        }
        Err(reply) => reply,
    }
}

/// What the caller may do to the alarm now, and why not for a superseded one.
fn actions_view(
    store: &AlarmStore,
    id: u64,
    alarm_state: AlarmState,
    superseded_by: Option<u64>,
) -> Result<Value, AlarmError> {
    let allowed = store.allowed(alarm_state);
    let mut view = json!({
        "id": id,
        "state": alarm_state,
        "actions": by_people(allowed),
    });
    if let Some(newer) = superseded_by.filter(|_| alarm_state == AlarmState::Superseded) {
        view["note"] = json!(format!(
            "superseded by alarm {newer}: it cannot be handled on its own; act on alarm {newer}"
        ));
    }
    Ok(view)
}

pub async fn get(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<u64>,
) -> Reply {
    let found = blocking(state.alarms.store(), move |s| {
        let Some(alarm) = s.get(id, scope)? else {
            return Err(AlarmError::NotFound(id));
        };
        let history = s.history(id)?;
        let actions = actions_view(s, id, alarm.state, alarm.superseded_by)?;
        Ok((alarm, history, actions))
    })
    .await;
    match found {
        Ok((alarm, history, actions)) => {
            let mut view = json!(alarm);
            view["history"] = json!(history);
            view["actions"] = actions["actions"].clone();
            if let Some(note) = actions.get("note") {
                view["note"] = note.clone();
            }
            ok(view)
        }
        Err(reply) => reply,
    }
}

pub async fn actions(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<u64>,
) -> Reply {
    let view = blocking(state.alarms.store(), move |s| {
        let alarm = s.get(id, scope)?.ok_or(AlarmError::NotFound(id))?;
        actions_view(s, id, alarm.state, alarm.superseded_by)
    })
    .await;
    view.map_or_else(|reply| reply, ok)
}

pub async fn chain(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<u64>,
) -> Reply {
    match blocking(state.alarms.store(), move |s| s.chain(id, scope)).await {
        Ok(Some(chain)) => {
            let mut view = json!({ "id": id, "alarms": chain.alarms });
            if let Some(newer) = chain.superseded_by {
                view["supersededBy"] = json!(newer);
                view["note"] = json!(format!(
                    "superseded by alarm {newer}: it cannot be handled on its own"
                ));
            }
            ok(view)
        }
        Ok(None) => error(StatusCode::NOT_FOUND, format!("no alarm {id}")),
        Err(reply) => reply,
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActBody {
    by: Option<String>,
    note: Option<String>,
}

pub async fn act(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path((id, action)): Path<(u64, String)>,
    body: axum::body::Bytes,
) -> Reply {
    let Some(action) = AlarmAction::parse(&action).filter(|a| a.by_people()) else {
        let names: Vec<&str> = AlarmAction::BY_PEOPLE.iter().map(|a| a.as_str()).collect();
        return error(
            StatusCode::BAD_REQUEST,
            format!("unknown action `{action}`; one of {}", names.join(", ")),
        );
    };
    // The body is optional: no body (whatever the content type) means no details.
    let body: ActBody = if body.iter().all(u8::is_ascii_whitespace) {
        ActBody::default()
    } else {
        match serde_json::from_slice(&body) {
            Ok(body) => body,
            Err(e) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("the body must be {{\"by\"?: string, \"note\"?: string}}: {e}"),
                );
            }
        }
    };
    let who = match scope {
        Scope::All => "admin".to_owned(),
        Scope::Tenant(tenant) => format!("tenant:{tenant}"),
    };
    let actor = match body.by.filter(|b| !b.trim().is_empty()) {
        Some(by) => format!("{who}/{by}"),
        None => who,
    };
    let note = body.note;
    let result = blocking(state.alarms.store(), move |s| {
        s.act(id, action, scope, &actor, note.as_deref(), now_ms())
    })
    .await;
    match result {
        Ok(alarm) => ok(json!(alarm)),
        Err(reply) => reply,
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventBody {
    device_id: String,
    #[serde(rename = "type")]
    kind: String,
    ts: Option<i64>,
    event_id: Option<String>,
}

pub async fn post_event(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Json(body): Json<EventBody>,
) -> Reply {
    let ts = body.ts.unwrap_or_else(now_ms);
    let applied = state
        .alarms
        .post_event(
            scope,
            &body.device_id,
            &body.kind,
            ts,
            body.event_id.as_deref(),
        )
        .await;
    match applied {
        Ok(applied) => ok(json!({
            "deviceId": body.device_id,
            "type": body.kind,
            "results": applied.iter().map(applied_view).collect::<Vec<_>>(),
        })),
        Err(EventError::UnknownDevice(device)) => {
            error(StatusCode::NOT_FOUND, format!("no device `{device}`"))
        }
        Err(e @ EventError::NoRule { .. }) => {
            error(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
        }
        Err(EventError::Store(e)) => alarm_error(&e),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

fn applied_view(applied: &Applied) -> Value {
    match applied {
        Applied::Raised(Raised::Opened { alarm, previous }) => json!({
            "result": "opened",
            "ruleKey": alarm.rule_key,
            "alarm": alarm,
            "previous": previous.as_ref().map(|p| json!({ "id": p.id, "state": p.state })),
        }),
        Applied::Raised(Raised::Duplicate(id)) => json!({ "result": "duplicate", "alarmId": id }),
        Applied::Raised(Raised::Ongoing(id)) => json!({ "result": "ongoing", "alarmId": id }),
        Applied::Cleared { rule_key, alarm } => match alarm {
            Some(alarm) => json!({ "result": "cleared", "ruleKey": rule_key, "alarm": alarm }),
            None => json!({ "result": "nothing to clear", "ruleKey": rule_key }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_day_starts_at_local_midnight() {
        let hour = 3_600_000;
        // 2026-11-30 01:00 UTC is 09:00 at UTC+8; that day began 16:00 UTC the day before.
        let now = 1_796_000_400_000;
        assert_eq!(now % DAY_MS, hour);
        assert_eq!(day_start(now, 0), now - hour);
        assert_eq!(day_start(now, 480), now - hour - 8 * hour);
        assert_eq!(day_start(now, -300), now - hour - 19 * hour);
    }
}
