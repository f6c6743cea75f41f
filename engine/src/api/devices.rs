//! A device's running configuration and where it came from (`GET /devices/{id}`),
//! and configuration pushes over HTTP (`PUT /devices/{id}/config`, withdrawn with
//! `DELETE /devices/{id}/config`): the same path as `config/push`.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::auth::Caller;
use super::reply::{Reply, error};
use super::state::ApiState;
use crate::clock::now_ms;
use crate::config::{ChannelConfig, DeviceConfig};
use crate::deploy::{Push, PushTarget};
use crate::model::{Access, DataType};

/// The name the file gives `value`.
fn named<T: PartialEq + Copy>(names: &[(&'static str, T)], value: T) -> &'static str {
    names
        .iter()
        .find(|(_, v)| *v == value)
        .map_or("?", |(name, _)| name)
}

fn channel_view(channel: &ChannelConfig) -> Value {
    let tags: Vec<Value> = channel
        .tags
        .iter()
        .map(|tag| {
            json!({
                "key": tag.spec.key,
                "address": tag.spec.address,
                "dataType": named(DataType::NAMES, tag.spec.data_type),
                "access": named(Access::NAMES, tag.spec.access),
                "factor": tag.spec.factor,
                "offset": tag.spec.offset,
                "periodMs": tag.period_ms,
                "readback": tag.readback,
            })
        })
        .collect();
    json!({
        "channelId": channel.channel_id,
        "protocol": channel.protocol.name(),
        "host": channel.host,
        "port": channel.port,
        "tags": tags,
    })
}

fn device_view(device: &DeviceConfig) -> Value {
    json!({
        "deviceId": device.device_id,
        "productId": device.product_id,
        "deviceNum": device.device_num,
        "tenantId": device.tenant_id,
        "enabled": device.enabled,
        "pipeline": device.pipeline,
        "channels": device.channels.iter().map(channel_view).collect::<Vec<_>>(),
    })
}

/// `GET /devices/{id}`: the configuration it runs with, and its source: `file`,
/// or `push` (when, from where, and whether the file's entry was edited since).
pub async fn get(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<String>,
) -> Reply {
    let config = state.fleet.config();
    let Some(device) = config.device(&id).filter(|d| scope.sees(d.tenant_id)) else {
        return error(StatusCode::NOT_FOUND, format!("no device `{id}`"));
    };
    let mut view = device_view(device);
    let deployer = Arc::clone(&state.deployer);
    let device_id = id.clone();
    let pushed = tokio::task::spawn_blocking(move || deployer.pushed(&device_id))
        .await
        .ok()
        .flatten();
    view["configSource"] = match pushed {
        Some(pushed) => {
            let conflict = state
                .deployer
                .conflicts()
                .into_iter()
                .find(|c| c.device_id == id);
            json!({
                "from": "push",
                "pushedAt": pushed.pushed_at,
                "origin": pushed.origin,
                "requestId": pushed.request_id,
                "fileEdit": conflict.map(|c| c.file_edit),
            })
        }
        None => json!({ "from": "file" }),
    };
    (StatusCode::OK, Json(view))
}

/// `PUT /devices/{id}/config`: pushes the device's configuration (a `devices`
/// entry as JSON); a tenant's token pushes only its own devices.
pub async fn push(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<String>,
    body: Bytes,
) -> Reply {
    let deployer = Arc::clone(&state.deployer);
    let outcome = tokio::task::spawn_blocking(move || {
        let push = Push {
            target: PushTarget::Device(id),
            payload: &body,
            scope,
            origin: "http",
        };
        deployer.push(&push, now_ms())
    })
    .await;
    let Ok(outcome) = outcome else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the push was not handled",
        );
    };
    let reply: Value = serde_json::from_slice(&outcome.reply(now_ms())).unwrap_or_default();
    let status = if outcome.result.is_ok() {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    (status, Json(reply))
}

/// `DELETE /devices/{id}/config`: withdraws the push; the file's entry applies
/// again (without one, the device is removed).
pub async fn withdraw(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<String>,
) -> Reply {
    let deployer = Arc::clone(&state.deployer);
    let device_id = id.clone();
    let withdrawn =
        tokio::task::spawn_blocking(move || deployer.withdraw_push(&device_id, scope)).await;
    match withdrawn {
        Ok(Ok(changes)) => (
            StatusCode::OK,
            Json(json!({
                "deviceId": id,
                "added": changes.added,
                "changed": changes.changed,
                "removed": changes.removed,
            })),
        ),
        Ok(Err(problems)) => error(StatusCode::UNPROCESSABLE_ENTITY, problems.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
