//! A device's running configuration and where it came from (`GET /devices/{id}`),
//! and configuration pushes over HTTP (`PUT /devices/{id}/config`, withdrawn with
//! `DELETE /devices/{id}/config`): the same path as `config/push`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::Caller;
use super::reply::{ApiReply, ErrorBody, error, off_the_workers, ok};
use super::state::ApiState;
use crate::clock::now_ms;
use crate::compile::FileEdit;
use crate::config::{ChannelConfig, DeviceConfig};
use crate::deploy::{Push, PushRights, PushTarget};
use crate::model::{Access, DataType, Scope};
use crate::mqtt::PushReply;

/// The name the file gives `value`.
fn named<T: PartialEq + Copy>(names: &[(&'static str, T)], value: T) -> &'static str {
    names
        .iter()
        .find(|(_, v)| *v == value)
        .map_or("?", |(name, _)| name)
}

/// A device's running configuration and where it came from.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceView {
    device_id: String,
    product_id: String,
    device_num: String,
    tenant_id: u32,
    enabled: bool,
    pipeline: String,
    channels: Vec<ChannelView>,
    config_source: ConfigSource,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct ChannelView {
    channel_id: String,
    /// `modbus-tcp`, `s7`, `mc`.
    protocol: String,
    host: String,
    port: u16,
    tags: Vec<TagView>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct TagView {
    key: String,
    address: String,
    /// `BOOL`, `INT16`, ... `FLOAT64`, `STRING`.
    data_type: &'static str,
    /// Characters of a STRING tag; elements of an array tag (its values are
    /// JSON arrays); absent for a tag of one value.
    #[serde(skip_serializing_if = "Option::is_none")]
    length: Option<u32>,
    /// `R`, `W` or `RW`.
    access: &'static str,
    factor: f64,
    offset: f64,
    /// Smallest value a write may set.
    min: Option<f64>,
    /// Largest value a write may set.
    max: Option<f64>,
    /// Polling period; 0: never polled.
    period_ms: u64,
    /// Whether a write is read back to check it.
    readback: bool,
    /// Engineering unit, for display.
    unit: Option<String>,
    /// Decimals the console shows; four significant digits when absent.
    precision: Option<u8>,
}

/// `file`, or `push` with when, from where and whether the file's entry was
/// edited since.
#[derive(Debug, Serialize, ToSchema)]
#[serde(
    tag = "from",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
enum ConfigSource {
    File,
    Push {
        pushed_at: i64,
        /// `mqtt` or `http`.
        origin: String,
        request_id: Option<String>,
        /// Set when the file's entry changed since the push.
        file_edit: Option<FileEdit>,
    },
}

fn channel_view(channel: &ChannelConfig) -> ChannelView {
    let tags = channel
        .tags
        .iter()
        .map(|tag| TagView {
            key: tag.spec.key.to_string(),
            address: tag.spec.address.to_string(),
            data_type: named(DataType::NAMES, tag.spec.data_type),
            length: (tag.spec.length > 0).then_some(tag.spec.length),
            access: named(Access::NAMES, tag.spec.access),
            factor: tag.spec.factor,
            offset: tag.spec.offset,
            min: tag.min,
            max: tag.max,
            period_ms: tag.period_ms,
            readback: tag.reads_back(),
            unit: tag.unit.clone(),
            precision: tag.precision,
        })
        .collect();
    ChannelView {
        channel_id: channel.channel_id.clone(),
        protocol: channel.protocol.name().to_owned(),
        host: channel.host.clone(),
        port: channel.port,
        tags,
    }
}

fn device_view(device: &DeviceConfig, config_source: ConfigSource) -> DeviceView {
    DeviceView {
        device_id: device.device_id.clone(),
        product_id: device.product_id.clone(),
        device_num: device.device_num.clone(),
        tenant_id: device.tenant_id,
        enabled: device.enabled,
        pipeline: device.pipeline.clone(),
        channels: device.channels.iter().map(channel_view).collect(),
        config_source,
    }
}

/// `GET /devices/{id}`: the configuration it runs with, and its source: `file`,
/// or `push` (when, from where, and whether the file's entry was edited since).
#[utoipa::path(get, path = "/devices/{id}", tag = "devices", security(("bearer" = [])),
    params(("id" = String, Path, description = "Device id")),
    responses(
        (status = 200, body = DeviceView),
        (status = 404, description = "No such device (for the caller)", body = ErrorBody)))]
pub async fn get(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<String>,
) -> ApiReply {
    // The running configuration's lock is held through a reload's compile, and
    // the push lookup reads a file: both wait on a blocking thread, not on the
    // thread the rounds run on.
    off_the_workers(move || {
        let device = state.fleet.read_config(|config| {
            config
                .device(&id)
                .filter(|d| scope.sees(d.tenant_id))
                .cloned()
        });
        let Some(device) = device else {
            return error(StatusCode::NOT_FOUND, format!("no device `{id}`"));
        };
        let source = match state.deployer.pushed(&id) {
            Some(pushed) => ConfigSource::Push {
                pushed_at: pushed.pushed_at,
                origin: pushed.origin,
                request_id: pushed.request_id,
                file_edit: state
                    .deployer
                    .conflicts()
                    .into_iter()
                    .find(|c| c.device_id == id)
                    .map(|c| c.file_edit),
            },
            None => ConfigSource::File,
        };
        ok(device_view(&device, source))
    })
    .await
}

/// `PUT /devices/{id}/config`: pushes the device's configuration (a `devices`
/// entry as JSON); a tenant's token pushes only its own devices.
#[utoipa::path(put, path = "/devices/{id}/config", tag = "devices", security(("bearer" = [])),
    params(("id" = String, Path, description = "Device id")),
    request_body(content = Object, description = "A `devices` entry of the configuration file, as JSON"),
    responses(
        (status = 200, description = "Applied (or already in force)", body = PushReply),
        (status = 422, description = "Refused with every problem; nothing changed", body = PushReply)))]
