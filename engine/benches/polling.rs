//! Modbus TCP polling at equal load: what a round costs the engine against
//! what a poll costs a raw tokio-modbus client on the same fleet and period,
//! with the engine's memory and publish lag.
//!
//! `cargo bench -p sluice --bench polling`. For each fleet size D (100 and
//! 1,000): D devices, one simulator socket each, 100 UINT16 tags at holding
//! registers 0..99 (one 100-register read a round), every 1000 ms.
//! - raw: D tokio-modbus clients in a process of their own (this bench run
//!   with `--raw-clients`), each reading the registers once a period, their
//!   starts spread over the period;
//! - engine: the `sluice` binary (bench profile) as a child process on a
//!   generated config: WAL on, the default pipeline, BATCH reports to an
//!   MQTT broker in this process.
//!
//! Printed for each side: rounds (polls) per second, CPU as % of one core and
//! per round, the engine/raw ratio of CPU per round, memory, and for the engine
//! the publish lag (values read to report at the broker: p50, p90, p99) and
//! skipped and failed rounds. The simulator and the broker run in this process,
//! outside both figures. With 1,000 devices at the default tags and period,
//! the hot path's targets follow, each beside its figure.
//!
//! Environment (all optional): `SLUICE_BENCH_FLEETS` (`100,1000`),
//! `SLUICE_BENCH_SECONDS` (30), `SLUICE_BENCH_TAGS` (100),
//! `SLUICE_BENCH_PERIOD_MS` (1000), `SLUICE_BENCH_ENGINE_THREADS` (1, the
//! engine's default `workerThreads`), `SLUICE_BENCH_GROUP_COMMIT_MS` (the engine's
//! default; the WAL's `groupCommitMs`, which trades publish lag for commits),
//! `SLUICE_BENCH_CACHE_MB` (the engine's default; the store's `cacheMb`),
//! `SLUICE_BENCH_RAW_VALUE` (`1`: reports carry `rawValue`),
//! `SLUICE_BENCH_ENGINE` (the absolute path of another `sluice` binary to
//! run, e.g. a saved copy of the build before a change), `SLUICE_BENCH_NODE_RED`
//! (see [`node_red`]), `SLUICE_BENCH_TLS` (`1`: the engine reaches the broker
//! over TLS, through a front in this process that ends TLS with a certificate
//! made by the `openssl` command and forwards the bytes: its CPU is this
//! process's, not the engine's).
//!
//! - node-red: when installed (`scripts/setup-node-red.sh`), Node-RED with
//!   node-red-contrib-modbus on the same sockets, building the same report
//!   and publishing it to the same broker: the peer the targets' ratios name.
#![allow(clippy::print_stdout)]

mod common;
mod node_red;

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{
    Broker, Engine, Metrics, Scratch, clock_ticks, cpu_ticks, env_u64, free_local_address,
    memory_kib, quantile, serve,
};
use sluice::sim::{SimConfig, SimHandle, Simulator};
use tokio_modbus::prelude::*;

/// The period a tag has when its config leaves `periodMs` out.
const DEFAULT_PERIOD_MS: u64 = 1000;
/// The raw clients run this long before their window opens (every client
/// connected and a whole period behind them).
const RAW_WARMUP: Duration = Duration::from_secs(2);
/// Size of the simulator's tables: the most registers one read takes.
const SIM_REGISTERS: u16 = 125;
/// How long the first report may take to reach the broker once every device is online.
const REPORTS_TIMEOUT: Duration = Duration::from_secs(30);

/// The load each side is measured at: `tags` UINT16 tags a device, read every
/// `period_ms`, for `seconds` a side.
#[derive(Debug, Clone, Copy)]
struct Load {
    tags: u16,
    period_ms: u64,
    seconds: u64,
}

/// The engine's settings under test (`None`: the engine's default).
#[derive(Debug, Clone, Copy)]
struct Tuning {
    /// `workerThreads`.
    threads: u64,
    /// `wal.groupCommitMs`.
    group_commit_ms: Option<u64>,
    /// `store.cacheMb`.
    cache_mb: Option<u64>,
    /// `rawValue`: reports carry each value's raw value.
    raw_value: bool,
}

