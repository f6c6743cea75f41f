//! Deploying while running, and starting.
//!
//! `cargo bench -p sluice --bench deploy`. Simulated devices (one socket each)
//! polled every 100 ms through the default pipeline, the embedded MQTT broker,
//! the release `sluice` binary as a child process:
//!
//! - cold start to first publish with an empty data directory (every built-in
//!   component compiled) vs the same start again (compiled artifacts from the
//!   cache), as a ratio;
//! - swap latency of a stage upload: `PUT /components/scale/...` from the request
//!   to its answer (compile, check, rebuild every device's pipeline) and to the
//!   first report carrying the new stage's values, for the fleet, against the
//!   poll period;
//! - a device-config reload: one device added to the file (`POST /reload`) from
//!   the request to its answer and to the new device's first report, then removed
//!   again, against the poll period and the stage swap; the simulator's accepted
//!   connections show whether any other device's connection was touched.
//!
//! Environment (optional): `SLUICE_BENCH_DEVICES` (200), `SLUICE_BENCH_SWAPS` (5).
#![allow(clippy::print_stdout)]

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::config::{Device, Gateway, Tag};
use common::{Broker, Engine, Scratch, env_u64, free_local_address, http_request, serve};
use sluice::sim::{SimConfig, SimHandle, Simulator};
use tokio::runtime::Runtime;

const ADMIN: &str = "bench-admin";
const PERIOD_MS: u64 = 100;
const TIMEOUT: Duration = Duration::from_secs(120);

/// One device entry polling register 40001 of the simulator socket `port`.
fn device(id: &str, port: u16) -> Device {
    Device::modbus(id, port).tag(Tag::new("t", "40001", "UINT16", PERIOD_MS))
}

fn config(broker: &Broker, http: std::net::SocketAddr, sims: &[SimHandle]) -> Gateway {
    let gateway = Gateway::new("deploy-bench", broker.address.port())
        .http(http.port(), ADMIN)
        // No replay of the last run's reports: the first report after a start is a new one.
        .set("wal.enabled", false)
        .set(
            "connections",
            serde_json::json!({ "maxTotal": 4096, "maxPerHost": 4096 }),
        );
    sims.iter().enumerate().fold(gateway, |gateway, (i, sim)| {
        gateway.device(device(&format!("D{i}"), sim.local_addr().port()))
    })
}

