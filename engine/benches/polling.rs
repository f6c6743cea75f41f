//! Modbus TCP polling: the engine against a raw client loop, and the engine's
//! footprint on a large fleet.
//!
//! `cargo bench -p sluice --bench polling`. The simulator (`sluice::sim`) and an
//! embedded MQTT broker run in this process; the engine is the `sluice` binary
//! (built with the bench profile) run as a child process on a generated config.
//!
//! Part 1, throughput: D devices (one simulator socket each), 100 UINT16 tags at
//! holding registers 0..99 (one 100-register read per round).
//! - raw: D tokio-modbus clients, each reading the 100 registers in a tight loop;
//! - engine: every tag at `periodMs: 10` (the minimum), BATCH reports to MQTT.
//!
//! The engine's next round is due 10 ms after the previous one completed, so its
//! rate is capped by design at D x 1000 / (10 ms + round time) per second; the
//! cap is printed next to the measured rate. D is chosen so that the raw loop is
//! the harder workload: the ratio shows what the period floor leaves of the raw
//! capacity, and the CPU columns show what each poll costs.
//!
//! Part 2, footprint: 1000 devices x 100 tags every 1000 ms, each device on its
//! own simulator socket; CPU and memory of the engine process, rounds per second,
//! skipped and failed rounds.
//!
//! Environment (all optional): `SLUICE_BENCH_DEVICES` (50), `SLUICE_BENCH_SECONDS`
//! (10), `SLUICE_BENCH_FOOTPRINT_DEVICES` (1000), `SLUICE_BENCH_FOOTPRINT_TAGS`
//! (100), `SLUICE_BENCH_FOOTPRINT_PERIOD_MS` (1000), `SLUICE_BENCH_FOOTPRINT_SECONDS`
//! (30), `SLUICE_BENCH_ENGINE_THREADS` (2, the engine's `workerThreads`).
#![allow(clippy::print_stdout)]

mod common;

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Broker, Engine, Metrics, Scratch, env_u64, free_local_address, serve};
use sluice::sim::{SimConfig, SimHandle, Simulator};
use tokio::runtime::Runtime;
use tokio_modbus::prelude::*;

/// Registers read per round in part 1 (one merged read).
const TAGS: u16 = 100;
/// The engine's shortest tag period.
const MIN_PERIOD_MS: u64 = 10;
/// Warm-up of the raw loop before counting.
const WARMUP: Duration = Duration::from_secs(1);
/// A tag's period when its config leaves `periodMs` out.
const DEFAULT_PERIOD_MS: u64 = 1000;

/// Clock ticks per second for `/proc/PID/stat` times.
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse::<f64>().ok())
        .filter(|&hz| hz > 0.0)
        .unwrap_or(100.0)
}

/// utime + stime of a process (`self` or a pid), in clock ticks.
fn cpu_ticks(pid: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap_or_else(|e| panic!("reading /proc/{pid}/stat: {e}"));
    // Fields after the command name (which may contain spaces) start at field 3.
    let (_, rest) = stat
        .rsplit_once(')')
        .expect("/proc/PID/stat has a command name");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 here.
    let field = |i: usize| -> u64 {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .expect("utime/stime in /proc/PID/stat")
    };
    field(11) + field(12)
}

/// (VmRSS, VmHWM) of a process, in KiB.
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("reading /proc/{pid}/status: {e}"));
    let get = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|line| line.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{key} in /proc/{pid}/status"))
    };
    (get("VmRSS:"), get("VmHWM:"))
}

