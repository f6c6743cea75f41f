//! `GET /devices/{id}/trend`: a device's numeric tags over the last hour, as
//! the console's trend charts draw them (kept in memory, a budget shared by
//! the fleet's tags: see `collector::trend`).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::Caller;
use super::reply::{ApiReply, ErrorBody, error, ok};
use super::state::ApiState;
use crate::clock::now_ms;
use crate::model::DataType;

/// A device's trends.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrendList {
    device_id: String,
    /// The shortest time between two points kept, ms: the console adds the
    /// live values in between.
    spacing_ms: i64,
    tags: Vec<TagTrend>,
}

/// One numeric tag's last hour.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TagTrend {
    key: String,
    unit: Option<String>,
    precision: Option<u8>,
    /// `[ms since the Unix epoch, value]`, oldest first.
    #[schema(value_type = Vec<Vec<f64>>)]
    points: Vec<(i64, f64)>,
}

#[utoipa::path(get, path = "/devices/{id}/trend", tag = "devices", security(("bearer" = [])),
    params(("id" = String, Path, description = "Device id")),
    responses(
        (status = 200, description = "Its numeric tags (not arrays, booleans or texts), each \
            with its points of the last hour", body = TrendList),
        (status = 404, description = "No such device (for the caller)", body = ErrorBody)))]
pub async fn device(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<String>,
) -> ApiReply {
    let roster = state.fleet.roster();
    let Some(device) = roster.get(&id).filter(|d| scope.sees(d.tenant_id)) else {
        return error(StatusCode::NOT_FOUND, format!("no device `{id}`"));
    };
    let trend = device.latest.trend(now_ms());
    let tags = device
        .tags
        .iter()
        .zip(trend.tags)
        .enumerate()
        .filter(|(_, (tag, _))| {
            tag.array_len().is_none() && !matches!(tag.data_type, DataType::Bool | DataType::String)
        })
        .map(|(index, (tag, points))| {
            let display = device.display.get(index);
            TagTrend {
                key: tag.key.to_string(),
                unit: display.and_then(|d| d.unit.as_deref().map(str::to_owned)),
                precision: display.and_then(|d| d.precision),
                points,
            }
        })
        .collect();
    ok(TrendList {
        device_id: device.id.clone(),
        spacing_ms: trend.spacing_ms,
        tags,
    })
}
