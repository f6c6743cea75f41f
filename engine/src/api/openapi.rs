//! `GET /openapi.json`: the OpenAPI 3.1 description of every route, generated
//! from the handlers' own annotations by the router that serves them, so a
//! route cannot be served without being described (or described without being
//! served).

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use utoipa::openapi::extensions::ExtensionsBuilder;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::access::{Access, AccessTable};
use super::reply::{ApiReply, error};
use super::state::{ApiState, Document};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Sluice HTTP API",
        description = "Device and driver states, alarms, commands, components and the \
                       engine's health. Send `Authorization: Bearer <token>`: the admin token \
                       sees every tenant, a tenant's token its own devices and alarms, a node \
                       token may claim commands and report receipts for its node. Each \
                       operation's `x-sluice-access` says who may call it: `open`, `metrics`, \
                       `token` (admin or tenant), `admin` or `node`."
    ),
    modifiers(&Bearer),
    tags(
        (name = "engine", description = "Health, metrics and this document"),
        (name = "devices", description = "Configured devices and pushed configurations"),
        (name = "states", description = "Lease-based states of devices and drivers"),
        (name = "alarms", description = "The alarm lifecycle"),
        (name = "commands", description = "Downlink commands: create, claim, receipt"),
        (name = "components", description = "Component versions and reloads (admin)"),
        (name = "console", description = "The operator console's page and live stream"),
    )
)]
struct Base;

/// The bearer token scheme the operations name.
struct Bearer;

impl Modify for Bearer {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The document's info, tags and security scheme; the routes add their paths.
pub fn base() -> utoipa::openapi::OpenApi {
    Base::openapi()
}

/// Names each operation's access class in `x-sluice-access` (`unclassified`
/// for one nobody classified: it is refused, and the document says so).
pub fn classify(openapi: &mut utoipa::openapi::OpenApi, access: &AccessTable) {
    for (path, item) in openapi.paths.paths.iter_mut() {
        let operations = [
            ("GET", &mut item.get),
            ("PUT", &mut item.put),
            ("POST", &mut item.post),
            ("DELETE", &mut item.delete),
            ("PATCH", &mut item.patch),
        ];
        for (method, operation) in operations {
            let Some(operation) = operation.as_mut() else {
                continue;
            };
            let class = access
                .get(method, path)
                .map_or("unclassified", Access::as_str);
            if class == "unclassified" {
                tracing::error!(method, path, "a route no one classified for access");
            }
            let extensions = operation.extensions.get_or_insert_with(Default::default);
            extensions.merge(
                ExtensionsBuilder::new()
                    .add("x-sluice-access", class)
                    .build(),
            );
        }
    }
}

/// Renders `openapi` once for [`document`].
pub fn publish(document: &Document, openapi: &utoipa::openapi::OpenApi) {
    match openapi.to_pretty_json() {
        Ok(text) => {
            let _ = document.set(text);
        }
        Err(e) => tracing::error!(error = %e, "the OpenAPI document could not be rendered"),
    }
}

#[utoipa::path(get, path = "/openapi.json", tag = "engine",
    responses((status = 200, description = "This document (OpenAPI 3.1)",
        content_type = "application/json")))]
pub async fn document(State(state): State<ApiState>) -> ApiReply {
    match state.openapi.get() {
        Some(text) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            text.clone(),
        )
            .into_response(),
        None => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the document is not rendered yet",
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
