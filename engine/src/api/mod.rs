//! The HTTP API: `GET /health` (JSON), `GET /metrics` (Prometheus text), and the
//! lease states of devices and drivers.

mod health;
mod metrics;
mod states;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::collector::Collector;
use crate::uplink::UplinkStats;

/// What the API reads from the running engine.
#[derive(Debug, Clone)]
pub struct ApiState {
    pub collector: Arc<CollectorView>,
    pub uplink: Arc<UplinkStats>,
    pub outbox: Arc<crate::wal::Outbox>,
    pub leases: Arc<crate::lease::Leases>,
    /// The operator's token for changes (`collector.http.adminToken`), if set.
    pub admin_token: Option<String>,
    pub started: Instant,
}

/// The parts of the collector the API reads (shared, never locked for long).
#[derive(Debug)]
pub struct CollectorView {
    pub devices: Arc<[Arc<crate::collector::Device>]>,
    pub links: Vec<crate::collector::LinkInfo>,
    pub counters: Arc<[crate::scheduler::RoundCounters]>,
}

impl CollectorView {
    pub fn of(collector: &Collector) -> Self {
        Self {
            devices: Arc::clone(&collector.devices),
            links: collector
                .links
                .iter()
                .map(|info| crate::collector::LinkInfo {
                    protocol: info.protocol,
                    address: info.address.clone(),
                    link: Arc::clone(&info.link),
                })
                .collect(),
            counters: Arc::clone(&collector.counters),
        }
    }
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
