//! The HTTP API: `GET /health` (JSON), `GET /metrics` (Prometheus text), the
//! lease states of devices and drivers, alarms and device events, commands.

mod alarms;
mod auth;
mod commands;
mod components;
mod health;
mod metrics;
mod states;

use std::sync::Arc;
use std::time::Instant;

use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use auth::Tokens;

use crate::alarm::Alarms;
use crate::collector::Fleet;
use crate::uplink::UplinkStats;

/// What the API reads from the running engine.
#[derive(Debug, Clone)]
pub struct ApiState {
    /// The devices, as they are now.
    pub fleet: Arc<Fleet>,
    pub uplink: Arc<UplinkStats>,
    pub outbox: Arc<crate::wal::Outbox>,
    pub leases: Arc<crate::lease::Leases>,
    pub alarms: Arc<Alarms>,
    pub commands: Arc<crate::command::Commands>,
    pub deployer: Arc<crate::deploy::Deployer>,
    /// The operator's and the tenants' tokens.
    pub tokens: Arc<Tokens>,
    /// The gateway's local time (`collector.alarms.utcOffset`), minutes east of UTC.
    pub utc_offset_min: i16,
    pub started: Instant,
}

/// A JSON reply and its status.
type Reply = (StatusCode, Json<Value>);

fn error(status: StatusCode, message: impl Into<String>) -> Reply {
    (status, Json(json!({ "error": message.into() })))
}

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
