//! What the API's handlers share: the running engine's parts, and replies.

use std::sync::Arc;
use std::time::Instant;

use super::access::{AccessTable, AllowedHosts};
use super::tokens::Tokens;
use crate::alarm::Alarms;
use crate::collector::Fleet;
use crate::telemetry::Metrics;
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
    /// Every metric family, for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// The operator's, the tenants', the nodes' and the metrics tokens.
    pub tokens: Arc<Tokens>,
    /// Who may call each route.
    pub access: Arc<AccessTable>,
    /// The `Host` names the API answers to.
    pub hosts: Arc<AllowedHosts>,
    /// The gateway's local time (`collector.alarms.utcOffset`), minutes east of UTC.
    pub utc_offset_min: i16,
    pub started: Instant,
    /// Turns true at shutdown: long-lived answers (the console's stream) end.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
}
