//! The alarm API. Every route needs a bearer token; a tenant's token sees only its
//! own alarms (another tenant's alarm is 404, as if it did not exist).
//!
//! - `GET /alarms?state=&pending=&tenantId=&deviceId=&ruleKey=&since=&until=&limit=`
//! - `GET /alarms/stats`: pending count and today's handling rate
//! - `GET /alarms/{id}`: the alarm, its history and what the caller may do now
//! - `GET /alarms/{id}/actions`, `GET /alarms/{id}/chain`
//! - `POST /alarms/{id}/{confirm|ack|handle|close|false}` with `{"by"?, "note"?}`
//!   (`ack` is `confirm` by the seed's other name)
//! - `POST /events` with `{deviceId, type, ts?, eventId?}`: a device event

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::Caller;
use super::body::JsonBody;
use super::reply::{ApiReply, ErrorBody, RequestRefused, error, json, ok};
use super::state::ApiState;
use crate::alarm::{
    ActionRecord, Alarm, AlarmAction, AlarmError, AlarmFilter, AlarmState, AlarmStore, Applied,
    EventError, Raised, Scope,
};
use crate::clock::now_ms;
use crate::mqtt::limits::{
    MAX_NAME, MAX_REPLY_MESSAGE, MAX_REQUEST_ID, MAX_TEXT, check_length, clip,
};

const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1000;
const DAY_MS: i64 = 86_400_000;

/// An action the alarm's state does not allow.
#[derive(Debug, Serialize, ToSchema)]
pub struct AlarmRefusal {
    error: String,
    /// The alarm's state.
    state: AlarmState,
    /// The actions a person may take in that state.
    allowed: Vec<&'static str>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AlarmList {
    /// Newest first.
    alarms: Vec<Alarm>,
}

/// The pending alarms and today's handling rate (the gateway's local day).
#[derive(Debug, Serialize, ToSchema)]
pub struct AlarmStatsView {
    pending: u64,
    today: Today,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct Today {
    /// When the day began, ms since the Unix epoch.
    since: i64,
    raised: u64,
    handled: u64,
    /// `handled / raised`; none when nothing was raised.
    handling_rate: Option<f64>,
}

/// What a person may do with an alarm now: the console's buttons.
#[derive(Debug, Serialize, ToSchema)]
pub struct AlarmActions {
    id: u64,
    state: AlarmState,
    actions: Vec<&'static str>,
    /// Why nothing may be done, for a superseded alarm.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// An alarm with its history and the actions it allows.
#[derive(Debug, Serialize, ToSchema)]
pub struct AlarmView {
    #[serde(flatten)]
    alarm: Alarm,
    /// Every change, oldest first, with who made it.
    history: Vec<ActionRecord>,
    actions: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// The alarms of one condition, one superseding the other, oldest first.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChainView {
    id: u64,
    alarms: Vec<Alarm>,
    #[serde(skip_serializing_if = "Option::is_none")]
    superseded_by: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// Runs a store call off the async workers.
async fn blocking<R: Send + 'static>(
    store: &Arc<AlarmStore>,
    call: impl FnOnce(&AlarmStore) -> Result<R, AlarmError> + Send + 'static,
) -> Result<R, RequestRefused> {
    let store = Arc::clone(store);
    match tokio::task::spawn_blocking(move || call(&store)).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(alarm_error(&e).into()),
        Err(e) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into()),
    }
}

fn alarm_error(e: &AlarmError) -> ApiReply {
    match e {
        AlarmError::NotFound(_) => error(StatusCode::NOT_FOUND, e.to_string()),
        AlarmError::Refused(refused) => json(
            StatusCode::BAD_REQUEST,
            AlarmRefusal {
                error: e.to_string(),
                state: refused.state,
                allowed: by_people(&refused.allowed),
            },
        ),
        _ => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// The actions a person may request among `allowed`.
/// Another name of `confirm`: "acknowledged", as the seed's table says it.
const ACK: &str = "ack";

fn by_people(allowed: &[AlarmAction]) -> Vec<&'static str> {
    allowed
        .iter()
        .filter(|a| a.by_people())
        .map(|a| a.as_str())
        .collect()
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only in this state (`NEW`, `PUSHED`, ...).
    state: Option<String>,
    /// Only those waiting for a person (or only those not).
    pending: Option<bool>,
    tenant_id: Option<u32>,
    device_id: Option<String>,
    rule_key: Option<String>,
    /// Raised at or after, ms since the Unix epoch.
    since: Option<i64>,
    /// Raised before, ms since the Unix epoch.
    until: Option<i64>,
    /// At most this many (default 100, at most 1000).
    limit: Option<usize>,
}

#[utoipa::path(get, path = "/alarms", tag = "alarms", security(("bearer" = [])),
    params(ListQuery),
    responses(
        (status = 200, body = AlarmList),
        (status = 400, description = "An unknown state or parameter", body = ErrorBody)))]
