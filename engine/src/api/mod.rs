//! The HTTP API: `GET /health` (JSON), `GET /metrics` (Prometheus text), the
//! lease states of devices and drivers (and heartbeats from outside), alarms and device events, commands,
//! components, and `GET /openapi.json` describing them all.

mod access;
mod alarms;
mod auth;
mod body;
mod commands;
mod components;
mod dead_letters;
mod devices;
mod health;
mod heartbeats;
mod metrics;
mod openapi;
mod reply;
mod roster;
mod server;
mod state;
mod states;
mod tokens;
mod trends;

use axum::Router;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use access::{API as API_ACCESS, Access, AccessTable, AllowedHosts, Route};
pub use alarms::EventBody;
pub use auth::{Caller, MaybeCaller};
pub use commands::ClaimBody;
pub use server::{ServerLimits, serve};
pub use state::{ApiState, Document};
pub use states::SetState;
pub use tokens::Tokens;

/// Every route of the API, each described by its handler's annotation.
pub fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::with_openapi(openapi::base())
        .routes(routes!(health::health))
        .routes(routes!(metrics::metrics))
        .routes(routes!(openapi::document))
        .routes(routes!(states::list))
        .routes(routes!(states::device, states::set_device))
        .routes(routes!(states::driver, states::set_driver))
        .routes(routes!(roster::list))
        .routes(routes!(devices::get))
        .routes(routes!(trends::device))
        .routes(routes!(devices::push, devices::withdraw))
        .routes(routes!(alarms::list))
        .routes(routes!(alarms::stats))
        .routes(routes!(alarms::get))
        .routes(routes!(alarms::actions))
        .routes(routes!(alarms::chain))
        .routes(routes!(alarms::act))
        .routes(routes!(alarms::post_event))
        .routes(routes!(heartbeats::post))
        .routes(routes!(components::list))
        .routes(routes!(components::reload))
        .routes(routes!(components::upload, components::remove))
        .routes(routes!(components::activate))
        .routes(routes!(commands::list, commands::create))
        .routes(routes!(commands::claim))
        .routes(routes!(commands::get))
        .routes(routes!(commands::cancel))
        .routes(routes!(commands::receipt))
        .routes(routes!(dead_letters::list))
        .routes(routes!(dead_letters::resend))
        .routes(routes!(dead_letters::discard))
}

/// `routes` (with the console's, or any others) on `state`, each behind its
/// access class (`state.access`), answering what no route serves with
/// [`openapi::no_route`]; the description of them all, each operation with its
/// class, is served at `/openapi.json`.
pub fn app(routes: OpenApiRouter<ApiState>, state: ApiState) -> Router {
    let (router, mut openapi) = routes.split_for_parts();
    openapi::classify(&mut openapi, &state.access);
    openapi::publish(&state.openapi, &openapi);
    router
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authorize,
        ))
        .fallback(openapi::no_route)
        .with_state(state)
}