pub async fn push(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiReply {
    let deployer = Arc::clone(&state.deployer);
    let outcome = tokio::task::spawn_blocking(move || {
        let push = Push {
            target: PushTarget::Device(id),
            payload: &body,
            scope,
            // A tenant's token tunes what the operator allowed; the admin's may do anything.
            rights: match scope {
                Scope::All => PushRights::Operator,
                Scope::Tenant(_) => PushRights::Limited,
            },
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
    let status = if outcome.result.is_ok() {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    // The same reply as on `config/push/reply`.
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        outcome.reply(now_ms()),
    )
        .into_response()
}

/// What a withdrawn push changed.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Withdrawn {
    device_id: String,
    added: Vec<String>,
    changed: Vec<String>,
    removed: Vec<String>,
}

/// `DELETE /devices/{id}/config`: withdraws the push; the file's entry applies
/// again (without one, the device is removed).
#[utoipa::path(delete, path = "/devices/{id}/config", tag = "devices", security(("bearer" = [])),
    params(("id" = String, Path, description = "Device id")),
    responses(
        (status = 200, body = Withdrawn),
        (status = 422, description = "Refused (not pushed, or the file's entry is invalid)",
            body = ErrorBody)))]
pub async fn withdraw(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<String>,
) -> ApiReply {
    let deployer = Arc::clone(&state.deployer);
    let device_id = id.clone();
    let withdrawn =
        tokio::task::spawn_blocking(move || deployer.withdraw_push(&device_id, scope)).await;
    match withdrawn {
        Ok(Ok(changes)) => ok(Withdrawn {
            device_id: id,
            added: changes.added,
            changed: changes.changed,
            removed: changes.removed,
        }),
        Ok(Err(problems)) => error(StatusCode::UNPROCESSABLE_ENTITY, problems.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
