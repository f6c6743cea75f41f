//! `GET /metrics`: Prometheus text exposition of rounds, connections, the uplink
//! and component failures.

use std::fmt::Write;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use super::state::ApiState;
use crate::io::LinkState;
use crate::lease::{EntityState, EntityType};
use crate::scheduler::LATENCY_BUCKETS_MS;

/// Escapes a label value.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

pub async fn metrics(State(state): State<ApiState>) -> impl IntoResponse {
    let mut out = String::with_capacity(4096);
    render(&state, &mut out);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out)
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn render(state: &ApiState, out: &mut String) {
    let roster = state.fleet.roster();
    let stats: Vec<_> = roster
        .devices()
        .iter()
        .map(|d| d.rounds.snapshot())
        .collect();
    for (name, help, pick) in [
        (
            "sluice_rounds_total",
            "Poll rounds started.",
            (|s: &crate::scheduler::RoundStats| s.total) as fn(&_) -> u64,
        ),
        (
            "sluice_rounds_skipped_total",
            "Rounds skipped because the device was busy.",
            |s| s.skipped,
        ),
        (
            "sluice_rounds_failed_total",
            "Rounds that could not read the device.",
            |s| s.failed,
        ),
    ] {
        header(out, name, "counter", help);
        for (device, stat) in roster.devices().iter().zip(&stats) {
            let _ = writeln!(
                out,
                "{name}{{device=\"{}\"}} {}",
                label(&device.id),
                pick(stat)
            );
        }
    }
    header(
        out,
        "sluice_round_seconds",
        "histogram",
        "Duration of poll rounds.",
    );
    for (device, stat) in roster.devices().iter().zip(&stats) {
        let id = label(&device.id);
        for (bound, count) in LATENCY_BUCKETS_MS.iter().zip(&stat.latency_buckets) {
            let _ = writeln!(
                out,
                "sluice_round_seconds_bucket{{device=\"{id}\",le=\"{}\"}} {count}",
                *bound as f64 / 1000.0
            );
        }
        let all = stat.latency_buckets.last().copied().unwrap_or(0);
        let _ = writeln!(
            out,
            "sluice_round_seconds_bucket{{device=\"{id}\",le=\"+Inf\"}} {all}"
        );
        let _ = writeln!(
            out,
            "sluice_round_seconds_sum{{device=\"{id}\"}} {}",
            stat.latency_sum_us as f64 / 1e6
        );
        let _ = writeln!(out, "sluice_round_seconds_count{{device=\"{id}\"}} {all}");
    }
    header(
        out,
        "sluice_device_online",
        "gauge",
        "1 when the device answered its last round.",
    );
    let now = crate::clock::now_ms();
    for device in roster.devices().iter() {
        let row = state
            .leases
            .store()
            .get(EntityType::Device, &device.id)
            .ok()
            .flatten();
        let online = u8::from(row.is_some_and(|r| r.effective_state(now) == EntityState::Online));
        let _ = writeln!(
            out,
            "sluice_device_online{{device=\"{}\"}} {online}",
            label(&device.id)
        );
    }
    let pools = crate::watchdog::pools(roster.devices(), &state.alarms);
    header(
        out,
        "sluice_component_pool_failures_total",
        "counter",
        "Failed calls (traps, limits) per tenant and component; calls refused during a quarantine are not counted.",
    );
    for p in &pools {
        let _ = writeln!(
            out,
            "sluice_component_pool_failures_total{{tenant=\"{}\",component=\"{}\"}} {}",
            p.tenant,
            label(&p.health.component),
            p.health.failures
        );
    }
    header(
        out,
        "sluice_component_quarantined",
        "gauge",
        "1 while a tenant's component is quarantined after failing too often.",
    );
    for p in &pools {
        let _ = writeln!(
            out,
            "sluice_component_quarantined{{tenant=\"{}\",component=\"{}\"}} {}",
            p.tenant,
            label(&p.health.component),
            u8::from(p.health.quarantined)
        );
    }
    let reload = state.deployer.reload_status();
    let devices = state.deployer.device_reload_status();
    for (name, help, value) in [
        (
            "sluice_pipeline_reloads_total",
            "Reloads of the pipeline files that swapped new pipelines in.",
            reload.reloads,
        ),
        (
            "sluice_pipeline_reload_failures_total",
            "Reloads of the pipeline files refused (the running pipelines stayed).",
            reload.failures,
        ),
        (
            "sluice_config_reloads_total",
            "Reloads of the device configuration that were applied.",
            devices.reloads,
        ),
        (
            "sluice_config_reload_failures_total",
            "Reloads of the device configuration refused (the running devices stayed).",
            devices.failures,
        ),
    ] {
        header(out, name, "counter", help);
        let _ = writeln!(out, "{name} {value}");
    }
    header(
        out,
        "sluice_alarm_audit_failures_total",
        "counter",
        "Alarm changes rolled back because their audit record failed.",
    );
    let _ = writeln!(
        out,
        "sluice_alarm_audit_failures_total {}",
        state.alarms.store().audit_failures()
    );
    header(
        out,
        "sluice_alarm_rule_failures_total",
        "counter",
        "Failed calls of a tenant's alarm rules component (traps, limits).",
    );
    for (tenant, count) in state.alarms.rule_failures() {
        let _ = writeln!(
            out,
            "sluice_alarm_rule_failures_total{{tenant=\"{tenant}\"}} {count}"
        );
    }
    header(
        out,
        "sluice_component_failures_total",
        "counter",
        "Failed component calls (traps, limits) per device.",
    );
    for device in roster.devices().iter() {
        let (codec, stages) = device.component_failures();
        let id = label(&device.id);
        let _ = writeln!(
            out,
            "sluice_component_failures_total{{device=\"{id}\",kind=\"codec\"}} {codec}"
        );
        let _ = writeln!(
            out,
            "sluice_component_failures_total{{device=\"{id}\",kind=\"stage\"}} {stages}"
        );
    }
    header(
        out,
        "sluice_component_seconds_total",
        "counter",
        "Time spent in component calls (codec and pipeline) per device.",
    );
    for device in roster.devices().iter() {
        let seconds = device.component_time().as_secs_f64();
        let _ = writeln!(
            out,
            "sluice_component_seconds_total{{device=\"{}\"}} {seconds}",
            label(&device.id)
        );
    }
    header(
        out,
        "sluice_connection_state",
        "gauge",
        "1 for the state each connection is in.",
    );
    header(
        out,
        "sluice_connection_reconnects_total",
        "counter",
        "Reconnects per connection.",
    );
    for info in roster.links() {
        let Ok(link) = info.link.try_lock() else {
            continue;
        };
        let address = label(&info.address());
        for state in LinkState::ALL {
            let value = u8::from(link.state() == state);
            let _ = writeln!(
                out,
                "sluice_connection_state{{protocol=\"{}\",address=\"{address}\",state=\"{state}\"}} {value}",
                info.protocol()
            );
        }
        let _ = writeln!(
            out,
            "sluice_connection_reconnects_total{{protocol=\"{}\",address=\"{address}\"}} {}",
            info.protocol(),
            link.reconnects()
        );
    }
    let uplink = &state.uplink;
    for (name, kind, help, value) in [
        (
            "sluice_mqtt_connected",
            "gauge",
            "1 while connected to the broker.",
            u64::from(uplink.connected()),
        ),
        (
            "sluice_mqtt_published_total",
            "counter",
            "Messages handed to the MQTT client.",
            uplink.published(),
        ),
        (
            "sluice_mqtt_acked_total",
            "counter",
            "PUBACKs received.",
            uplink.acked(),
        ),
        (
            "sluice_mqtt_dropped_total",
            "counter",
            "Messages dropped (client queue full).",
            uplink.dropped(),
        ),
        (
            "sluice_mqtt_backlog",
            "gauge",
            "QoS 1 messages queued and not yet acknowledged.",
            uplink.backlog() as u64,
        ),
    ] {
        header(out, name, kind, help);
        let _ = writeln!(out, "{name} {value}");
    }
    let stats = state.outbox.stats();
    let (records, bytes) = state.outbox.log().size();
    let load = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    for (name, kind, help, value) in [
        (
            "sluice_wal_records",
            "gauge",
            "Reports in the WAL awaiting their PUBACK.",
            records,
        ),
        (
            "sluice_wal_bytes",
            "gauge",
            "Bytes of reports in the WAL.",
            bytes,
        ),
        (
            "sluice_wal_appended_total",
            "counter",
            "Reports appended to the WAL.",
            load(&stats.appended),
        ),
        (
            "sluice_wal_commits_total",
            "counter",
            "Durable WAL commits (group commits).",
            load(&stats.commits),
        ),
        (
            "sluice_wal_commit_errors_total",
            "counter",
            "WAL commits that failed and were retried.",
            load(&stats.commit_errors),
        ),
        (
            "sluice_wal_dropped_oldest_total",
            "counter",
            "Old reports dropped by DROP_OLDEST at the quota.",
            load(&stats.dropped_oldest),
        ),
        (
            "sluice_wal_dropped_newest_total",
            "counter",
            "New reports refused by DROP_NEWEST at the quota.",
            load(&stats.dropped_newest),
        ),
        (
            "sluice_wal_corrupt_total",
            "counter",
            "Damaged WAL records skipped.",
            state.outbox.log().corrupt(),
        ),
    ] {
        header(out, name, kind, help);
        let _ = writeln!(out, "{name} {value}");
    }
    let (sum, count) = uplink.publish_latency();
    header(
        out,
        "sluice_mqtt_publish_seconds",
        "summary",
        "Time from queueing a QoS 1 publish to its PUBACK.",
    );
    let _ = writeln!(out, "sluice_mqtt_publish_seconds_sum {sum}");
    let _ = writeln!(out, "sluice_mqtt_publish_seconds_count {count}");
}
