//! What a caller asks of a device: the payload of `property/set` and
//! `function/invoke`, and the body of `POST /devices/{id}/commands`.

use serde::Deserialize;
use serde_json::Value as Json;

/// A command request.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandRequest {
    pub device_id: Option<String>,
    pub key: String,
    pub value: Json,
    pub request_id: Option<String>,
    /// Fail at once on any failure (default) rather than retry later.
    #[serde(default = "realtime_default")]
    pub realtime: bool,
    #[serde(default)]
    pub function: bool,
}

fn realtime_default() -> bool {
    true
}

/// The shape a downlink payload must have, for the refusal of one that has not.
pub const EXPECTED_SHAPE: &str = "{\"requestId\", \"key\", \"value\"}";

/// The request id of a payload that is not a valid request, if it has one.
pub fn request_id_of(payload: &[u8]) -> Json {
    serde_json::from_slice::<Json>(payload)
        .ok()
        .and_then(|v| v.get("requestId").cloned())
        .unwrap_or(Json::Null)
}
