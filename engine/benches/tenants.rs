//! One tenant's hostile component against another tenant's round latency.
//!
//! `cargo bench -p sluice --bench tenants`. Two tenants, `SLUICE_BENCH_DEVICES`
//! (20) devices each, every device on its own simulator socket, polled every 100 ms,
//! the release binary as a child process. Phase 1: both tenants' pipelines behave;
//! phase 2: tenant 1 deploys a stage that loops until its CPU budget stops it
//! (quarantined after 10 failures in a row, tried again every 60 s). Each phase runs
//! `SLUICE_BENCH_SECONDS` (15); the figure is tenant 2's mean round latency in phase 2
//! against phase 1.
#![allow(clippy::print_stdout)]

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{Broker, Engine, Scratch, env_u64, free_local_address, http_get, http_request, serve};
use sluice::sim::{SimConfig, Simulator};
use tokio::runtime::Runtime;

const ADMIN: &str = "bench-admin";

/// Sum and count of round seconds of the devices whose id starts with `prefix`.
fn rounds(metrics: &str, prefix: &str) -> (f64, f64) {
    let mut sum = 0.0;
    let mut count = 0.0;
    for line in metrics.lines() {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let mine = series.contains(&format!("device=\"{prefix}"));
        if mine && series.starts_with("sluice_round_seconds_sum{") {
            sum += value;
        } else if mine && series.starts_with("sluice_round_seconds_count{") {
            count += value;
        }
    }
    (sum, count)
}

/// Tenant 2's mean round latency over `seconds`, in ms.
fn phase(http: std::net::SocketAddr, seconds: u64) -> f64 {
    let before = rounds(&http_get(http, "/metrics").expect("metrics"), "b");
    std::thread::sleep(Duration::from_secs(seconds));
    let after = rounds(&http_get(http, "/metrics").expect("metrics"), "b");
    (after.0 - before.0) / (after.1 - before.1).max(1.0) * 1e3
}

fn main() {
    let devices = usize::try_from(env_u64("SLUICE_BENCH_DEVICES", 20))
        .expect("fits")
        .max(1);
    let seconds = env_u64("SLUICE_BENCH_SECONDS", 15).max(1);
    let rt = Runtime::new().expect("tokio runtime");
    let sim = Simulator::new(SimConfig {
        registers: 10,
        ..SimConfig::default()
    });
    let sims = serve(&rt, &sim, devices * 2);
    let broker = Broker::start();
    let http = free_local_address();
    let scratch = Scratch::new("tenants");
    let pipelines = scratch.0.join("pipelines");
    std::fs::create_dir_all(&pipelines).expect("pipelines dir");
    let file = pipelines.join("t1.yaml");
    std::fs::write(
        &file,
        "name: t1\nstages:\n  - use: swap_bytes\n  - use: decode\n",
    )
    .expect("pipeline");
    let mut text = format!(
        "collector:
  workerThreads: 2
  mqtt: {{ brokerUrl: tcp://{}, clientId: tenants-bench }}
  http: {{ listen: {http}, adminToken: {ADMIN} }}
  wal: {{ dir: ./data }}
  connections: {{ maxTotal: 4096, maxPerHost: 4096 }}
tenants:
  - {{ tenantId: 1, name: hostile, pipeline: t1 }}
  - {{ tenantId: 2, name: calm }}
devices:
",
        broker.address
    );
    for (i, sim) in sims.iter().enumerate() {
        let (tenant, prefix) = if i < devices { (1, "a") } else { (2, "b") };
        text.push_str(&format!(
            "  - {{ deviceId: {prefix}{i}, productId: P, deviceNum: D{i}, tenantId: {tenant}, channels: [ {{ channelId: c, protocol: modbus-tcp, host: 127.0.0.1, port: {}, tags: [ {{ key: t, address: '40001', dataType: UINT16, periodMs: 100 }} ] }} ] }}\n",
            sim.local_addr().port()
        ));
    }
    std::fs::write(scratch.0.join("devices.yaml"), &text).expect("config");
    let mut engine = Engine::start_with_args(
        &scratch.0,
        &text,
        http,
        &["--pipelines".into(), pipelines.display().to_string()],
    );
    engine.wait_all_online(devices * 2, Duration::from_millis(100));
    println!("tenants bench: 2 tenants x {devices} devices at 100 ms, {seconds} s per phase");
    let calm = phase(http, seconds);

    let hostile = std::fs::read(PathBuf::from(env!("SLUICE_TEST_COMPONENTS")).join("hostile.wasm"))
        .expect("hostile built");
    let (status, body) = http_request(
        http,
        "PUT",
        "/components/hostile/1?kind=stage",
        ADMIN,
        &hostile,
    )
    .expect("upload");
    assert_eq!(status, 200, "{body}");
    std::fs::write(&file, "name: t1\nstages:\n  - use: swap_bytes\n  - use: decode\n  - use: hostile\n    settings: { mode: loop }\n").expect("edit");
    // Measure from the edit on: the reload, the looping calls, then the quarantine.
    let started = Instant::now();
    let watcher = std::thread::spawn(move || {
        while !http_get(http, "/health")
            .unwrap_or_default()
            .contains("\"component\":\"hostile\"")
        {
            if started.elapsed() > Duration::from_secs(60) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(started.elapsed())
    });
    let attacked = phase(http, seconds);
    let quarantined_after = watcher
        .join()
        .expect("watcher")
        .expect("quarantined within 60 s");
    engine.assert_running();
    println!(
        "tenant 2 mean round: calm {calm:.2} ms, while tenant 1 loops {attacked:.2} ms, ratio {:.2}",
        attacked / calm
    );
    println!(
        "tenant 1's stage quarantined {:.1} s after the edit",
        quarantined_after.as_secs_f64()
    );
}
