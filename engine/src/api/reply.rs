//! The API's JSON replies.

use axum::Json;
use axum::http::StatusCode;
use serde_json::{Value, json};

/// A JSON reply and its status.
pub(super) type Reply = (StatusCode, Json<Value>);

pub(super) fn error(status: StatusCode, message: impl Into<String>) -> Reply {
    (status, Json(json!({ "error": message.into() })))
}
