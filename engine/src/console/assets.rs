//! The page and its assets, compiled into the binary.

use axum::http::header;
use axum::response::IntoResponse;

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/console.js");
const STYLE: &str = include_str!("assets/console.css");
const ICON: &str = include_str!("assets/favicon.svg");

/// The page itself asks the browser to run nothing but its own script.
const POLICY: &str = "default-src 'self'; img-src 'self' data:; object-src 'none'; \
                      base-uri 'none'; frame-ancestors 'none'";

fn asset(kind: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "no-cache"),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
}

#[utoipa::path(get, path = "/", tag = "console",
    responses((status = 200, description = "The console's page", content_type = "text/html")))]
pub async fn index() -> impl IntoResponse {
    asset("text/html; charset=utf-8", INDEX)
}

#[utoipa::path(get, path = "/console.js", tag = "console",
    responses((status = 200, description = "Its script", content_type = "text/javascript")))]
pub async fn script() -> impl IntoResponse {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

#[utoipa::path(get, path = "/console.css", tag = "console",
    responses((status = 200, description = "Its style sheet", content_type = "text/css")))]
pub async fn style() -> impl IntoResponse {
    asset("text/css; charset=utf-8", STYLE)
}

#[utoipa::path(get, path = "/favicon.svg", tag = "console",
    responses((status = 200, description = "Its icon", content_type = "image/svg+xml")))]
pub async fn icon() -> impl IntoResponse {
    asset("image/svg+xml", ICON)
}
