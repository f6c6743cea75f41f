//! `GET /devices`: every configured device with its state and the engine that
//! polls it (the owner of its ownership lease when engines share a database;
//! docs/state.md, S7).

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::auth::Caller;
use super::reply::{Reply, error};
use super::state::ApiState;
use crate::clock::now_ms;
use crate::lease::{EntityType, StateFilter};

pub async fn list(State(state): State<ApiState>, Caller(scope): Caller) -> Reply {
    let ownership = Arc::clone(state.fleet.ownership());
    let leases = Arc::clone(&state.leases);
    let looked_up = tokio::task::spawn_blocking(move || {
        let owners = ownership.owners()?;
        let filter = StateFilter {
            entity_type: Some(EntityType::Device),
            parent: None,
        };
        let rows = leases.store().list(&filter)?;
        Ok::<_, crate::store::StoreError>((owners, rows))
    })
    .await;
    let (owners, rows) = match looked_up {
        Ok(Ok(found)) => found,
        Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let now = now_ms();
    let states: HashMap<&str, _> = rows.iter().map(|r| (r.entity_id.as_str(), r)).collect();
    let owners: Option<HashMap<&str, _>> = owners
        .as_ref()
        .map(|all| all.iter().map(|o| (o.device_id.as_str(), o)).collect());
    let this_node = state.fleet.ownership().node_id().to_owned();
    let devices: Vec<Value> = state
        .fleet
        .roster()
        .devices()
        .iter()
        .filter(|d| scope.sees(d.tenant_id))
        .map(|device| {
            let id = device.id.as_str();
            let row = states.get(id);
            let (owner, owner_expire) = match &owners {
                None => (Some(this_node.clone()), None),
                Some(owners) => match owners.get(id) {
                    Some(o) if !o.lapsed => (Some(o.node_id.clone()), Some(o.expire_time)),
                    _ => (None, None),
                },
            };
            json!({
                "deviceId": id,
                "productId": device.product_id,
                "deviceNum": device.device_num,
                "tenantId": device.tenant_id,
                "state": row.map(|r| r.effective_state(now).as_str()),
                "lastHeartbeat": row.map(|r| r.last_heartbeat),
                "owner": owner,
                "ownerExpireTime": owner_expire,
            })
        })
        .collect();
    (StatusCode::OK, Json(json!({ "devices": devices })))
}
