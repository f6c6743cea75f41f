//! What a caller asks of a device: the payload of `property/set` and
//! `function/invoke`, and the body of `POST /devices/{id}/commands`.

use serde::Deserialize;
use serde_json::Value as Json;

use super::limits::{MAX_NAME, MAX_REQUEST_ID, check_length, check_value, echoed_request_id};

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

impl CommandRequest {
    /// Checks every field's length before anything of the request is used or
    /// stored.
    ///
    /// # Errors
    /// Which field is too long (never its content).
    pub fn check_bounds(&self) -> Result<(), String> {
        if let Some(device_id) = &self.device_id {
            check_length("deviceId", device_id, MAX_NAME)?;
        }
        if let Some(request_id) = &self.request_id {
            check_length("requestId", request_id, MAX_REQUEST_ID)?;
        }
        check_length("key", &self.key, MAX_NAME)?;
        check_value(&self.value)
    }
}

fn realtime_default() -> bool {
    true
}

/// The shape a downlink payload must have, for the refusal of one that has not.
pub const EXPECTED_SHAPE: &str = "{\"requestId\", \"key\", \"value\"}";

/// The request id of a payload that is not a valid request, if it has one a
/// reply may echo (see [`echoed_request_id`]).
pub fn request_id_of(payload: &[u8]) -> Json {
    serde_json::from_slice::<Json>(payload)
        .ok()
        .and_then(|v| v.get("requestId").map(echoed_request_id))
        .unwrap_or(Json::Null)
}
