//! One tenant's hostile component against another tenant's round latency.
//!
//! `cargo bench -p sluice --bench tenants`. Two tenants, `SLUICE_BENCH_DEVICES`
//! (20) devices each, every device on its own simulator socket, polled every 100 ms,
//! the release binary as a child process. Phases 1 and 2: both tenants' pipelines
//! behave (phase 2 against phase 1 is how much two calm phases differ here);
//! phase 3: tenant 1 deploys a stage that loops until its CPU budget stops it
//! (quarantined after 10 failures in a row, tried again every 60 s). Each phase runs
//! `SLUICE_BENCH_SECONDS` (15). The figures: tenant 2's round latency in phase 3
//! against phase 2 (p50, p99 and the mean, the quantiles interpolated in the
//! buckets of `sluice_round_seconds`), and how long after tenant 1's first failed
//! call its pool was quarantined (`/metrics` and `/health` read every 10 ms).
//! `SLUICE_BENCH_ENGINE_THREADS` (1, the engine's default) sets its `workerThreads`;
//! `SLUICE_BENCH_FUEL` (20,000,000, the default) tenant 1's `fuelPerCall`, so how
//! long each looping call runs before its budget stops it.
#![allow(clippy::print_stdout)]

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{Broker, Engine, Scratch, env_u64, free_local_address, http_get, http_request, serve};
use sluice::sim::{SimConfig, Simulator};
use tokio::runtime::Runtime;

const ADMIN: &str = "bench-admin";

/// Tenant 2's rounds: the cumulative bucket counts of `sluice_round_seconds`
/// (upper bound in s, count), summed over its devices, with the sum and count.
#[derive(Debug, Clone, Default)]
struct Rounds {
    buckets: Vec<(f64, f64)>,
    sum: f64,
    count: f64,
}

impl Rounds {
    /// Of the devices whose id starts with `prefix`.
    fn read(metrics: &str, prefix: &str) -> Self {
        let mut rounds = Rounds::default();
        let mine = format!("device=\"{prefix}");
        for line in metrics.lines().filter(|l| l.contains(&mine)) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            if series.starts_with("sluice_round_seconds_sum{") {
                rounds.sum += value;
            } else if series.starts_with("sluice_round_seconds_count{") {
                rounds.count += value;
            } else if series.starts_with("sluice_round_seconds_bucket{") {
                let le = series
                    .split("le=\"")
                    .nth(1)
                    .and_then(|rest| rest.split('"').next())
                    .map(|le| le.parse::<f64>().unwrap_or(f64::INFINITY));
                if let Some(le) = le {
                    match rounds.buckets.iter_mut().find(|(bound, _)| *bound == le) {
                        Some(bucket) => bucket.1 += value,
                        None => rounds.buckets.push((le, value)),
                    }
                }
            }
        }
        rounds.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        rounds
    }

    /// What happened between `earlier` and `self`.
    fn since(&self, earlier: &Rounds) -> Rounds {
        let before = |le: f64| {
            earlier
                .buckets
                .iter()
                .find(|(bound, _)| *bound == le)
                .map_or(0.0, |b| b.1)
        };
        Rounds {
            buckets: self
                .buckets
                .iter()
                .map(|&(le, n)| (le, n - before(le)))
                .collect(),
            sum: self.sum - earlier.sum,
            count: self.count - earlier.count,
        }
    }

    /// Both `self`'s rounds and `other`'s.
    fn plus(&self, other: &Rounds) -> Rounds {
        let mut sum = self.clone();
        for &(le, n) in &other.buckets {
            match sum.buckets.iter_mut().find(|(bound, _)| *bound == le) {
                Some(bucket) => bucket.1 += n,
                None => sum.buckets.push((le, n)),
            }
        }
        sum.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        sum.sum += other.sum;
        sum.count += other.count;
        sum
    }

    fn mean_ms(&self) -> f64 {
        self.sum / self.count.max(1.0) * 1e3
    }

    /// The `q` quantile in ms, linear inside the bucket it falls in.
    fn quantile_ms(&self, q: f64) -> f64 {
        let target = q * self.count;
        let mut lower = (0.0, 0.0);
        for &(le, n) in &self.buckets {
            if n >= target {
                if le.is_infinite() {
                    return lower.0 * 1e3;
                }
                let share = (target - lower.1) / (n - lower.1).max(1.0);
                return (lower.0 + (le - lower.0) * share) * 1e3;
            }
            lower = (le, n);
        }
        f64::NAN
    }
}

/// Tenant 2's rounds over `seconds`.
fn phase(http: std::net::SocketAddr, seconds: u64) -> Rounds {
    let before = Rounds::read(&http_get(http, "/metrics").expect("metrics"), "b");
    std::thread::sleep(Duration::from_secs(seconds));
    let after = Rounds::read(&http_get(http, "/metrics").expect("metrics"), "b");
    after.since(&before)
}

