//! Device and driver states: `GET /devices/{id}/state`, `GET /drivers/{id}/state`,
//! `GET /states?type=&state=&parent=&tenantId=`, and `PUT /devices/{id}/state`,
//! `PUT /drivers/{id}/state` for an operator's maintenance. Reads show the
//! effective state (a row whose lease ran out reads offline before the scanner
//! reaches it) and change nothing. Rows are keyed by tenant (seed 000's unique
//! key): each tenant has a row of its own for a driver they share, and a
//! tenant's token reads its own tenant's rows only.

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
use crate::lease::{EntityKey, EntityState, EntityType, StateFilter, StateRow};
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
    /// For a device this engine polls: how its connections are doing now.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    reach: Option<ReachView>,
}

/// How a polled device's connections are doing, from the engine that polls
/// it: told also of a device never reached, which has no row yet.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReachView {
    /// Why its last round failed (a connect refused, a frame it refused);
    /// `null` since a round went through.
    last_error: Option<String>,
    /// Each channel's connection.
    connections: Vec<ConnectionView>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionView {
    channel_id: String,
    /// `IDLE`, `CONNECTING`, `ONLINE`, `OFFLINE`, `RECOVERING` or `FAILED`.
    state: &'static str,
}

/// The connections of configured device `id`, if this engine polls it.
fn reach(state: &ApiState, id: &str) -> Option<ReachView> {
    let roster = state.fleet.roster();
    let device = roster.get(id)?;
    if device.channels.is_empty() {
        return None;
    }
    Some(ReachView {
        last_error: device.last_error(),
        connections: device
            .connections()
            .map(|(channel, link)| ConnectionView {
                channel_id: channel.to_owned(),
                state: link.as_str(),
            })
            .collect(),
    })
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
        reach: None,
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StateList {
    states: Vec<StateView>,
}

/// `?tenantId=`: whose row of a driver (each tenant that speaks a codec has
/// its own); a device's tenant is its configuration's.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TenantQuery {
    /// The tenant whose row to read or change. Needed with the admin token
    /// when several tenants have a row of that id; a tenant's token reads
    /// its own.
    #[serde(rename = "tenantId")]
    #[param(rename = "tenantId")]
    tenant_id: Option<u32>,
}

/// Why a request for a row cannot be answered: its status and message.
type Refusal = (StatusCode, String);

/// The row `id` names for a caller of `scope` asking for `tenant`: the
/// asked tenant's, the caller's own, a configured device's tenant's, or else
/// the one row of that id (several are a question the caller must answer).
fn find(
    state: &ApiState,
    scope: Scope,
    entity_type: EntityType,
    id: &str,
    tenant: Option<u32>,
) -> Result<Option<StateRow>, Refusal> {
    let internal = |e: crate::store::StoreError| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
    if let (Some(own), Some(asked)) = (scope.tenant(), tenant)
        && own != asked
    {
        return Ok(None);
    }
    let configured = (entity_type == EntityType::Device)
        .then(|| state.fleet.roster().get(id).map(|d| d.tenant_id))
        .flatten();
    let store = state.leases.store();
    if let Some(tenant_id) = tenant.or(scope.tenant()).or(configured) {
        let entity = EntityKey {
            tenant_id,
            entity_type,
            entity_id: id.to_owned(),
        };
        return store.get(&entity).map_err(internal);
    }
    let filter = StateFilter {
        tenant: None,
        entity_type: Some(entity_type),
        parent: None,
    };
    let mut rows: Vec<StateRow> = store
        .list(&filter)
        .map_err(internal)?
        .into_iter()
        .filter(|row| row.entity_id == id)
        .collect();
    if rows.len() > 1 {
        let tenants: Vec<String> = rows.iter().map(|r| r.tenant_id.to_string()).collect();
        return Err((
            StatusCode::BAD_REQUEST,
            format!(
                "{} `{id}` has a row for each of tenants {}: say whose with `?tenantId=`",
                entity_type.as_str(),
                tenants.join(", ")
            ),
        ));
    }
    Ok(rows.pop())
}

async fn one(
    state: ApiState,
    scope: Scope,
    entity_type: EntityType,
    id: String,
    tenant: Option<u32>,
) -> ApiReply {
    off_the_workers(move || read_one(&state, scope, entity_type, &id, tenant)).await
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
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    reach: Option<ReachView>,
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

fn read_one(
    state: &ApiState,
    scope: Scope,
    entity_type: EntityType,
    id: &str,
    tenant: Option<u32>,
) -> ApiReply {
    match find(state, scope, entity_type, id, tenant) {
        Err((status, message)) => error(status, message),
        Ok(Some(row)) if scope.sees(row.tenant_id) => {
            let mut view = view(&row, now_ms());
            if entity_type == EntityType::Device {
                view.reach = reach(state, id);
            }
            ok(view)
        }
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
                    reach: reach(state, id),
                }),
                None => error(StatusCode::NOT_FOUND, format!("no device `{id}`")),
            }
        }
        Ok(None) => error(
            StatusCode::NOT_FOUND,
            format!("no {} `{id}` has reported yet", entity_type.as_str()),
        ),
    }
}

