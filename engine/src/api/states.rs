//! Device and driver states: `GET /devices/{id}/state`, `GET /drivers/{id}/state`,
//! `GET /states?type=&state=&parent=`, and `PUT /devices/{id}/state`,
//! `PUT /drivers/{id}/state` for an operator's maintenance. Reads show the effective state (a row whose lease ran
//! out reads offline before the scanner reaches it) and change nothing; a
//! tenant's token reads its own devices' rows and the drivers'.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::auth::{Admin, Caller};
use super::body::JsonBody;
use super::reply::{ApiReply, ErrorBody, error, off_the_workers, ok};
use super::state::ApiState;
use crate::clock::now_ms;
use crate::lease::{EntityState, EntityType, StateFilter, StateRow};
use crate::model::{Scope, TimeoutSource};

/// A driver's or device's lease row, with the state it reads as now.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StateView {
    #[serde(rename = "type")]
    entity_type: EntityType,
    id: String,
    /// The driver of a device.
    parent: String,
    state: EntityState,
    last_state: EntityState,
    /// Last renewal, ms since the Unix epoch.
    last_heartbeat: i64,
    /// When the lease runs out, ms since the Unix epoch.
    expire_time: i64,
    lease_version: u64,
    timeout_seconds: u64,
    timeout_source: TimeoutSource,
    /// Free-form details (last error, protocol, node).
    #[schema(value_type = Object)]
    extension: Value,
    tenant_id: u32,
}

/// A row as the API shows it, with its effective state.
fn view(row: &StateRow, now: i64) -> StateView {
    let state = row.effective_state(now);
    // A lease that ran out before the scanner came reads as the scanner will leave it.
    let last_state = if state == row.state {
        row.last_state
    } else {
        row.state
    };
    StateView {
        entity_type: row.entity_type,
        id: row.entity_id.clone(),
        parent: row.parent_id.clone(),
        state,
        last_state,
        last_heartbeat: row.last_heartbeat,
        expire_time: row.expire_time,
        lease_version: row.lease_version,
        timeout_seconds: row.timeout_seconds,
        timeout_source: row.timeout_source,
        extension: row.extension.clone(),
        tenant_id: row.tenant_id,
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StateList {
    states: Vec<StateView>,
}

/// Whether a caller of `scope` sees `row`: its tenant's devices, every driver.
fn sees(scope: Scope, row: &StateRow) -> bool {
    row.entity_type == EntityType::Driver || scope.sees(row.tenant_id)
}

async fn one(state: ApiState, scope: Scope, entity_type: EntityType, id: String) -> ApiReply {
    off_the_workers(move || read_one(&state, scope, entity_type, &id)).await
}

/// A configured device no lease row speaks of yet: nobody has heard from it
/// (seed 000's "to be confirmed").
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnheardView {
    #[serde(rename = "type")]
    entity_type: EntityType,
    id: String,
    /// Always `unknown`.
    state: &'static str,
    tenant_id: u32,
}

/// How a state reads when there is no row to read it from.
pub(super) const UNKNOWN: &str = "unknown";

/// `state` as `GET /devices` shows it: `unknown` while there is none.
pub(super) fn state_or_unknown<S: serde::Serializer>(
    state: &Option<EntityState>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(state.map_or(UNKNOWN, EntityState::as_str))
}

fn read_one(state: &ApiState, scope: Scope, entity_type: EntityType, id: &str) -> ApiReply {
    match state.leases.store().get(entity_type, id) {
        Ok(Some(row)) if sees(scope, &row) => ok(view(&row, now_ms())),
        Ok(Some(_)) => error(
            StatusCode::NOT_FOUND,
            format!("no {} `{id}` of this tenant", entity_type.as_str()),
        ),
        Ok(None) if entity_type == EntityType::Device => {
            match state
                .fleet
                .roster()
                .get(id)
                .filter(|d| scope.sees(d.tenant_id))
            {
                Some(device) => ok(UnheardView {
                    entity_type,
                    id: id.to_owned(),
                    state: UNKNOWN,
                    tenant_id: device.tenant_id,
                }),
                None => error(StatusCode::NOT_FOUND, format!("no device `{id}`")),
            }
        }
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            format!("no {} `{id}` has reported yet", entity_type.as_str()),
        ),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

#[utoipa::path(get, path = "/devices/{id}/state", tag = "states", security(("bearer" = [])),
    params(("id" = String, Path, description = "Device id")),
    responses(
        (status = 200, description = "Its row; a configured device nobody has heard from yet \
            reads `{type, id, state: \"unknown\", tenantId}`", body = StateView),
        (status = 404, description = "No such device (or another tenant's)", body = ErrorBody)))]
pub async fn device(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<String>,
) -> ApiReply {
    one(state, scope, EntityType::Device, id).await
}

#[utoipa::path(get, path = "/drivers/{id}/state", tag = "states", security(("bearer" = [])),
    params(("id" = String, Path, description = "Driver (codec) name")),
    responses(
        (status = 200, body = StateView),
        (status = 404, description = "It has not reported yet", body = ErrorBody)))]
