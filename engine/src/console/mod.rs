//! The operator console: a page served at `/` (its assets compiled into the
//! binary, nothing fetched from elsewhere) that reads the same HTTP API as any
//! client, with the caller's token, plus one stream of live changes
//! (`GET /console/stream`, server-sent events) fed by the engine's rounds.

mod assets;
mod stream;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::{Access, ApiState, Route};

/// Who may call the console's routes: its page to anyone (it shows nothing
/// without a token), its stream to the admin's or a tenant's token.
pub const ACCESS: &[Route] = &[
    ("GET", "/", Access::Open),
    ("GET", "/console.js", Access::Open),
    ("GET", "/console.css", Access::Open),
    ("GET", "/favicon.svg", Access::Open),
    ("GET", "/console/stream", Access::Token),
];

/// The console's routes: the page, its assets and its stream.
pub fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(assets::index))
        .routes(routes!(assets::script))
        .routes(routes!(assets::style))
        .routes(routes!(assets::icon))
        .routes(routes!(stream::stream))
}
