//! `GET /metrics`: every metric family the engine's modules registered, in the
//! Prometheus text format.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;

use super::reply::{ApiReply, off_the_workers};
use super::state::ApiState;
use crate::telemetry::CONTENT_TYPE;

#[utoipa::path(get, path = "/metrics", tag = "engine",
    responses((status = 200, description = "Every metric family, Prometheus text format",
        content_type = "text/plain")))]
pub async fn metrics(State(state): State<ApiState>) -> ApiReply {
    // Every device's series: rendered off the async workers.
    off_the_workers(move || match state.metrics.render() {
        Ok(text) => (StatusCode::OK, [(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain")],
            format!("metrics could not be encoded: {error}"),
        )
            .into_response(),
    })
    .await
}