/// A gateway config: one device per address, `tags` UINT16 tags from 40001.
fn engine_config(
    addresses: &[SocketAddr],
    tags: u16,
    period_ms: u64,
    mqtt: SocketAddr,
    http: SocketAddr,
    wal: &Path,
    threads: u64,
) -> String {
    let max_connections = (addresses.len() * 2).max(64);
    let mut out = format!(
        "collector:
  workerThreads: {threads}
  reportMode: BATCH
  mqtt:
    brokerUrl: tcp://{mqtt}
    clientId: sluice-bench
  http:
    listen: {http}
  wal:
    dir: '{}'
  connections:
    maxTotal: {max_connections}
    maxPerHost: {max_connections}
devices:
",
        wal.display()
    );
    for (i, address) in addresses.iter().enumerate() {
        let _ = write!(
            out,
            "  - deviceId: dev-{i:05}
    productId: BENCH
    deviceNum: 'D{i:05}'
    channels:
      - channelId: sim
        protocol: modbus-tcp
        host: {}
        port: {}
        unitId: 1
        tags:
",
            address.ip(),
            address.port()
        );
        for t in 0..tags {
            let _ = write!(
                out,
                "          - {{ key: t{t}, address: '{}', dataType: UINT16",
                40001 + u32::from(t)
            );
            // The default period is left out: a smaller file to parse.
            if period_ms == DEFAULT_PERIOD_MS {
                out.push_str(" }\n");
            } else {
                let _ = writeln!(out, ", periodMs: {period_ms} }}");
            }
        }
    }
    out
}

struct RawResult {
    polls_per_s: f64,
    /// CPU of this process (clients and simulator) in percent of one core.
    cpu_percent: f64,
}

/// D tokio-modbus clients reading 100 holding registers in a tight loop.
fn raw_loop(rt: &Runtime, addresses: &[SocketAddr], seconds: u64, hz: f64) -> RawResult {
    let reads = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (count, elapsed, ticks) = rt.block_on(async {
        let mut tasks = Vec::with_capacity(addresses.len());
        for &address in addresses {
            let mut ctx = tokio::time::timeout(
                Duration::from_secs(10),
                tcp::connect_slave(address, Slave(1)),
            )
            .await
            .expect("raw client connects within 10 s")
            .expect("raw client connects");
            let (reads, errors, stop) =
                (Arc::clone(&reads), Arc::clone(&errors), Arc::clone(&stop));
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    match ctx.read_holding_registers(0, TAGS).await {
                        Ok(Ok(values)) if values.len() == usize::from(TAGS) => {
                            reads.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                let _ = ctx.disconnect().await;
            }));
        }
        tokio::time::sleep(WARMUP).await;
        let (c0, k0, t0) = (
            reads.load(Ordering::Relaxed),
            cpu_ticks("self"),
            Instant::now(),
        );
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        let (c1, k1, elapsed) = (
            reads.load(Ordering::Relaxed),
            cpu_ticks("self"),
            t0.elapsed(),
        );
        stop.store(true, Ordering::Relaxed);
        for task in tasks {
            tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("raw client stops within 10 s")
                .expect("raw client task");
        }
        (c1 - c0, elapsed, k1 - k0)
    });
    let errors = errors.load(Ordering::Relaxed);
    assert_eq!(errors, 0, "the raw loop saw {errors} failed reads");
    let secs = elapsed.as_secs_f64();
    RawResult {
        polls_per_s: count as f64 / secs,
        cpu_percent: ticks as f64 / hz / secs * 100.0,
    }
}

/// What one engine measurement window saw.
struct Window {
    secs: f64,
    before: Metrics,
    after: Metrics,
    engine_cpu_percent: f64,
    bench_cpu_percent: f64,
    mqtt_received: u64,
    startup: Duration,
}

impl Window {
    fn rounds_per_s(&self) -> f64 {
        (self.after.rounds - self.before.rounds) / self.secs
    }

    /// Mean round time over the window, in ms.
    fn mean_round_ms(&self) -> f64 {
        let count = self.after.round_count - self.before.round_count;
        if count > 0.0 {
            (self.after.round_seconds_sum - self.before.round_seconds_sum) / count * 1000.0
        } else {
            f64::NAN
        }
    }
}

