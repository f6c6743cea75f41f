//! `GET /health`: to anyone, bare liveness (`{"engine": "running"}`); with the
//! admin token, the engine, the broker connection, the WAL, devices by state,
//! reloads and failures (paths and errors the rest of the world need not see).

use std::collections::BTreeMap;

use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::MaybeCaller;
use super::reply::{ApiReply, off_the_workers, ok};
use super::state::ApiState;
use crate::compile::Conflict;
use crate::deploy::ReloadStatus;
use crate::lease::{EntityState, EntityType, StateFilter};
use crate::model::Scope;

/// The engine's health.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    /// Always `running` while it answers.
    engine: &'static str,
    version: &'static str,
    uptime_sec: u64,
    broker: Broker,
    /// The connections to the brokers devices publish to (`protocol: mqtt`), by address.
    device_brokers: Vec<DeviceBroker>,
    wal: Wal,
    devices: DeviceCounts,
    /// Connections to devices by link state (`ONLINE`, `RECOVERING`, ...).
    connections: BTreeMap<&'static str, u64>,
    /// Alarm and command changes rolled back because their audit record could
    /// not be written.
    audit_failures: u64,
    pipelines: Reloads,
    config: ConfigReloads,
    /// Component pools quarantined after repeated failures.
    quarantined: Vec<Quarantined>,
    /// Failed alarm-rule calls by tenant id.
    alarm_rule_failures: BTreeMap<String, u64>,
}

/// The MQTT uplink.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct Broker {
    connected: bool,
    connects: u64,
    published: u64,
    acked: u64,
    dropped: u64,
    /// Reports waiting in the client for the broker.
    backlog: usize,
    last_error: String,
    /// Days until the client certificate (mutual TLS) of the last connect
    /// expires; absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    client_certificate_days_left: Option<i64>,
}

/// A connection to a broker devices publish to.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct DeviceBroker {
    address: String,
    connected: bool,
    /// Messages received since the engine started.
    messages: u64,
    /// Why the last connection attempt failed, until one succeeds.
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<String>,
}

/// The write-ahead log reports wait in until the broker has them.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct Wal {
    /// Records not yet acknowledged by the broker.
    records: u64,
    bytes: u64,
    /// Records held in memory while the log could not take them.
    ring: usize,
    appended: u64,
    commits: u64,
    commit_errors: u64,
    dropped_oldest: u64,
    dropped_newest: u64,
    /// Records found damaged and skipped.
    corrupt: u64,
    /// Messages set aside because they can never be sent (`GET /dead-letters`).
    dead_letters: u64,
}

/// Devices by lease state; `unknown`: not reported yet, or a lease that ended unknown (`stateWhenExpired`).
#[derive(Debug, Serialize, ToSchema)]
struct DeviceCounts {
    total: usize,
    online: usize,
    offline: usize,
    maintain: usize,
    fault: usize,
    unknown: usize,
}

/// Reloads of one kind of source file.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reloads {
    /// The watched file or directory, if any.
    source: Option<String>,
    reloads: u64,
    reload_failures: u64,
    /// Why the last reload was refused, until one succeeds.
    last_error: Option<String>,
}

/// Reloads of the device configuration, and the pushed devices in conflict
/// with the file.
#[derive(Debug, Serialize, ToSchema)]
struct ConfigReloads {
    #[serde(flatten)]
    reloads: Reloads,
    conflicts: Vec<Conflict>,
}

#[derive(Debug, Serialize, ToSchema)]
struct Quarantined {
    tenant: u32,
    component: String,
}

/// Bare liveness, for anyone.
#[derive(Debug, Serialize, ToSchema)]
pub struct Alive {
    /// Always `running` while it answers.
    engine: &'static str,
}

#[utoipa::path(get, path = "/health", tag = "engine",
    responses((status = 200,
        description = "The engine is running: `Alive` without the admin token, `Health` with it",
        body = Health)))]
