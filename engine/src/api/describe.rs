//! The OpenAPI description of the routes, from the handlers' annotations: what
//! `docs/openapi.json` must equal (the gateway serves that file; its binary
//! carries none of this code).

use utoipa::openapi::extensions::ExtensionsBuilder;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::access::{Access, AccessTable};
use super::{
    ApiState, alarms, api_routes, commands, components, dead_letters, devices, health, heartbeats,
    metrics, openapi, roster, states, trends,
};

/// The routes of `$handlers` groups on an OpenAPI router: served, and
/// described by their annotations.
macro_rules! described {
    ($router:expr; $($($handler:path),+;)+) => {{
        $router$(.routes(utoipa_axum::routes!($($handler),+)))+
    }};
}
pub(crate) use described;

/// Every route of the API with its description, and the document's info.
pub fn description() -> utoipa_axum::router::OpenApiRouter<ApiState> {
    api_routes!(
        described,
        utoipa_axum::router::OpenApiRouter::with_openapi(base())
    )
}

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
            let extensions = operation.extensions.get_or_insert_with(Default::default);
            extensions.merge(
                ExtensionsBuilder::new()
                    .add("x-sluice-access", class)
                    .build(),
            );
        }
    }
}

/// `openapi` as `docs/openapi.json` holds it.
///
/// # Errors
/// When it cannot be rendered.
pub fn render(openapi: &utoipa::openapi::OpenApi) -> Result<String, serde_json::Error> {
    openapi.to_pretty_json().map(|text| text + "\n")
}
