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

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sluice::broker::EmbeddedBroker;
use sluice::sim::{SimConfig, SimHandle, Simulator};
use tokio::runtime::Runtime;
use tokio_modbus::prelude::*;

/// Registers read per round in part 1 (one merged read).
const TAGS: u16 = 100;
/// The engine's shortest tag period.
const MIN_PERIOD_MS: u64 = 10;
/// Longest wait for the engine to have polled every device once.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(90);
/// Warm-up of the raw loop before counting.
const WARMUP: Duration = Duration::from_secs(1);
/// A tag's period when its config leaves `periodMs` out.
const DEFAULT_PERIOD_MS: u64 = 1000;

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text:?} is not a non-negative integer")),
        Err(_) => default,
    }
}

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

/// A free loopback address (bound then released for the engine to take).
fn free_local_address() -> SocketAddr {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind a free port");
    listener.local_addr().expect("local address")
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let dir = std::env::temp_dir().join(format!(
            "sluice-bench-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `sluice run` as a child process, killed on every exit path (drop).
struct Engine {
    child: Child,
    log: PathBuf,
    http: SocketAddr,
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Engine {
    fn start(dir: &Path, config: &str, http: SocketAddr) -> Self {
        let config_path = dir.join("devices.yaml");
        std::fs::write(&config_path, config).expect("write the engine config");
        let log = dir.join("engine.log");
        let file = std::fs::File::create(&log).expect("create the engine log");
        let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["run", "--config"])
            .arg(&config_path)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .current_dir(dir)
            .spawn()
            .expect("start the sluice binary");
        Self { child, log, http }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last lines of the engine's log, for failure messages.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Panics (with the log) if the engine has exited.
    fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "sluice exited with {status}; log tail:\n{}",
                self.log_tail()
            );
        }
    }

    fn metrics(&mut self) -> Metrics {
        self.assert_running();
        match http_get(self.http, "/metrics") {
            Ok(body) => Metrics::parse(&body),
            Err(error) => panic!("GET /metrics: {error}; log tail:\n{}", self.log_tail()),
        }
    }

    /// Waits until every one of `devices` devices answered a round.
    fn wait_all_online(&mut self, devices: usize, poll: Duration) -> Duration {
        let start = Instant::now();
        let mut last = String::from("no answer from /metrics yet");
        loop {
            self.assert_running();
            if let Ok(body) = http_get(self.http, "/metrics") {
                let m = Metrics::parse(&body);
                if m.devices == devices && m.online == devices {
                    return start.elapsed();
                }
                last = format!("{} of {devices} devices online", m.online);
            }
            if start.elapsed() > STARTUP_TIMEOUT {
                panic!(
                    "the engine did not poll every device within {STARTUP_TIMEOUT:?} ({last}); \
                     log tail:\n{}",
                    self.log_tail()
                );
            }
            std::thread::sleep(poll);
        }
    }
}

/// `GET path` over HTTP/1.1 with a raw socket; the body of a 200 answer.
fn http_get(address: SocketAddr, path: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5))
        .map_err(|e| format!("connect {address}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("send: {e}"))?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8(raw).map_err(|e| format!("not UTF-8: {e}"))?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| "no end of headers".to_owned())?;
    let status = head.lines().next().unwrap_or_default();
    if !status.contains(" 200 ") {
        return Err(format!("answer {status:?}"));
    }
    let chunked = head.lines().any(|line| {
        let line = line.to_ascii_lowercase();
        line.starts_with("transfer-encoding:") && line.contains("chunked")
    });
    if chunked {
        dechunk(body)
    } else {
        Ok(body.to_owned())
    }
}

/// Decodes a chunked HTTP/1.1 body.
fn dechunk(mut rest: &str) -> Result<String, String> {
    let mut out = String::new();
    loop {
        let (size, after) = rest
            .split_once("\r\n")
            .ok_or_else(|| "truncated chunk size".to_owned())?;
        let size = usize::from_str_radix(size.split(';').next().unwrap_or_default().trim(), 16)
            .map_err(|e| format!("chunk size {size:?}: {e}"))?;
        if size == 0 {
            return Ok(out);
        }
        let chunk = after
            .get(..size)
            .ok_or_else(|| "truncated chunk".to_owned())?;
        out.push_str(chunk);
        rest = after.get(size + 2..).unwrap_or_default();
    }
}

/// The figures this bench reads from `/metrics`, summed over devices.
#[derive(Debug, Default, Clone)]
struct Metrics {
    rounds: f64,
    skipped: f64,
    failed: f64,
    round_seconds_sum: f64,
    round_count: f64,
    published: f64,
    dropped: f64,
    /// Devices listed with a `sluice_device_online` gauge.
    devices: usize,
    /// Of those, the ones whose last round answered.
    online: usize,
}

impl Metrics {
    fn parse(body: &str) -> Self {
        let mut sums: HashMap<&str, f64> = HashMap::new();
        let mut m = Self::default();
        for line in body.lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.trim().parse::<f64>() else {
                continue;
            };
            let name = series.split('{').next().unwrap_or_default();
            if name == "sluice_device_online" {
                m.devices += 1;
                if value >= 1.0 {
                    m.online += 1;
                }
            }
            *sums.entry(name).or_default() += value;
        }
        let sum = |name: &str| sums.get(name).copied().unwrap_or(0.0);
        m.rounds = sum("sluice_rounds_total");
        m.skipped = sum("sluice_rounds_skipped_total");
        m.failed = sum("sluice_rounds_failed_total");
        m.round_seconds_sum = sum("sluice_round_seconds_sum");
        m.round_count = sum("sluice_round_seconds_count");
        m.published = sum("sluice_mqtt_published_total");
        m.dropped = sum("sluice_mqtt_dropped_total");
        m
    }
}

/// The embedded broker, with a thread that drains and counts what it receives.
struct Broker {
    address: SocketAddr,
    received: Arc<AtomicU64>,
}

impl Broker {
    fn start() -> Self {
        let broker = EmbeddedBroker::start(free_local_address()).expect("start the MQTT broker");
        let address = broker.address();
        let received = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&received);
        std::thread::Builder::new()
            .name("bench-mqtt-drain".into())
            .spawn(move || {
                while broker.messages().recv().is_ok() {
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            })
            .expect("spawn the MQTT drain thread");
        Self { address, received }
    }

    fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }
}

/// Starts one listening socket per device on a shared simulator.
fn serve(rt: &Runtime, sim: &Simulator, devices: usize) -> Vec<SimHandle> {
    rt.block_on(async {
        let mut handles = Vec::with_capacity(devices);
        for _ in 0..devices {
            handles.push(
                sim.serve((Ipv4Addr::LOCALHOST, 0).into())
                    .await
                    .expect("simulator listens"),
            );
        }
        handles
    })
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