/// Waits until the engine polled every device, then measures `seconds`.
fn measure(
    engine: &mut Engine,
    broker: &Broker,
    devices: usize,
    seconds: u64,
    hz: f64,
    startup_poll: Duration,
) -> Window {
    let startup = engine.wait_all_online(devices, startup_poll);
    let pid = engine.pid().to_string();
    let before = engine.metrics();
    let (e0, b0, m0, t0) = (
        cpu_ticks(&pid),
        cpu_ticks("self"),
        broker.received(),
        Instant::now(),
    );
    let deadline = t0 + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        std::thread::sleep(
            deadline
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(500)),
        );
        engine.assert_running();
    }
    let (e1, b1, m1, secs) = (
        cpu_ticks(&pid),
        cpu_ticks("self"),
        broker.received(),
        t0.elapsed().as_secs_f64(),
    );
    let after = engine.metrics();
    Window {
        secs,
        before,
        after,
        engine_cpu_percent: (e1 - e0) as f64 / hz / secs * 100.0,
        bench_cpu_percent: (b1 - b0) as f64 / hz / secs * 100.0,
        mqtt_received: m1 - m0,
        startup,
    }
}

fn throughput(rt: &Runtime, sim: &Simulator, broker: &Broker, hz: f64, threads: u64) {
    let devices = usize::try_from(env_u64("SLUICE_BENCH_DEVICES", 50))
        .expect("SLUICE_BENCH_DEVICES fits usize")
        .max(1);
    let seconds = env_u64("SLUICE_BENCH_SECONDS", 10).max(1);
    println!(
        "== Part 1: throughput, {devices} devices x {TAGS} UINT16 tags (one {TAGS}-register \
         read per poll), {seconds} s =="
    );
    let handles = serve(rt, sim, devices);
    let addresses: Vec<SocketAddr> = handles.iter().map(SimHandle::local_addr).collect();

    let raw = raw_loop(rt, &addresses, seconds, hz);

    let scratch = Scratch::new("throughput");
    let http = free_local_address();
    let config = engine_config(
        &addresses,
        TAGS,
        MIN_PERIOD_MS,
        broker.address,
        http,
        &scratch.0.join("wal"),
        threads,
    );
    let mut engine = Engine::start(&scratch.0, &config, http);
    let w = measure(
        &mut engine,
        broker,
        devices,
        seconds,
        hz,
        Duration::from_millis(100),
    );
    drop(engine);
    drop(handles);

    let engine_polls = w.rounds_per_s();
    let round_ms = w.mean_round_ms();
    let cap = devices as f64 * 1000.0 / (MIN_PERIOD_MS as f64 + round_ms);
    let mqtt_per_s = w.mqtt_received as f64 / w.secs;
    let published_per_s = (w.after.published - w.before.published) / w.secs;
    println!("side    polls/s    values/s  MQTT msgs/s  CPU% engine  CPU% bench proc");
    println!(
        "raw   {:>9.0}  {:>10.0}  {:>11}  {:>11}  {:>15.0}",
        raw.polls_per_s,
        raw.polls_per_s * f64::from(TAGS),
        "-",
        "-",
        raw.cpu_percent
    );
    println!(
        "engine{:>9.0}  {:>10.0}  {:>11.0}  {:>11.0}  {:>15.0}",
        engine_polls,
        engine_polls * f64::from(TAGS),
        mqtt_per_s,
        w.engine_cpu_percent,
        w.bench_cpu_percent
    );
    println!(
        "ratio engine/raw: {:.3}    (CPU% of one core; bench proc = simulator + raw clients for \
         raw, simulator + MQTT broker for engine)",
        engine_polls / raw.polls_per_s
    );
    println!(
        "engine cap by design: {devices} x 1000 / ({MIN_PERIOD_MS} ms + {round_ms:.2} ms mean \
         round) = {cap:.0} polls/s; measured = {:.0}% of the cap",
        engine_polls / cap * 100.0
    );
    println!(
        "engine: published {published_per_s:.0} msgs/s, dropped {:.0}, skipped {:.0}, failed \
         {:.0} rounds in the window; all devices polled {:.1} s after start",
        w.after.dropped - w.before.dropped,
        w.after.skipped - w.before.skipped,
        w.after.failed - w.before.failed,
        w.startup.as_secs_f64()
    );
    println!();
}