/// Where the engine publishes: the broker, straight or through the TLS front.
struct Uplink<'a> {
    broker: &'a Broker,
    /// What the engine connects to.
    address: SocketAddr,
    /// Over TLS: the CA the front's certificate is signed with.
    ca: Option<PathBuf>,
}

impl Uplink<'_> {
    /// `collector.mqtt`'s lines of the broker (`brokerUrl`, `tls`).
    fn yaml(&self) -> String {
        match &self.ca {
            None => format!("brokerUrl: tcp://{}", self.address),
            Some(ca) => format!(
                "brokerUrl: mqtts://{}\n    tls: {{ caFile: '{}' }}",
                self.address,
                ca.display()
            ),
        }
    }
}

/// A TLS front to `broker` on a free port, its certificate (for 127.0.0.1)
/// and CA made by `scripts/make-test-certs.sh` in `dir`: what the engine
/// meets at a TLS broker.
fn tls_front(
    rt: &tokio::runtime::Runtime,
    broker: SocketAddr,
    dir: &Path,
) -> (SocketAddr, PathBuf) {
    let made = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/make-test-certs.sh"))
        .arg(dir)
        .output()
        .expect("bash runs");
    assert!(
        made.status.success(),
        "make-test-certs.sh: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    let certificate =
        sluice::tls::ReloadingCertificate::new(&dir.join("trusted.pem"), &dir.join("trusted.key"))
            .expect("the front's certificate");
    let config = Arc::new(certificate)
        .server_config()
        .expect("a server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let address = free_local_address();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(address))
        .expect("the front listens");
    rt.spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut client) = acceptor.accept(stream).await else {
                    return;
                };
                if let Ok(mut upstream) = tokio::net::TcpStream::connect(broker).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                }
            });
        }
    });
    (address, dir.join("ca.pem"))
}

