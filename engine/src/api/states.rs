//! Device and driver states: `GET /devices/{id}/state`, `GET /drivers/{id}/state`,
//! `GET /states?type=&state=&parent=`, and `PUT /devices/{id}/state` for an
//! operator's maintenance. Reads show the effective state (a row whose lease ran
//! out reads offline before the scanner reaches it) and change nothing.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::reply::{Reply, error};
use super::state::ApiState;
use crate::clock::now_ms;
use crate::lease::{EntityState, EntityType, StateFilter, StateRow};
use crate::model::Scope;

/// A row as the API shows it, with its effective state.
fn view(row: &StateRow, now: i64) -> Value {
    let state = row.effective_state(now);
    // A lease that ran out before the scanner came reads as the scanner will leave it.
    let last_state = if state == row.state {
        row.last_state
    } else {
        row.state
    };
    json!({
        "type": row.entity_type.as_str(),
        "id": row.entity_id,
        "parent": row.parent_id,
        "state": state.as_str(),
        "lastState": last_state.as_str(),
        "lastHeartbeat": row.last_heartbeat,
        "expireTime": row.expire_time,
        "leaseVersion": row.lease_version,
        "timeoutSeconds": row.timeout_seconds,
        "timeoutSource": row.timeout_source,
        "extension": row.extension,
        "tenantId": row.tenant_id,
    })
}

fn one(state: &ApiState, entity_type: EntityType, id: &str) -> Reply {
    match state.leases.store().get(entity_type, id) {
        Ok(Some(row)) => (StatusCode::OK, Json(view(&row, now_ms()))),
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            format!("no {} `{id}` has reported yet", entity_type.as_str()),
        ),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

pub async fn device(State(state): State<ApiState>, Path(id): Path<String>) -> Reply {
    one(&state, EntityType::Device, &id)
}

pub async fn driver(State(state): State<ApiState>, Path(id): Path<String>) -> Reply {
    one(&state, EntityType::Driver, &id)
}

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    #[serde(rename = "type")]
    entity_type: Option<String>,
    state: Option<String>,
    parent: Option<String>,
}

pub async fn list(State(state): State<ApiState>, Query(query): Query<ListQuery>) -> Reply {
    let entity_type = match query
        .entity_type
        .as_deref()
        .map(|t| EntityType::parse(t).ok_or(t))
    {
        Some(Err(bad)) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("unknown type `{bad}`: driver or device"),
            );
        }
        Some(Ok(t)) => Some(t),
        None => None,
    };
    let wanted = match query
        .state
        .as_deref()
        .map(|s| EntityState::parse(s).ok_or(s))
    {
        Some(Err(bad)) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("unknown state `{bad}`: online, offline, maintain or fault"),
            );
        }
        Some(Ok(s)) => Some(s),
        None => None,
    };
    let filter = StateFilter {
        entity_type,
        parent: query.parent,
    };
    let now = now_ms();
    match state.leases.store().list(&filter) {
        Ok(rows) => {
            let rows: Vec<Value> = rows
                .iter()
                .filter(|r| wanted.is_none_or(|w| r.effective_state(now) == w))
                .map(|r| view(r, now))
                .collect();
            (StatusCode::OK, Json(json!({ "states": rows })))
        }
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

#[derive(Debug, Deserialize)]
pub struct SetState {
    state: String,
}

/// `PUT /devices/{id}/state {"state":"maintain"|"online"}`: an operator puts a device
/// into maintenance and back. Needs `Authorization: Bearer <adminToken>` when one is
/// configured (a tenant's token is not enough).
pub async fn set_device(
    State(state): State<ApiState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<SetState>,
) -> Reply {
    if state.tokens.has_admin() && state.tokens.scope(&headers) != Some(Scope::All) {
        return error(StatusCode::UNAUTHORIZED, "an admin token is required");
    }
    let target = match EntityState::parse(&body.state) {
        Some(s @ (EntityState::Maintain | EntityState::Online)) => s,
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "state must be `maintain` or `online`",
            );
        }
    };
    match state.leases.set_state(EntityType::Device, &id, target) {
        Ok(Some(row)) => (StatusCode::OK, Json(view(&row, now_ms()))),
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            format!("no device `{id}` has reported yet"),
        ),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