pub async fn list(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Query(query): Query<ListQuery>,
) -> ApiReply {
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
        Ok(alarms) => ok(AlarmList { alarms }),
        Err(refused) => refused.into_response(),
    }
}

/// Start of the local day holding `now`, for a gateway `offset_min` east of UTC.
fn day_start(now: i64, offset_min: i16) -> i64 {
    let offset = i64::from(offset_min) * 60_000;
    let local = now + offset;
    local - local.rem_euclid(DAY_MS) - offset
}

#[utoipa::path(get, path = "/alarms/stats", tag = "alarms", security(("bearer" = [])),
    responses((status = 200, body = AlarmStatsView)))]
pub async fn stats(State(state): State<ApiState>, Caller(scope): Caller) -> ApiReply {
    let since = day_start(now_ms(), state.utc_offset_min);
    match blocking(state.alarms.store(), move |s| s.stats(scope, since)).await {
        Ok(stats) => {
            let rate = (stats.raised_today > 0)
                .then(|| stats.handled_today as f64 / stats.raised_today as f64);
            ok(AlarmStatsView {
                pending: stats.pending,
                today: Today {
                    since,
                    raised: stats.raised_today,
                    handled: stats.handled_today,
                    handling_rate: rate,
                },
            })
        }
        Err(refused) => refused.into_response(),
    }
}

/// What the caller may do to the alarm now, and why not for a superseded one.
fn actions_view(store: &AlarmStore, alarm: &Alarm) -> AlarmActions {
    let note = alarm
        .superseded_by
        .filter(|_| alarm.state == AlarmState::Superseded)
        .map(|newer| {
            format!(
                "superseded by alarm {newer}: it cannot be handled on its own; act on alarm {newer}"
            )
        });
    AlarmActions {
        id: alarm.id,
        state: alarm.state,
        actions: by_people(store.allowed(alarm.state)),
        note,
    }
}

#[utoipa::path(get, path = "/alarms/{id}", tag = "alarms", security(("bearer" = [])),
    params(("id" = u64, Path, description = "Alarm id")),
    responses(
        (status = 200, body = AlarmView),
        (status = 404, description = "No such alarm (for the caller)", body = ErrorBody)))]
pub async fn get(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<u64>,
) -> ApiReply {
    let found = blocking(state.alarms.store(), move |s| {
        let Some(alarm) = s.get(id, scope)? else {
            return Err(AlarmError::NotFound(id));
        };
        let history = s.history(id)?;
        let actions = actions_view(s, &alarm);
        Ok(AlarmView {
            alarm,
            history,
            actions: actions.actions,
            note: actions.note,
        })
    })
    .await;
    found.map_or_else(IntoResponse::into_response, ok)
}

#[utoipa::path(get, path = "/alarms/{id}/actions", tag = "alarms", security(("bearer" = [])),
    params(("id" = u64, Path, description = "Alarm id")),
    responses(
        (status = 200, body = AlarmActions),
        (status = 404, description = "No such alarm (for the caller)", body = ErrorBody)))]
pub async fn actions(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<u64>,
) -> ApiReply {
    let view = blocking(state.alarms.store(), move |s| {
        let alarm = s.get(id, scope)?.ok_or(AlarmError::NotFound(id))?;
        Ok(actions_view(s, &alarm))
    })
    .await;
    view.map_or_else(IntoResponse::into_response, ok)
}

#[utoipa::path(get, path = "/alarms/{id}/chain", tag = "alarms", security(("bearer" = [])),
    params(("id" = u64, Path, description = "Alarm id")),
    responses(
        (status = 200, body = ChainView),
        (status = 404, description = "No such alarm (for the caller)", body = ErrorBody)))]
pub async fn chain(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<u64>,
) -> ApiReply {
    match blocking(state.alarms.store(), move |s| s.chain(id, scope)).await {
        Ok(Some(chain)) => ok(ChainView {
            id,
            alarms: chain.alarms,
            superseded_by: chain.superseded_by,
            note: chain.superseded_by.map(|newer| {
                format!("superseded by alarm {newer}: it cannot be handled on its own")
            }),
        }),
        Ok(None) => error(StatusCode::NOT_FOUND, format!("no alarm {id}")),
        Err(refused) => refused.into_response(),
    }
}

/// Who acts (a name, kept with the token's scope) and why.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ActBody {
    by: Option<String>,
    note: Option<String>,
}

#[utoipa::path(post, path = "/alarms/{id}/{action}", tag = "alarms", security(("bearer" = [])),
    params(("id" = u64, Path, description = "Alarm id"),
        ("action" = String, Path, description = "One of the actions `GET /alarms/{id}/actions` lists")),
    request_body(content = Option<ActBody>, description = "May be empty"),
    responses(
        (status = 200, description = "The alarm in its new state", body = Alarm),
        (status = 400, description = "The action is unknown or its state does not allow it",
            body = AlarmRefusal),
        (status = 404, description = "No such alarm (for the caller)", body = ErrorBody)))]