pub async fn driver(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<String>,
) -> ApiReply {
    one(state, scope, EntityType::Driver, id).await
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// `driver` or `device`.
    #[serde(rename = "type")]
    #[param(rename = "type")]
    entity_type: Option<String>,
    /// `online`, `offline`, `maintain`, `fault` or `unknown`, as the rows read now.
    state: Option<String>,
    /// Only the devices of this driver.
    parent: Option<String>,
}

#[utoipa::path(get, path = "/states", tag = "states", security(("bearer" = [])), params(ListQuery),
    responses(
        (status = 200, description = "The rows the caller sees", body = StateList),
        (status = 400, description = "An unknown type or state", body = ErrorBody)))]
pub async fn list(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Query(query): Query<ListQuery>,
) -> ApiReply {
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
                format!("unknown state `{bad}`: online, offline, maintain, fault or unknown"),
            );
        }
        Some(Ok(s)) => Some(s),
        None => None,
    };
    let filter = StateFilter {
        entity_type,
        parent: query.parent,
    };
    off_the_workers(move || {
        let now = now_ms();
        match state.leases.store().list(&filter) {
            Ok(rows) => {
                let states = rows
                    .iter()
                    .filter(|r| sees(scope, r))
                    .filter(|r| wanted.is_none_or(|w| r.effective_state(now) == w))
                    .map(|r| view(r, now))
                    .collect();
                ok(StateList { states })
            }
            Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    })
    .await
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct SetState {
    /// `maintain` or `online`.
    state: String,
}

/// `PUT /devices/{id}/state {"state":"maintain"|"online"}`: an operator puts a device
/// into maintenance and back (the admin token; a tenant's is not enough).
#[utoipa::path(put, path = "/devices/{id}/state", tag = "states", security(("bearer" = [])),
    params(("id" = String, Path, description = "Device id")),
    request_body = SetState,
    responses(
        (status = 200, description = "The row in its new state", body = StateView),
        (status = 400, description = "Not `maintain` or `online`", body = ErrorBody),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
        (status = 403, description = "Not the admin token", body = ErrorBody),
        (status = 404, description = "It has not reported yet", body = ErrorBody)))]
pub async fn set_device(
    State(state): State<ApiState>,
    _admin: Admin,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<SetState>,
) -> ApiReply {
    set(state, EntityType::Device, id, &body).await
}

/// `PUT /drivers/{id}/state {"state":"maintain"|"online"}`: an operator puts a
/// protocol driver into maintenance and back, as a device (the admin token).
#[utoipa::path(put, path = "/drivers/{id}/state", tag = "states", security(("bearer" = [])),
    params(("id" = String, Path, description = "Driver (codec) name")),
    request_body = SetState,
    responses(
        (status = 200, description = "The row in its new state", body = StateView),
        (status = 400, description = "Not `maintain` or `online`", body = ErrorBody),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
        (status = 403, description = "Not the admin token", body = ErrorBody),
        (status = 404, description = "It has not reported yet", body = ErrorBody)))]
pub async fn set_driver(
    State(state): State<ApiState>,
    _admin: Admin,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<SetState>,
) -> ApiReply {
    set(state, EntityType::Driver, id, &body).await
}

/// An operator's change of an entity's state.
async fn set(state: ApiState, entity_type: EntityType, id: String, body: &SetState) -> ApiReply {
    let target = match EntityState::parse(&body.state) {
        Some(s @ (EntityState::Maintain | EntityState::Online)) => s,
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "state must be `maintain` or `online`",
            );
        }
    };
    off_the_workers(
        move || match state.leases.set_state(entity_type, &id, target) {
            Ok(Some(row)) => ok(view(&row, now_ms())),
            Ok(None) => error(
                StatusCode::NOT_FOUND,
                format!("no {} `{id}` has reported yet", entity_type.as_str()),
            ),
            Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        },
    )
    .await
}
