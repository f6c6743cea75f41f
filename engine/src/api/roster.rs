//! `GET /devices`: every configured device with its state (and since when this
//! engine saw it change), its alarms waiting for a person, and the engine that
//! polls it (the owner of its ownership lease when engines share a database;
//! docs/state.md, STATE-S7).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::Caller;
use super::reply::{ApiReply, error, ok};
use super::state::ApiState;
use crate::clock::now_ms;
use crate::lease::{EntityState, EntityType, StateFilter};

/// A configured device, its state and who polls it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceSummary {
    device_id: String,
    product_id: String,
    device_num: String,
    tenant_id: u32,
    /// `unknown` until it first reported (seed 000's "to be confirmed").
    #[serde(serialize_with = "super::states::state_or_unknown")]
    #[schema(value_type = String, example = "online")]
    state: Option<EntityState>,
    /// Since when it has been in that state, as far as this engine saw.
    state_since: Option<i64>,
    last_heartbeat: Option<i64>,
    /// The node id of the engine that polls it; none while nobody holds it.
    owner: Option<String>,
    /// When its ownership lease runs out (engines sharing a database).
    owner_expire_time: Option<i64>,
    /// Its alarms still waiting for a person (NEW, PUSHED, DELAYED,
    /// CONFIRMED, ESCALATED).
    open_alarms: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeviceList {
    devices: Vec<DeviceSummary>,
}

#[utoipa::path(get, path = "/devices", tag = "devices", security(("bearer" = [])),
    responses((status = 200, body = DeviceList)))]
pub async fn list(State(state): State<ApiState>, Caller(scope): Caller) -> ApiReply {
    let ownership = Arc::clone(state.fleet.ownership());
    let leases = Arc::clone(&state.leases);
    let state_leases = Arc::clone(&state.leases);
    let alarms = Arc::clone(&state.alarms);
    let looked_up = tokio::task::spawn_blocking(move || {
        let owners = ownership.owners().map_err(|e| e.to_string())?;
        let filter = StateFilter {
            tenant: scope.tenant(),
            entity_type: Some(EntityType::Device),
            parent: None,
        };
        let rows = leases.store().list(&filter).map_err(|e| e.to_string())?;
        let pending = alarms
            .store()
            .pending_by_device(scope)
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((owners, rows, pending))
    })
    .await;
    let (owners, rows, pending) = match looked_up {
        Ok(Ok(found)) => found,
        Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let now = now_ms();
    let states: HashMap<(u32, &str), _> = rows
        .iter()
        .map(|r| ((r.tenant_id, r.entity_id.as_str()), r))
        .collect();
    let owners: Option<HashMap<&str, _>> = owners
        .as_ref()
        .map(|all| all.iter().map(|o| (o.device_id.as_str(), o)).collect());
    let this_node = state.fleet.ownership().node_id().to_owned();
    let devices = state
        .fleet
        .roster()
        .devices()
        .iter()
        .filter(|d| scope.sees(d.tenant_id))
        .map(|device| {
            let id = device.id.as_str();
            let row = states.get(&(device.tenant_id, id));
            let (owner, owner_expire) = match &owners {
                None => (Some(this_node.clone()), None),
                Some(owners) => match owners.get(id) {
                    Some(o) if !o.lapsed => (Some(o.node_id.clone()), Some(o.expire_time)),
                    _ => (None, None),
                },
            };
            DeviceSummary {
                device_id: device.id.clone(),
                product_id: device.product_id.clone(),
                device_num: device.device_num.clone(),
                tenant_id: device.tenant_id,
                state: row.map(|r| r.effective_state(now)),
                state_since: row.and_then(|r| state_leases.state_since(r, now)),
                last_heartbeat: row.map(|r| r.last_heartbeat),
                owner,
                owner_expire_time: owner_expire,
                open_alarms: pending.get(id).copied().unwrap_or_default(),
            }
        })
        .collect();
    ok(DeviceList { devices })
}
