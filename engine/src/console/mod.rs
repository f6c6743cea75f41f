//! The operator console: a page served at `/` (its assets compiled into the
//! binary, nothing fetched from elsewhere) that reads the same HTTP API as any
//! client, with the caller's token, plus one stream of live changes
//! (`GET /console/stream`, server-sent events) fed by the engine's rounds.

mod assets;
mod stream;

use axum::Router;

use crate::api::{Access, ApiState, Route, served};

/// Who may call the console's routes: its page to anyone (it shows nothing
/// without a token), its stream to the admin's or a tenant's token.
pub const ACCESS: &[Route] = &[
    ("GET", "/", Access::Open),
    ("GET", "/console.js", Access::Open),
    ("GET", "/console.css", Access::Open),
    ("GET", "/favicon.svg", Access::Open),
    ("GET", "/console/stream", Access::Token),
];

/// The console's handlers, one a path, on `$router` through `$add` (as
/// `api_routes!`).
macro_rules! console_routes {
    ($add:ident, $router:expr) => {
        $add!($router;
            assets::index;
            assets::script;
            assets::style;
            assets::icon;
            stream::stream;
        )
    };
}

/// The console's routes: the page, its assets and its stream.
pub fn routes() -> Router<ApiState> {
    console_routes!(served, Router::new())
}

/// The console's routes with their descriptions.
#[cfg(test)]
pub fn description() -> utoipa_axum::router::OpenApiRouter<ApiState> {
    use crate::api::described;
    console_routes!(described, utoipa_axum::router::OpenApiRouter::new())
}