pub async fn health(State(state): State<ApiState>, MaybeCaller(caller): MaybeCaller) -> ApiReply {
    if caller != Some(Scope::All) {
        return ok(Alive { engine: "running" });
    }
    off_the_workers(move || read_health(&state)).await
}

/// Reads the lease store: off the async workers.
fn read_health(state: &ApiState) -> ApiReply {
    let roster = state.fleet.roster();
    let now = crate::clock::now_ms();
    let rows = state
        .leases
        .store()
        .list(&StateFilter {
            tenant: None,
            entity_type: Some(EntityType::Device),
            parent: None,
        })
        .unwrap_or_default();
    let count = |wanted: EntityState| {
        rows.iter()
            .filter(|r| r.effective_state(now) == wanted)
            .count()
    };
    let mut connections = BTreeMap::new();
    for info in roster.links() {
        *connections.entry(info.link.state().as_str()).or_insert(0) += 1;
    }
    let uplink = &state.uplink;
    ok(Health {
        engine: "running",
        version: env!("CARGO_PKG_VERSION"),
        uptime_sec: state.started.elapsed().as_secs(),
        broker: Broker {
            connected: uplink.connected(),
            connects: uplink.connects(),
            published: uplink.published(),
            acked: uplink.acked(),
            dropped: uplink.dropped(),
            backlog: uplink.backlog(),
            last_error: uplink.last_error(),
            client_certificate_days_left: uplink.client_certificate_days_left(),
        },
        device_brokers: state
            .fleet
            .device_brokers()
            .into_iter()
            .map(|(address, broker)| DeviceBroker {
                address,
                connected: broker.connected,
                messages: broker.messages,
                last_error: broker.last_error,
            })
            .collect(),
        wal: wal(state),
        devices: DeviceCounts {
            total: roster.devices().len(),
            online: count(EntityState::Online),
            offline: count(EntityState::Offline),
            maintain: count(EntityState::Maintain),
            fault: count(EntityState::Fault),
            unknown: roster.devices().len().saturating_sub(rows.len())
                + count(EntityState::Unknown),
        },
        connections,
        audit_failures: state.alarms.store().audit_failures()
            + state.commands.store().audit_failures(),
        pipelines: reloads(
            &state.deployer.reload_status(),
            state.deployer.sources().pipelines_dir.as_deref(),
        ),
        config: ConfigReloads {
            reloads: reloads(
                &state.deployer.device_reload_status(),
                state.deployer.sources().config_file.as_deref(),
            ),
            conflicts: state.deployer.conflicts(),
        },
        quarantined: crate::watchdog::pools(roster.devices(), &state.alarms)
            .into_iter()
            .filter(|p| p.health.quarantined)
            .map(|p| Quarantined {
                tenant: p.tenant,
                component: p.health.component,
            })
            .collect(),
        alarm_rule_failures: state
            .alarms
            .rule_failures()
            .into_iter()
            .map(|(tenant, count)| (tenant.to_string(), count))
            .collect(),
    })
}

fn wal(state: &ApiState) -> Wal {
    let outbox = &state.outbox;
    let stats = outbox.stats();
    let (records, bytes) = outbox.log().size();
    Wal {
        records,
        bytes,
        ring: outbox.ring_len(),
        appended: stats.appended.get(),
        commits: stats.commits.get(),
        commit_errors: stats.commit_errors.get(),
        dropped_oldest: stats.dropped_oldest.get(),
        dropped_newest: stats.dropped_newest.get(),
        corrupt: outbox.log().corrupt(),
        dead_letters: outbox.log().dead_letter_count(),
    }
}

fn reloads(status: &ReloadStatus, source: Option<&std::path::Path>) -> Reloads {
    Reloads {
        source: source.map(|d| d.display().to_string()),
        reloads: status.reloads,
        reload_failures: status.failures,
        last_error: status.last_error.clone(),
    }
}