/// Starts the engine and waits for its first report; the time it took.
fn start(
    dir: &std::path::Path,
    config: &str,
    broker: &Broker,
    http: std::net::SocketAddr,
) -> (Engine, Duration) {
    let before = broker.reports();
    let started = Instant::now();
    let mut engine = Engine::start(dir, config, http);
    while broker.reports() == before {
        engine.assert_running();
        assert!(started.elapsed() < TIMEOUT, "no publish within {TIMEOUT:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
    (engine, started.elapsed())
}

fn main() {
    let devices = usize::try_from(env_u64("SLUICE_BENCH_DEVICES", 200))
        .expect("fits")
        .max(1);
    let swaps = env_u64("SLUICE_BENCH_SWAPS", 5).max(1);
    let rt = Runtime::new().expect("tokio runtime");
    let sim = Simulator::new(SimConfig {
        registers: 10,
        ..SimConfig::default()
    });
    sim.set_holding(0, &[7]);
    // One socket more than devices: the device-config reload adds a device on it.
    let sims = serve(&rt, &sim, devices + 1);
    let broker = Broker::start();
    let http = free_local_address();
    let scratch = Scratch::new("deploy");
    let gateway = config(&broker, http, &sims[..devices]);
    let text = gateway.yaml();
    println!(
        "deploy bench: {devices} devices polled every {PERIOD_MS} ms, {} logical CPUs",
        std::thread::available_parallelism().map_or(0, usize::from)
    );

    // Cold start, then a warm one from the artifact cache.
    let (engine, cold) = start(&scratch.0, &text, &broker, http);
    drop(engine);
    // Let the killed engine's last reports arrive before timing the next start.
    std::thread::sleep(Duration::from_secs(1));
    let (mut engine, warm) = start(&scratch.0, &text, &broker, http);
    println!("\n== start to first report ==");
    println!(
        "empty data directory (compile every component): {:>8.1} ms",
        cold.as_secs_f64() * 1e3
    );
    println!(
        "artifact cache present:                          {:>8.1} ms",
        warm.as_secs_f64() * 1e3
    );
    println!(
        "ratio cold/warm: {:.2}",
        cold.as_secs_f64() / warm.as_secs_f64()
    );

    // Swaps: alternate the shifted stage and the built-in one, uploading each
    // shifted version under a new version name (compiled afresh every time).
    let shifted =
        std::fs::read(PathBuf::from(env!("SLUICE_TEST_COMPONENTS")).join("shifted_scale.wasm"))
            .expect("the shifted_scale test component is built");
    engine.wait_all_online(devices, Duration::from_millis(100));
    let mut answers = Vec::new();
    let mut visible = Vec::new();
    for swap in 0..swaps {
        let path = format!("/components/scale/bench-{swap}");
        let started = Instant::now();
        let (status, body) = http_request(http, "PUT", &path, ADMIN, &shifted).expect("upload");
        assert_eq!(status, 200, "{body}");
        answers.push(started.elapsed());
        while !broker.last().contains("1007") {
            assert!(started.elapsed() < TIMEOUT, "the new stage never showed");
            std::thread::sleep(Duration::from_millis(1));
        }
        visible.push(started.elapsed());
        let (status, body) = http_request(
            http,
            "POST",
            "/components/scale/builtin-0.1.0/activate",
            ADMIN,
            b"",
        )
        .expect("rollback");
        assert_eq!(status, 200, "{body}");
        while broker.last().contains("1007") {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let mean =
        |d: &[Duration]| d.iter().map(Duration::as_secs_f64).sum::<f64>() / d.len() as f64 * 1e3;
    let max = |d: &[Duration]| d.iter().map(Duration::as_secs_f64).fold(0.0, f64::max) * 1e3;
    println!("\n== swap of a stage, {devices} devices, {swaps} uploads ==");
    println!(
        "upload answered (compile + rebuild all pipelines): mean {:.1} ms, max {:.1} ms",
        mean(&answers),
        max(&answers)
    );
    println!(
        "first report with the new stage:                   mean {:.1} ms, max {:.1} ms",
        mean(&visible),
        max(&visible)
    );
    println!(
        "in poll periods ({PERIOD_MS} ms): answered {:.2}, visible {:.2}",
        mean(&answers) / PERIOD_MS as f64,
        mean(&visible) / PERIOD_MS as f64
    );
    let added_visible = reload_devices(
        &scratch,
        &gateway,
        &broker,
        http,
        &sim,
        &sims[devices],
        swaps,
    );
    println!(
        "added device visible / stage swap visible: {:.2}",
        added_visible / mean(&visible)
    );
    let metrics = engine.metrics();
    println!("\nrounds skipped during the run: {}", metrics.skipped);
}

/// Adds a device to the config file and reloads, waits for its first report,
/// removes it and reloads again, `times` times; prints the latencies and
/// returns the mean time to the added device's first report, ms.
fn reload_devices(
    scratch: &Scratch,
    base: &Gateway,
    broker: &Broker,
    http: std::net::SocketAddr,
    sim: &Simulator,
    spare: &SimHandle,
    times: u64,
) -> f64 {
    let file = scratch.0.join("devices.yaml");
    let accepted_before = sim.accepted_connections();
    let (mut added, mut visible, mut removed) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..times {
        let id = format!("NEW{round}");
        let with = base
            .clone()
            .device(device(&id, spare.local_addr().port()))
            .yaml();
        std::fs::write(&file, with).expect("config");
        let started = Instant::now();
        let (status, body) = http_request(http, "POST", "/reload", ADMIN, b"").expect("reload");
        assert_eq!(status, 200, "{body}");
        added.push(started.elapsed());
        let topic = format!("P/{id}/property/post");
        while !broker.seen(&topic) {
            assert!(started.elapsed() < TIMEOUT, "the new device never reported");
            std::thread::sleep(Duration::from_millis(1));
        }
        visible.push(started.elapsed());
        std::fs::write(&file, base.yaml()).expect("config");
        let started = Instant::now();
        let (status, body) = http_request(http, "POST", "/reload", ADMIN, b"").expect("reload");
        assert_eq!(status, 200, "{body}");
        removed.push(started.elapsed());
    }
    let mean =
        |d: &[Duration]| d.iter().map(Duration::as_secs_f64).sum::<f64>() / d.len() as f64 * 1e3;
    let max = |d: &[Duration]| d.iter().map(Duration::as_secs_f64).fold(0.0, f64::max) * 1e3;
    println!("\n== device-config reload, {times} adds and removes ==");
    println!(
        "add answered (read, diff, build one device):  mean {:.1} ms, max {:.1} ms",
        mean(&added),
        max(&added)
    );
    println!(
        "first report of the added device:             mean {:.1} ms, max {:.1} ms",
        mean(&visible),
        max(&visible)
    );
    println!(
        "remove answered:                              mean {:.1} ms, max {:.1} ms",
        mean(&removed),
        max(&removed)
    );
    println!(
        "in poll periods ({PERIOD_MS} ms): add answered {:.2}, visible {:.2}",
        mean(&added) / PERIOD_MS as f64,
        mean(&visible) / PERIOD_MS as f64
    );
    println!(
        "connections accepted by the simulator meanwhile: {} (one per added device)",
        sim.accepted_connections() - accepted_before
    );
    mean(&visible)
}