#[utoipa::path(get, path = "/devices/{id}/state", tag = "states", security(("bearer" = [])),
    params(("id" = String, Path, description = "Device id"), TenantQuery),
    responses(
        (status = 200, description = "Its row; a configured device nobody has heard from yet \
            reads `{type, id, state: \"unknown\", tenantId}`. A device this engine polls also \
            has `lastError` and `connections` (each channel's connection state), reached or \
            not", body = StateView),
        (status = 404, description = "No such device (or another tenant's)", body = ErrorBody)))]
pub async fn device(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<String>,
    Query(query): Query<TenantQuery>,
) -> ApiReply {
    one(state, scope, EntityType::Device, id, query.tenant_id).await
}

#[utoipa::path(get, path = "/drivers/{id}/state", tag = "states", security(("bearer" = [])),
    params(("id" = String, Path, description = "Driver (codec) name"), TenantQuery),
    responses(
        (status = 200, body = StateView),
        (status = 400, description = "Several tenants have a row of this driver and \
            `tenantId` does not say whose", body = ErrorBody),
        (status = 404, description = "It has not reported yet (for this tenant)", body = ErrorBody)))]
pub async fn driver(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<String>,
    Query(query): Query<TenantQuery>,
) -> ApiReply {
    one(state, scope, EntityType::Driver, id, query.tenant_id).await
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
    /// Only this tenant's rows (a tenant's token reads its own only).
    #[serde(rename = "tenantId")]
    #[param(rename = "tenantId")]
    tenant_id: Option<u32>,
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
        tenant: scope.tenant().or(query.tenant_id),
        entity_type,
        parent: query.parent,
    };
    off_the_workers(move || {
        let now = now_ms();
        match state.leases.store().list(&filter) {
            Ok(rows) => {
                let states = rows
                    .iter()
                    .filter(|r| scope.sees(r.tenant_id))
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
    params(("id" = String, Path, description = "Device id"), TenantQuery),
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
    Query(query): Query<TenantQuery>,
    JsonBody(body): JsonBody<SetState>,
) -> ApiReply {
    set(state, EntityType::Device, id, query.tenant_id, &body).await
}

/// `PUT /drivers/{id}/state {"state":"maintain"|"online"}`: an operator puts a
/// protocol driver into maintenance and back, as a device (the admin token).
#[utoipa::path(put, path = "/drivers/{id}/state", tag = "states", security(("bearer" = [])),
    params(("id" = String, Path, description = "Driver (codec) name"), TenantQuery),
    request_body = SetState,
    responses(
        (status = 200, description = "The row in its new state", body = StateView),
        (status = 400, description = "Not `maintain` or `online`; or several tenants have a \
            row of this driver and `tenantId` does not say whose", body = ErrorBody),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
        (status = 403, description = "Not the admin token", body = ErrorBody),
        (status = 404, description = "It has not reported yet", body = ErrorBody)))]
pub async fn set_driver(
    State(state): State<ApiState>,
    _admin: Admin,
    Path(id): Path<String>,
    Query(query): Query<TenantQuery>,
    JsonBody(body): JsonBody<SetState>,
) -> ApiReply {
    set(state, EntityType::Driver, id, query.tenant_id, &body).await
}

/// An operator's change of an entity's state.
async fn set(
    state: ApiState,
    entity_type: EntityType,
    id: String,
    tenant: Option<u32>,
    body: &SetState,
) -> ApiReply {
    let target = match EntityState::parse(&body.state) {
        Some(s @ (EntityState::Maintain | EntityState::Online)) => s,
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "state must be `maintain` or `online`",
            );
        }
    };
    off_the_workers(move || {
        let found = match find(&state, Scope::All, entity_type, &id, tenant) {
            Ok(found) => found,
            Err((status, message)) => return error(status, message),
        };
        let changed = match found {
            Some(row) => state.leases.set_state(&row.key(), target),
            None => Ok(None),
        };
        match changed {
            Ok(Some(row)) => ok(view(&row, now_ms())),
            Ok(None) => error(
                StatusCode::NOT_FOUND,
                format!("no {} `{id}` has reported yet", entity_type.as_str()),
            ),
            Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    })
    .await
}