fn footprint(rt: &Runtime, sim: &Simulator, broker: &Broker, hz: f64, threads: u64) {
    let devices = usize::try_from(env_u64("SLUICE_BENCH_FOOTPRINT_DEVICES", 1000))
        .expect("SLUICE_BENCH_FOOTPRINT_DEVICES fits usize")
        .max(1);
    let tags = u16::try_from(env_u64("SLUICE_BENCH_FOOTPRINT_TAGS", 100))
        .expect("SLUICE_BENCH_FOOTPRINT_TAGS fits u16")
        .clamp(1, sim_registers());
    let period_ms =
        env_u64("SLUICE_BENCH_FOOTPRINT_PERIOD_MS", DEFAULT_PERIOD_MS).max(MIN_PERIOD_MS);
    let seconds = env_u64("SLUICE_BENCH_FOOTPRINT_SECONDS", 30).max(1);
    println!(
        "== Part 2: footprint, {devices} devices x {tags} tags every {period_ms} ms, \
         {seconds} s =="
    );
    let handles = serve(rt, sim, devices);
    let addresses: Vec<SocketAddr> = handles.iter().map(SimHandle::local_addr).collect();
    let scratch = Scratch::new("footprint");
    let http = free_local_address();
    let config = engine_config(
        &addresses,
        tags,
        period_ms,
        broker.address,
        http,
        &scratch.0.join("wal"),
        threads,
    );
    let mut engine = Engine::start(&scratch.0, &config, http);
    let w = measure(
        &mut engine,
        broker,
        devices,
        seconds,
        hz,
        Duration::from_millis(500),
    );
    let (rss, hwm) = memory_kib(engine.pid());
    drop(engine);
    drop(handles);

    let expected = devices as f64 * 1000.0 / period_ms as f64;
    println!(
        "rounds/s  (nominal)  values/s  CPU% engine  RSS MiB  peak RSS MiB  skipped  failed  \
         MQTT msgs/s  mean round ms"
    );
    println!(
        "{:>8.0}  {:>9.0}  {:>8.0}  {:>11.1}  {:>7.1}  {:>12.1}  {:>7.0}  {:>6.0}  {:>11.0}  \
         {:>13.2}",
        w.rounds_per_s(),
        expected,
        w.rounds_per_s() * f64::from(tags),
        w.engine_cpu_percent,
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0,
        w.after.skipped,
        w.after.failed,
        w.mqtt_received as f64 / w.secs,
        w.mean_round_ms()
    );
    println!(
        "(skipped/failed: totals since start; CPU% of one core; bench proc (simulator + broker) \
         CPU {:.1}%; all devices polled {:.1} s after start)",
        w.bench_cpu_percent,
        w.startup.as_secs_f64()
    );
    println!();
}

/// Size of the simulator's tables: every tag of either part fits.
fn sim_registers() -> u16 {
    125
}

fn main() {
    let hz = clock_ticks();
    let threads = env_u64("SLUICE_BENCH_ENGINE_THREADS", 2).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let sim = Simulator::new(SimConfig {
        registers: sim_registers(),
        response_delay: Duration::ZERO,
        max_connections: 1 << 16,
    });
    let values: Vec<u16> = (0..sim_registers()).map(|i| 1000 + i).collect();
    sim.set_holding(0, &values);
    let broker = Broker::start();
    println!(
        "polling bench: {} logical CPUs, engine workerThreads {threads}, loopback, \
         CLK_TCK {hz}",
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    throughput(&rt, &sim, &broker, hz, threads);
    footprint(&rt, &sim, &broker, hz, threads);
}
