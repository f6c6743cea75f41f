//! The HTTP API: `GET /health` (JSON), `GET /metrics` (Prometheus text), the
//! lease states of devices and drivers, alarms and device events, commands.

mod alarms;
mod auth;
mod commands;
mod components;
mod devices;
mod health;
mod metrics;
mod reply;
mod roster;
mod state;
mod states;
mod tokens;

use axum::Router;
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use state::ApiState;
pub use tokens::Tokens;

/// Serves the API on `listener` until `shutdown` turns true.
///
/// # Errors
/// When serving fails (the listener broke).
pub async fn serve(
    listener: TcpListener,
    state: ApiState,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    if let Ok(address) = listener.local_addr() {
        tracing::info!(%address, "HTTP API listening");
    }
    let app = Router::new()
        .route("/health", get(health::health))
        .route("/metrics", get(metrics::metrics))
        .route("/states", get(states::list))
        .route(
            "/devices/{id}/state",
            get(states::device).put(states::set_device),
        )
        .route("/devices", get(roster::list))
        .route("/devices/{id}", get(devices::get))
        .route(
            "/devices/{id}/config",
            axum::routing::put(devices::push).delete(devices::withdraw),
        )
        .route("/drivers/{id}/state", get(states::driver))
        .route("/alarms", get(alarms::list))
        .route("/alarms/stats", get(alarms::stats))
        .route("/alarms/{id}", get(alarms::get))
        .route("/alarms/{id}/actions", get(alarms::actions))
        .route("/alarms/{id}/chain", get(alarms::chain))
        .route("/alarms/{id}/{action}", post(alarms::act))
        .route("/events", post(alarms::post_event))
        .route("/components", get(components::list))
        .route("/reload", post(components::reload))
        .route(
            "/components/{name}/{version}",
            axum::routing::put(components::upload),
        )
        .route(
            "/components/{name}/{version}/activate",
            post(components::activate),
        )
        .route("/commands", post(commands::create))
        .route("/commands/claim", post(commands::claim))
        .route("/commands/{id}", get(commands::get))
        .route("/commands/{id}/cancel", post(commands::cancel))
        .route("/commands/{id}/receipt", post(commands::receipt))
        .with_state(state);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            while !*shutdown.borrow() {
                if shutdown.changed().await.is_err() {
                    break;
                }
            }
        })
        .await
}
