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
#[cfg(test)]
mod describe;
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
use axum::handler::Handler;
use axum::routing::MethodRouter;
use utoipa_axum::PathItemExt;

pub use access::{API as API_ACCESS, Access, AccessTable, AllowedHosts, Route};
pub use alarms::EventBody;
pub use auth::{Caller, MaybeCaller};
pub use commands::ClaimBody;
pub use openapi::text as openapi_document;
pub use server::{ServerLimits, serve};
pub use state::ApiState;
pub use states::SetState;
pub use tokens::Tokens;

/// Each group of handlers (one path, a method each), on `$router`, through
/// `$add`: [`served!`] for the gateway's router, `describe::described!` for
/// the OpenAPI document's source.
macro_rules! api_routes {
    ($add:ident, $router:expr) => {
        $add!($router;
            health::health;
            metrics::metrics;
            openapi::document;
            states::list;
            states::device, states::set_device;
            states::driver, states::set_driver;
            roster::list;
            devices::get;
            trends::device;
            devices::push, devices::withdraw;
            alarms::list;
            alarms::stats;
            alarms::get;
            alarms::actions;
            alarms::chain;
            alarms::act;
            alarms::post_event;
            heartbeats::post;
            components::list;
            components::reload;
            components::upload, components::remove;
            components::activate;
            commands::list, commands::create;
            commands::claim;
            commands::get;
            commands::cancel;
            commands::receipt;
            dead_letters::list;
            dead_letters::resend;
            dead_letters::discard;
        )
    };
}
#[cfg(test)]
pub(crate) use api_routes;

/// The routes of `$handlers` groups on an axum router: each handler's path and
/// methods from its annotation, nothing of its description (what a gateway
/// serves; the document it serves is `docs/openapi.json`, kept equal to the
/// annotations by `gateway::openapi_document`).
macro_rules! served {
    ($router:expr; $($($module:ident :: $handler:ident),+;)+) => {{
        let router = $router;
        $($(
            let router = utoipa_axum::paste! {
                $crate::api::route::<$module::[<__path_ $handler>], _, _>(
                    router,
                    $module::$handler,
                )
            };
        )+)+
        router
    }};
}
pub(crate) use served;

/// Every route of the API.
pub fn routes() -> Router<ApiState> {
    api_routes!(served, Router::new())
}

#[cfg(test)]
pub(crate) use describe::described;
#[cfg(test)]
pub use describe::{classify, description, render};

/// `router` with `handler` on the path and methods its annotation `P` names.
pub(crate) fn route<P, H, T>(router: Router<ApiState>, handler: H) -> Router<ApiState>
where
    P: utoipa::Path,
    H: Handler<T, ApiState>,
    T: 'static,
{
    let methods = P::methods()
        .iter()
        .fold(MethodRouter::new(), |methods, method| {
            methods.on(method.to_method_filter(), handler.clone())
        });
    router.route(&P::path(), methods)
}

/// `routes` (with the console's, or any others) on `state`, each behind its
/// access class (`state.access`), answering what no route serves with
/// [`openapi::no_route`].
pub fn app(routes: Router<ApiState>, state: ApiState) -> Router {
    routes
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authorize,
        ))
        .fallback(openapi::no_route)
        .with_state(state)
}