/// Tenant 1's failed stage calls so far.
fn stage_failures(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("sluice_component_failures_total{")
                && l.contains("device=\"a")
                && l.contains("kind=\"stage\"")
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// Polls tenant 1's failed stage calls every 10 ms until `done` says so of the
/// count; when, or a panic after 30 s.
fn wait_for(http: std::net::SocketAddr, what: &str, done: impl Fn(f64, f64) -> bool) -> Instant {
    let since = Instant::now();
    let failures = || stage_failures(&http_get(http, "/metrics").unwrap_or_default());
    let mut last = (failures(), Instant::now());
    while since.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(10));
        let now = failures();
        if now != last.0 {
            last = (now, Instant::now());
        }
        if done(now, last.1.elapsed().as_secs_f64()) {
            return last.1;
        }
    }
    panic!("tenant 1's stage was not {what} within 30 s");
}

const CALM: &str = "name: t1\nstages:\n  - use: swap_bytes\n  - use: decode\n";

fn main() {
    let devices = usize::try_from(env_u64("SLUICE_BENCH_DEVICES", 20))
        .expect("fits")
        .max(1);
    let seconds = env_u64("SLUICE_BENCH_SECONDS", 15).max(1);
    let cycles = env_u64("SLUICE_BENCH_CYCLES", 1).max(1);
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
    std::fs::write(&file, CALM).expect("pipeline");
    let threads = env_u64("SLUICE_BENCH_ENGINE_THREADS", 1).max(1);
    let fuel = env_u64("SLUICE_BENCH_FUEL", 20_000_000).max(1000);
    let quarantine_after = env_u64("SLUICE_BENCH_QUARANTINE_AFTER", 10).max(1);
    let mut text = format!(
        "collector:
  workerThreads: {threads}
  mqtt: {{ brokerUrl: tcp://{}, clientId: tenants-bench }}
  http: {{ listen: {http}, adminToken: {ADMIN} }}
  wal: {{ dir: ./data }}
  connections: {{ maxTotal: 4096, maxPerHost: 4096 }}
tenants:
  - {{ tenantId: 1, name: hostile, pipeline: t1, limits: {{ fuelPerCall: {fuel}, quarantineAfter: {quarantine_after} }} }}
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
    println!(
        "tenants bench: 2 tenants x {devices} devices at 100 ms, {seconds} s per phase, \
         {cycles} cycle(s), engine workerThreads {threads}, tenant 1's fuelPerCall {fuel}, \
         quarantineAfter {quarantine_after}"
    );
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

    let first = phase(http, seconds);
    let (mut calm, mut looping) = (Rounds::default(), Rounds::default());
    let mut ratios = Vec::new();
    let mut quarantine = None;
    for cycle in 0..cycles {
        if cycle > 0 {
            std::fs::write(&file, CALM).expect("edit");
            // Calm again once no call has failed for half a second.
            wait_for(http, "calm", |_, quiet| quiet >= 0.5);
        }
        let this_calm = phase(http, seconds);
        let before = stage_failures(&http_get(http, "/metrics").unwrap_or_default());
        std::fs::write(
            &file,
            format!("{CALM}  - use: hostile\n    settings: {{ mode: loop }}\n"),
        )
        .expect("edit");
        let failing = wait_for(http, "failing", |count, _| count > before);
        let watcher = (cycle == 0).then(|| {
            std::thread::spawn(move || {
                while failing.elapsed() < Duration::from_secs(seconds) {
                    let health = http_get(http, "/health").unwrap_or_default();
                    if health.contains("\"component\":\"hostile\"") {
                        return Some(failing.elapsed());
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                None
            })
        });
        let this_looping = phase(http, seconds);
        if let Some(watcher) = watcher {
            quarantine = watcher.join().expect("watcher");
        }
        ratios.push(this_looping.quantile_ms(0.99) / this_calm.quantile_ms(0.99));
        calm = calm.plus(&this_calm);
        looping = looping.plus(&this_looping);
    }
    engine.assert_running();
    println!(
        "tenant 2 rounds  phase 1: calm  calm phases  looping phases  looping / calm  (calm / phase 1)"
    );
    for (what, q) in [
        ("p50 ms", Some(0.5)),
        ("p99 ms", Some(0.99)),
        ("mean ms", None),
    ] {
        let of = |r: &Rounds| q.map_or_else(|| r.mean_ms(), |q| r.quantile_ms(q));
        let (one, two, three) = (of(&first), of(&calm), of(&looping));
        println!(
            "{what:<15} {one:>14.3} {two:>12.3} {three:>15.3} {:>15.2} {:>18.2}",
            three / two,
            two / one
        );
    }
    let ratios: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
    println!(
        "rounds: {:.0} / {:.0} / {:.0}; p99 looping / calm of each cycle: {}; \
         target: p99 (looping / calm) within 10%",
        first.count,
        calm.count,
        looping.count,
        ratios.join(", ")
    );
    match quarantine {
        Some(after) => println!(
            "tenant 1: quarantined {:.2} s after its first failed call (target: within 1 s)",
            after.as_secs_f64()
        ),
        None => println!(
            "tenant 1: not quarantined within the looping phase (quarantineAfter {quarantine_after})"
        ),
    }
}