pub async fn act(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path((id, action)): Path<(u64, String)>,
    body: axum::body::Bytes,
) -> ApiReply {
    // The seed's "acknowledged" (`ack`) is the transition `confirm` makes.
    let name = if action == ACK { "confirm" } else { &action };
    let Some(action) = AlarmAction::parse(name).filter(|a| a.by_people()) else {
        let names: Vec<&str> = AlarmAction::BY_PEOPLE.iter().map(|a| a.as_str()).collect();
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "unknown action `{}`; one of {}",
                clip(&action, MAX_NAME),
                names.join(", ")
            ),
        );
    };
    // The body is optional: no body (whatever the content type) means no details.
    let body: ActBody = if body.iter().all(u8::is_ascii_whitespace) {
        ActBody::default()
    } else {
        match serde_json::from_slice(&body) {
            Ok(body) => body,
            Err(e) => {
                let reason = e.to_string();
                return error(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "the body must be {{\"by\"?: string, \"note\"?: string}}: {}",
                        clip(&reason, MAX_REPLY_MESSAGE)
                    ),
                );
            }
        }
    };
    let bounded = check_length("by", body.by.as_deref().unwrap_or_default(), MAX_NAME)
        .and_then(|()| check_length("note", body.note.as_deref().unwrap_or_default(), MAX_TEXT));
    if let Err(message) = bounded {
        return error(StatusCode::BAD_REQUEST, message);
    }
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
        Ok(alarm) => ok(alarm),
        Err(refused) => refused.into_response(),
    }
}

/// A device event for the event rules: the type names the rule.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventBody {
    device_id: String,
    #[serde(rename = "type")]
    kind: String,
    /// When it happened, ms since the Unix epoch (default: now).
    ts: Option<i64>,
    /// Makes a repeated post a duplicate.
    event_id: Option<String>,
}

/// What each rule the event matched did.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventReply {
    device_id: String,
    #[serde(rename = "type")]
    kind: String,
    results: Vec<EventResult>,
}

/// One rule's outcome.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "result", rename_all_fields = "camelCase")]
enum EventResult {
    #[serde(rename = "opened")]
    Opened {
        rule_key: String,
        alarm: Box<Alarm>,
        /// The alarm it superseded, if any.
        previous: Option<Superseded>,
    },
    #[serde(rename = "duplicate")]
    Duplicate { alarm_id: u64 },
    #[serde(rename = "ongoing")]
    Ongoing { alarm_id: u64 },
    #[serde(rename = "cleared")]
    Cleared { rule_key: String, alarm: Box<Alarm> },
    #[serde(rename = "nothing to clear")]
    NothingToClear { rule_key: String },
}

#[derive(Debug, Serialize, ToSchema)]
struct Superseded {
    id: u64,
    state: AlarmState,
}

#[utoipa::path(post, path = "/events", tag = "alarms", security(("bearer" = [])),
    request_body = EventBody,
    responses(
        (status = 200, body = EventReply),
        (status = 404, description = "No such device (for the caller)", body = ErrorBody),
        (status = 422, description = "No rule for the event type", body = ErrorBody)))]
pub async fn post_event(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    JsonBody(body): JsonBody<EventBody>,
) -> ApiReply {
    let bounded = check_length("deviceId", &body.device_id, MAX_NAME)
        .and_then(|()| check_length("type", &body.kind, MAX_NAME))
        .and_then(|()| match &body.event_id {
            Some(id) => check_length("eventId", id, MAX_REQUEST_ID),
            None => Ok(()),
        });
    if let Err(message) = bounded {
        return error(StatusCode::BAD_REQUEST, message);
    }
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
        Ok(applied) => ok(EventReply {
            device_id: body.device_id,
            kind: body.kind,
            results: applied.into_iter().map(applied_view).collect(),
        }),
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

fn applied_view(applied: Applied) -> EventResult {
    match applied {
        Applied::Raised(Raised::Opened { alarm, previous }) => EventResult::Opened {
            rule_key: alarm.rule_key.clone(),
            previous: previous.map(|p| Superseded {
                id: p.id,
                state: p.state,
            }),
            alarm,
        },
        Applied::Raised(Raised::Duplicate(alarm_id)) => EventResult::Duplicate { alarm_id },
        Applied::Raised(Raised::Ongoing(alarm_id)) => EventResult::Ongoing { alarm_id },
        Applied::Cleared { rule_key, alarm } => match alarm {
            Some(alarm) => EventResult::Cleared { rule_key, alarm },
            None => EventResult::NothingToClear { rule_key },
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
