//! `GET /openapi.json`: the OpenAPI 3.1 description of every route, served
//! from `docs/openapi.json`. That file is what the handlers' annotations give
//! (the same annotations the router takes each route's path and methods from):
//! the unit test `gateway::openapi_document` renders it with `describe` and
//! fails when the two differ, and a running engine's test checks that it
//! describes exactly the routes served. The gateway binary carries the text,
//! not the code that writes it (about a megabyte).

use std::sync::OnceLock;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::reply::error;

/// The document, as `gateway::openapi_document` wrote it, deflated by the
/// build script.
const DEFLATED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/openapi.json.deflate"));

/// The document, inflated the first time it is asked for; `None` when the
/// embedded copy does not inflate (a damaged binary).
pub fn text() -> Option<&'static str> {
    static TEXT: OnceLock<Option<String>> = OnceLock::new();
    TEXT.get_or_init(|| {
        miniz_oxide::inflate::decompress_to_vec(DEFLATED)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
    })
    .as_deref()
}

#[utoipa::path(get, path = "/openapi.json", tag = "engine",
    responses((status = 200, description = "This document (OpenAPI 3.1)",
        content_type = "application/json")))]
pub async fn document() -> Response {
    match text() {
        Some(text) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            text,
        )
            .into_response(),
        None => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the embedded document does not inflate: the binary is damaged",
        ),
    }
}

/// What every path no route serves is answered with.
pub async fn no_route(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!(
            "no route `{method} {}`; GET /openapi.json lists them",
            uri.path()
        ),
    )
}
