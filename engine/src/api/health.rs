//! `GET /health`: the engine, the broker connection and devices by state.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::state::ApiState;
use crate::deploy::ReloadStatus;
use crate::io::LinkState;
use crate::lease::{EntityState, EntityType, StateFilter};

pub async fn health(State(state): State<ApiState>) -> Json<Value> {
    let roster = state.fleet.roster();
    let now = crate::clock::now_ms();
    let rows = state
        .leases
        .store()
        .list(&StateFilter {
            entity_type: Some(EntityType::Device),
            parent: None,
        })
        .unwrap_or_default();
    let count = |wanted: EntityState| {
        rows.iter()
            .filter(|r| r.effective_state(now) == wanted)
            .count()
    };
    let unknown = roster.devices().len().saturating_sub(rows.len());
    let (online, offline, maintain, fault) = (
        count(EntityState::Online),
        count(EntityState::Offline),
        count(EntityState::Maintain),
        count(EntityState::Fault),
    );
    let mut links = serde_json::Map::new();
    for info in roster.links() {
        let state = match info.link.try_lock() {
            Ok(link) => link.state().as_str(),
            // Busy: a request is in flight, so it is connected.
            Err(_) => LinkState::Online.as_str(),
        };
        let count = links.entry(state).or_insert(json!(0));
        *count = json!(count.as_u64().unwrap_or(0) + 1);
    }
    let uplink = &state.uplink;
    Json(json!({
        "engine": "running",
        "version": env!("CARGO_PKG_VERSION"),
        "uptimeSec": state.started.elapsed().as_secs(),
        "broker": {
            "connected": uplink.connected(),
            "connects": uplink.connects(),
            "published": uplink.published(),
            "acked": uplink.acked(),
            "dropped": uplink.dropped(),
            "backlog": uplink.backlog(),
            "lastError": uplink.last_error(),
        },
        "wal": wal(&state),
        "devices": {
            "total": roster.devices().len(),
            "online": online,
            "offline": offline,
            "maintain": maintain,
            "fault": fault,
            "unknown": unknown,
        },
        "connections": links,
        "auditFailures": state.alarms.store().audit_failures(),
        "pipelines": reloads(
            &state.deployer.reload_status(),
            state.deployer.sources().pipelines_dir.as_deref(),
        ),
        "config": config_reloads(&state),
        "quarantined": crate::watchdog::pools(roster.devices(), &state.alarms)
            .into_iter()
            .filter(|p| p.health.quarantined)
            .map(|p| json!({ "tenant": p.tenant, "component": p.health.component }))
            .collect::<Vec<_>>(),
        "alarmRuleFailures": state
            .alarms
            .rule_failures()
            .into_iter()
            .map(|(tenant, count)| (tenant.to_string(), json!(count)))
            .collect::<serde_json::Map<_, _>>(),
    }))
}

fn wal(state: &ApiState) -> Value {
    let outbox = &state.outbox;
    let stats = outbox.stats();
    let (records, bytes) = outbox.log().size();
    json!({
        "records": records,
        "bytes": bytes,
        "ring": outbox.ring_len(),
        "appended": stats.appended.get(),
        "commits": stats.commits.get(),
        "commitErrors": stats.commit_errors.get(),
        "droppedOldest": stats.dropped_oldest.get(),
        "droppedNewest": stats.dropped_newest.get(),
        "corrupt": outbox.log().corrupt(),
    })
}

/// The device configuration's reloads, and the pushed devices in conflict.
fn config_reloads(state: &ApiState) -> Value {
    let mut config = reloads(
        &state.deployer.device_reload_status(),
        state.deployer.sources().config_file.as_deref(),
    );
    config["conflicts"] = json!(state.deployer.conflicts());
    config
}

fn reloads(status: &ReloadStatus, source: Option<&std::path::Path>) -> Value {
    json!({
        "source": source.map(|d| d.display().to_string()),
        "reloads": status.reloads,
        "reloadFailures": status.failures,
        "lastError": status.last_error,
    })
}