/// A gateway config: one device per address, `tags` UINT16 tags from 40001.
fn engine_config(
    addresses: &[SocketAddr],
    tags: u16,
    period_ms: u64,
    mqtt: &Uplink<'_>,
    http: SocketAddr,
    wal: &Path,
    tuning: Tuning,
) -> String {
    let Tuning {
        threads,
        group_commit_ms,
        cache_mb,
        raw_value,
    } = tuning;
    let max_connections = (addresses.len() * 2).max(64);
    let mut out = format!(
        "collector:
  workerThreads: {threads}
  reportMode: BATCH{}
  mqtt:
    {}
    clientId: sluice-bench
  http:
    listen: {http}
  wal:
    dir: '{}'{}{}
  connections:
    maxTotal: {max_connections}
    maxPerHost: {max_connections}
devices:
",
        if raw_value { "\n  rawValue: true" } else { "" },
        mqtt.yaml(),
        wal.display(),
        group_commit_ms.map_or(String::new(), |ms| format!("\n    groupCommitMs: {ms}")),
        cache_mb.map_or(String::new(), |mb| format!("\n  store:\n    cacheMb: {mb}"))
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

/// A tokio runtime of two workers: the raw clients' and the simulator's.
fn two_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// What the raw clients measured of themselves.
struct RawResult {
    polls_per_s: f64,
    /// CPU of the clients' process, in % of one core.
    cpu_percent: f64,
}

impl RawResult {
    fn cpu_us_per_poll(&self) -> f64 {
        self.cpu_percent / 100.0 / self.polls_per_s * 1e6
    }
}

/// The raw side, in the child process: one paced client per address, then the
/// window's polls, failures, CPU ticks and length printed as `key value` lines.
fn raw_clients(args: &[String]) {
    let number = |i: usize| -> u64 {
        args.get(i)
            .and_then(|a| a.parse().ok())
            .expect("--raw-clients PERIOD_MS SECONDS TAGS ADDRESS...")
    };
    let (period, seconds, tags) = (
        Duration::from_millis(number(0)),
        number(1),
        u16::try_from(number(2)).expect("TAGS fits u16"),
    );
    let addresses: Vec<SocketAddr> = args[3..]
        .iter()
        .map(|a| a.parse().expect("a socket address"))
        .collect();
    let rt = two_thread_runtime();
    let polls = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let clients = addresses.len() as u32;
    let (count, failed, ticks, secs) = rt.block_on(async {
        let mut tasks = Vec::with_capacity(addresses.len());
        for (i, &address) in addresses.iter().enumerate() {
            let mut ctx = tokio::time::timeout(
                Duration::from_secs(10),
                tcp::connect_slave(address, Slave(1)),
            )
            .await
            .expect("raw client connects within 10 s")
            .expect("raw client connects");
            let (polls, errors, stop) =
                (Arc::clone(&polls), Arc::clone(&errors), Arc::clone(&stop));
            let offset = period / clients * i as u32;
            tasks.push(tokio::spawn(async move {
                let start = tokio::time::Instant::now() + offset;
                let mut ticks = tokio::time::interval_at(start, period);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                while !stop.load(Ordering::Relaxed) {
                    ticks.tick().await;
                    match ctx.read_holding_registers(0, tags).await {
                        Ok(Ok(values)) if values.len() == usize::from(tags) => {
                            polls.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                let _ = ctx.disconnect().await;
            }));
        }
        tokio::time::sleep(RAW_WARMUP).await;
        let (p0, e0, k0, t0) = (
            polls.load(Ordering::Relaxed),
            errors.load(Ordering::Relaxed),
            cpu_ticks("self"),
            Instant::now(),
        );
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        let (p1, e1, k1, secs) = (
            polls.load(Ordering::Relaxed),
            errors.load(Ordering::Relaxed),
            cpu_ticks("self"),
            t0.elapsed().as_secs_f64(),
        );
        stop.store(true, Ordering::Relaxed);
        for task in tasks {
            tokio::time::timeout(period + Duration::from_secs(10), task)
                .await
                .expect("raw client stops")
                .expect("raw client task");
        }
        (p1 - p0, e1 - e0, k1 - k0, secs)
    });
    println!("polls {count}");
    println!("errors {failed}");
    println!("ticks {ticks}");
    println!("secs {secs}");
}

/// Runs the raw clients against `addresses` in a child process.
fn raw_side(addresses: &[SocketAddr], load: Load, hz: f64) -> RawResult {
    let Load {
        tags,
        period_ms,
        seconds,
    } = load;
    let output = Command::new(std::env::current_exe().expect("bench binary"))
        .arg("--raw-clients")
        .args([period_ms.to_string(), seconds.to_string(), tags.to_string()])
        .args(addresses.iter().map(SocketAddr::to_string))
        .output()
        .expect("run the raw clients");
    assert!(output.status.success(), "raw clients: {output:?}");
    let text = String::from_utf8_lossy(&output.stdout);
    let figure = |key: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("`{key}` in the raw clients' output: {text}"))
    };
    assert_eq!(figure("errors"), 0.0, "the raw clients saw failed reads");
    let secs = figure("secs");
    RawResult {
        polls_per_s: figure("polls") / secs,
        cpu_percent: figure("ticks") / hz / secs * 100.0,
    }
}

/// What one engine measurement window saw.
struct Window {
    secs: f64,
    before: Metrics,
    after: Metrics,
    engine_cpu_percent: f64,
    startup: Duration,
    /// Publish lags of the window's reports, ms.
    lags: Vec<i64>,
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
fn measure(engine: &mut Engine, broker: &Broker, devices: usize, seconds: u64, hz: f64) -> Window {
    let startup = engine.wait_all_online(devices, Duration::from_millis(200));
    wait_reports_flow(engine, broker);
    let pid = engine.pid().to_string();
    let before = engine.metrics();
    broker.record_lags();
    let (e0, t0) = (cpu_ticks(&pid), Instant::now());
    let deadline = t0 + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        std::thread::sleep(
            deadline
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(500)),
        );
        engine.assert_running();
    }
    let (e1, secs) = (cpu_ticks(&pid), t0.elapsed().as_secs_f64());
    let lags = broker.take_lags();
    let after = engine.metrics();
    Window {
        secs,
        before,
        after,
        engine_cpu_percent: (e1 - e0) as f64 / hz / secs * 100.0,
        startup,
        lags,
    }
}

/// Waits until reports reach the broker. An engine whose uplink is not connected
/// keeps every report for later and publishes none: its figures would say nothing
/// of the hot path, so the run stops with the engine's log instead.
fn wait_reports_flow(engine: &mut Engine, broker: &Broker) {
    let (start, seen) = (Instant::now(), broker.reports());
    while broker.reports() == seen {
        engine.assert_running();
        assert!(
            start.elapsed() < REPORTS_TIMEOUT,
            "no report reached the broker within {REPORTS_TIMEOUT:?} of every device being \
             online; log tail:\n{}",
            engine.log_tail()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The engine's figures of one fleet size that the hot-path targets name, and
/// Node-RED's CPU and memory on the same fleet when it ran.
struct EngineFigures {
    cpu_percent: f64,
    us_per_round: f64,
    rss_mib: f64,
    lag_p50_ms: f64,
    node_red: Option<(f64, f64)>,
}

/// Fleet size, tags a device and period the targets are set for.
const TARGET_SETTING: (usize, u16, u64) = (1000, 100, 1000);

impl EngineFigures {
    /// Prints each target of the hot path beside its figure.
    fn print_targets(&self) {
        println!();
        println!("target (1,000 devices x 100 tags every 1 s)   figure     met");
        for (label, figure, limit, unit) in [
            ("engine CPU <= 10% of one core", self.cpu_percent, 10.0, "%"),
            ("CPU per round <= 100 us", self.us_per_round, 100.0, " us"),
            ("RSS <= 64 MiB", self.rss_mib, 64.0, " MiB"),
            ("publish lag p50 <= 5 ms", self.lag_p50_ms, 5.0, " ms"),
        ] {
            let met = if figure <= limit {
                "yes".to_owned()
            } else {
                format!("NO ({:.1}x the limit)", figure / limit)
            };
            println!("{label:<44}{:>10}   {met}", format!("{figure:.1}{unit}"));
        }
        let Some((cpu, rss)) = self.node_red else {
            return;
        };
        for (label, figure, limit) in [
            ("engine CPU <= 0.2x Node-RED's", self.cpu_percent / cpu, 0.2),
            ("engine RSS <= 0.15x Node-RED's", self.rss_mib / rss, 0.15),
        ] {
            let met = if figure <= limit {
                "yes".to_owned()
            } else {
                format!("NO ({:.1}x the limit)", figure / limit)
            };
            println!("{label:<44}{:>10}   {met}", format!("{figure:.3}x"));
        }
    }
}

/// What Node-RED did on the fleet: reports a second, CPU, memory, lags.
struct PeerWindow {
    reports_per_s: f64,
    cpu_percent: f64,
    /// The median of its RSS read every 500 ms in the window (its garbage
    /// collector moves it by 100 MiB and more), and its peak, KiB.
    memory_kib: (u64, u64),
    lags: Vec<i64>,
}

/// Node-RED on the fleet's sockets, once its reports flow: one window of `seconds`.
fn node_red_side(
    install: &Path,
    broker: &Broker,
    addresses: &[SocketAddr],
    load: Load,
    hz: f64,
) -> PeerWindow {
    let Load {
        tags,
        period_ms,
        seconds,
    } = load;
    let scratch = Scratch::new("polling-node-red");
    let flow = node_red::flow(addresses, tags, period_ms, broker.address);
    let mut peer = node_red::NodeRed::start(install, &scratch.0, &flow, free_local_address());
    peer.wait_flowing(
        &scratch.0,
        addresses.len() as u64,
        Duration::from_millis(period_ms),
        &|| broker.reports(),
    );
    let pid = peer.pid().to_string();
    broker.record_lags();
    let (r0, k0, t0) = (broker.reports(), cpu_ticks(&pid), Instant::now());
    let deadline = t0 + Duration::from_secs(seconds);
    let mut rss = Vec::new();
    while Instant::now() < deadline {
        std::thread::sleep(
            deadline
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(500)),
        );
        rss.push(memory_kib(peer.pid()).0);
    }
    let (r1, k1, secs) = (
        broker.reports(),
        cpu_ticks(&pid),
        t0.elapsed().as_secs_f64(),
    );
    rss.sort_unstable();
    PeerWindow {
        reports_per_s: (r1 - r0) as f64 / secs,
        cpu_percent: (k1 - k0) as f64 / hz / secs * 100.0,
        memory_kib: (rss[rss.len() / 2], memory_kib(peer.pid()).1),
        lags: broker.take_lags(),
    }
}

/// One fleet size: the raw clients, then the engine, on the same simulator
/// sockets; prints a line for each and returns the engine's figures.
fn fleet(
    rt: &tokio::runtime::Runtime,
    sim: &Simulator,
    uplink: &Uplink<'_>,
    devices: usize,
    load: Load,
    hz: f64,
    threads: u64,
) -> EngineFigures {
    let Load {
        tags,
        period_ms,
        seconds,
    } = load;
    let broker = uplink.broker;
    let handles = serve(rt, sim, devices);
    let addresses: Vec<SocketAddr> = handles.iter().map(SimHandle::local_addr).collect();
    let raw = raw_side(&addresses, load, hz);

    let scratch = Scratch::new("polling");
    let http = free_local_address();
    let config = engine_config(
        &addresses,
        tags,
        period_ms,
        uplink,
        http,
        &scratch.0.join("wal"),
        Tuning {
            threads,
            group_commit_ms: std::env::var("SLUICE_BENCH_GROUP_COMMIT_MS")
                .ok()
                .and_then(|v| v.parse().ok()),
            cache_mb: std::env::var("SLUICE_BENCH_CACHE_MB")
                .ok()
                .and_then(|v| v.parse().ok()),
            raw_value: std::env::var("SLUICE_BENCH_RAW_VALUE").is_ok_and(|v| v == "1"),
        },
    );
    let mut engine = Engine::start(&scratch.0, &config, http);
    let mut w = measure(&mut engine, broker, devices, seconds, hz);
    let (rss, hwm) = memory_kib(engine.pid());
    drop(engine);
    let peer =
        node_red::install().map(|install| node_red_side(&install, broker, &addresses, load, hz));
    drop(handles);

    let rounds = w.rounds_per_s();
    let engine_us = w.engine_cpu_percent / 100.0 / rounds * 1e6;
    let mut lags = std::mem::take(&mut w.lags);
    lags.sort_unstable();
    println!(
        "{devices:>7}  raw     {:>8.0}  {:>9.1}  {:>12.1}  {:>6}  {:>7}  {:>8}  {:>18}  {:>7}  {:>6}",
        raw.polls_per_s,
        raw.cpu_percent,
        raw.cpu_us_per_poll(),
        "1.0",
        "-",
        "-",
        "-",
        "-",
        "-"
    );
    println!(
        "{devices:>7}  engine  {:>8.0}  {:>9.1}  {:>12.1}  {:>6.1}  {:>7.1}  {:>8.1}  {:>18}  {:>7.0}  {:>6.0}",
        rounds,
        w.engine_cpu_percent,
        engine_us,
        engine_us / raw.cpu_us_per_poll(),
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0,
        format!(
            "{:.0} / {:.0} / {:.0}",
            quantile(&lags, 0.5),
            quantile(&lags, 0.9),
            quantile(&lags, 0.99)
        ),
        w.after.skipped - w.before.skipped,
        w.after.failed - w.before.failed,
    );
    println!(
        "         (engine: all {devices} devices polled {:.1} s after start, {} reports at the \
         broker in the window, mean round {:.2} ms)",
        w.startup.as_secs_f64(),
        lags.len(),
        w.mean_round_ms()
    );
    let node_red = match peer {
        Ok(mut p) => {
            p.lags.sort_unstable();
            let us = p.cpu_percent / 100.0 / p.reports_per_s * 1e6;
            let (peer_rss, peer_hwm) = p.memory_kib;
            println!(
                "{devices:>7}  node-red{:>8.0}  {:>9.1}  {:>12.1}  {:>6.1}  {:>7.1}  {:>8.1}  {:>18}  {:>7}  {:>6}",
                p.reports_per_s,
                p.cpu_percent,
                us,
                us / raw.cpu_us_per_poll(),
                peer_rss as f64 / 1024.0,
                peer_hwm as f64 / 1024.0,
                format!(
                    "{:.0} / {:.0} / {:.0}",
                    quantile(&p.lags, 0.5),
                    quantile(&p.lags, 0.9),
                    quantile(&p.lags, 0.99)
                ),
                "-",
                "-"
            );
            println!(
                "         (engine / node-red: CPU {:.3}x, RSS {:.3}x)",
                w.engine_cpu_percent / p.cpu_percent,
                rss as f64 / peer_rss as f64
            );
            Some((p.cpu_percent, peer_rss as f64 / 1024.0))
        }
        Err(reason) => {
            println!("{devices:>7}  node-red  (left out: {reason})");
            None
        }
    };
    EngineFigures {
        cpu_percent: w.engine_cpu_percent,
        us_per_round: engine_us,
        rss_mib: rss as f64 / 1024.0,
        lag_p50_ms: quantile(&lags, 0.5),
        node_red,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--raw-clients") {
        return raw_clients(&args[at + 1..]);
    }
    let hz = clock_ticks();
    let threads = env_u64("SLUICE_BENCH_ENGINE_THREADS", 1).max(1);
    let tags = u16::try_from(env_u64("SLUICE_BENCH_TAGS", 100))
        .unwrap_or(SIM_REGISTERS)
        .clamp(1, SIM_REGISTERS);
    let period_ms = env_u64("SLUICE_BENCH_PERIOD_MS", DEFAULT_PERIOD_MS).max(10);
    let seconds = env_u64("SLUICE_BENCH_SECONDS", 30).max(1);
    let fleets: Vec<usize> = std::env::var("SLUICE_BENCH_FLEETS")
        .unwrap_or_else(|_| "100,1000".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .filter(|&n| n > 0)
        .collect();
    let rt = two_thread_runtime();
    let sim = Simulator::new(SimConfig {
        registers: SIM_REGISTERS,
        response_delay: Duration::ZERO,
        max_connections: 1 << 16,
    });
    let values: Vec<u16> = (0..SIM_REGISTERS).map(|i| 1000 + i).collect();
    sim.set_holding(0, &values);
    let broker = Broker::start();
    let front = Scratch::new("polling-tls");
    let tls = std::env::var("SLUICE_BENCH_TLS").is_ok_and(|v| v == "1");
    let uplink = if tls {
        let (address, ca) = tls_front(&rt, broker.address, &front.0);
        Uplink {
            broker: &broker,
            address,
            ca: Some(ca),
        }
    } else {
        Uplink {
            broker: &broker,
            address: broker.address,
            ca: None,
        }
    };
    println!(
        "polling at equal load: {tags} UINT16 tags a device (one read a round) every \
         {period_ms} ms, {seconds} s a side; {} logical CPUs, engine workerThreads {threads}, \
         loopback, CLK_TCK {hz}; MQTT {}",
        std::thread::available_parallelism().map_or(0, usize::from),
        if tls { "over TLS" } else { "plain" }
    );
    println!(
        "devices  side    rounds/s  CPU% core  CPU us/round   ratio  RSS MiB  peak MiB  \
         lag p50/p90/p99 ms  skipped  failed"
    );
    let mut targeted = None;
    for devices in fleets {
        let figures = fleet(
            &rt,
            &sim,
            &uplink,
            devices,
            Load {
                tags,
                period_ms,
                seconds,
            },
            hz,
            threads,
        );
        if (devices, tags, period_ms) == TARGET_SETTING {
            targeted = Some(figures);
        }
    }
    println!(
        "(ratio: the engine's CPU per round over the raw client's CPU per poll; CPU% of one \
         core; lag: values read to report at the broker)"
    );
    if let Some(figures) = targeted {
        figures.print_targets();
    }
}
