//! The lease table at scale: 1,000,000 device leases in redb, beside a baseline
//! measured in the same run.
//!
//! `cargo bench -p sluice --bench lease` (env `SLUICE_BENCH_LEASES` to change the
//! count). Each store runs in a process of its own (so memory is its own):
//! - `binary`: the engine's lease table (fixed-size rows, lazily filed expiry);
//! - `json`: the baseline, a plain redb table holding the seed's fields as JSON
//!   with an expiry index rewritten by every heartbeat;
//! - `postgres`: the PostgreSQL lease store on a cluster the bench starts itself
//!   (`scripts/postgres.sh`, PostgreSQL's durable defaults), with 1, 2 and 3
//!   engines renewing their shares and claiming together, beside redb's figures.
//!
//! Printed for each: renewals/s as the engine applies them (one durable commit
//! per batch of queued heartbeats, devices in a random order that is the same
//! each pass, as periodic polling gives), the time to claim and expire 10,000
//! rows in the scanner's batches, point reads/s, memory, and the file's bytes
//! per lease; then one more pass with the devices in a new order, and the file
//! after it; then every target beside its figure.
#![allow(clippy::print_stdout)]

use std::collections::HashMap;
use std::process::Command;
use std::time::Instant;

use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use sluice::lease::{
    EntityKey, EntityState, EntityType, RedbStateStore, Renewal, StateRow, StateStore,
    TimeoutSource,
};
use sluice::store::{PgStateStore, Postgres, Store};

const T0: i64 = 1_800_000_000_000;
/// Heartbeats per commit: what 100 ms of queued heartbeats is at 200,000/s.
const BATCH: usize = 20_000;
/// The engine's renewer commits everything queued while its previous commit
/// ran: under a sustained load the batches grow to this and more.
const LOADED_BATCH: usize = 250_000;
/// Rows claimed per scanner transaction (the engine's batch).
const SCAN_BATCH: usize = sluice::lease::EXPIRE_BATCH;
const EXPIRING: usize = 10_000;
/// The order devices report in, the same every pass (polling is periodic).
const ORDER: u64 = 0x9e37_79b9_7f4a_7c15;
/// Another order, for one last pass whose heartbeats come in a new order.
const NEW_ORDER: u64 = 0x2545_f491_4f6c_dd1d;

fn renewal(i: usize, timeout_seconds: u64) -> Renewal {
    Renewal {
        expired_state: EntityState::Offline,
        entity_type: EntityType::Device,
        entity_id: format!("device-{i:07}"),
        parent_id: "modbus_tcp".into(),
        tenant_id: 0,
        state: EntityState::Online,
        timeout_seconds,
        timeout_source: TimeoutSource::System,
        extension: serde_json::json!({}),
    }
}

/// Resident and peak memory of this process, in MiB.
fn memory_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// 0..count in a pseudo-random order fixed by `seed` (xorshift; no
/// dependency).
fn shuffled(count: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..count).collect();
    let mut x: u64 = seed;
    for i in (1..count).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    order
}

/// The operations both stores are measured on.
trait Leases {
    fn renew(&self, batch: &[Renewal], now: i64);
    fn expire(&self, now: i64) -> usize;
    fn read(&self, id: &str);
}

/// One of the engine's lease stores (redb or PostgreSQL).
struct Engine(Box<dyn StateStore>);

impl Leases for Engine {
    fn renew(&self, batch: &[Renewal], now: i64) {
        self.0.renew(batch, now).expect("renew");
    }
    fn expire(&self, now: i64) -> usize {
        let mut expired = 0;
        loop {
            let claimed = self.0.expire(now, SCAN_BATCH).expect("expire");
            expired += claimed.transitions.len();
            if !claimed.more {
                return expired;
            }
        }
    }
    fn read(&self, id: &str) {
        let device = EntityKey::device(0, id);
        std::hint::black_box(self.0.get(&device).expect("get"));
    }
}

/// The baseline: the seed's fields as JSON under a string key, and an expiry
/// index rewritten by every heartbeat.
struct JsonTable {
    db: redb::Database,
}

const JSON_ROWS: TableDefinition<&str, &[u8]> = TableDefinition::new("bench_state");
const JSON_EXPIRY: TableDefinition<(i64, &str), u64> = TableDefinition::new("bench_expiry");

impl JsonTable {
    fn row(r: &Renewal, old: Option<&StateRow>, now: i64) -> StateRow {
        StateRow {
            entity_type: r.entity_type,
            entity_id: r.entity_id.clone(),
            parent_id: r.parent_id.clone(),
            state: r.state,
            last_state: old.map_or(EntityState::Offline, |o| o.state),
            last_heartbeat: now,
            expire_time: now + r.timeout_seconds as i64 * 1000,
            lease_version: old.map_or(0, |o| o.lease_version) + 1,
            timeout_seconds: r.timeout_seconds,
            timeout_source: r.timeout_source,
            extension: r.extension.clone(),
            tenant_id: r.tenant_id,
            expired_state: r.expired_state,
        }
    }
}

impl Leases for JsonTable {
    fn renew(&self, batch: &[Renewal], now: i64) {
        let tx = self.db.begin_write().expect("write");
        {
            let mut rows = tx.open_table(JSON_ROWS).expect("rows");
            let mut expiry = tx.open_table(JSON_EXPIRY).expect("expiry");
            for r in batch {
                let key = format!("6:{}", r.entity_id);
                let old: Option<StateRow> = rows
                    .get(key.as_str())
                    .expect("get")
                    .map(|v| serde_json::from_slice(v.value()).expect("json"));
                if let Some(old) = &old {
                    expiry
                        .remove((old.expire_time, key.as_str()))
                        .expect("unindex");
                }
                let row = Self::row(r, old.as_ref(), now);
                expiry
                    .insert((row.expire_time, key.as_str()), row.lease_version)
                    .expect("index");
                let bytes = serde_json::to_vec(&row).expect("json");
                rows.insert(key.as_str(), bytes.as_slice()).expect("put");
            }
        }
        tx.commit().expect("commit");
    }
    fn expire(&self, now: i64) -> usize {
        let mut expired = 0;
        loop {
            let tx = self.db.begin_write().expect("write");
            let claimed = {
                let mut rows = tx.open_table(JSON_ROWS).expect("rows");
                let mut expiry = tx.open_table(JSON_EXPIRY).expect("expiry");
                let due: Vec<(i64, String)> = expiry
                    .range::<(i64, &str)>(..=(now, "\u{10FFFF}"))
                    .expect("range")
                    .take(SCAN_BATCH)
                    .map(|e| {
                        let (k, _) = e.expect("entry");
                        (k.value().0, k.value().1.to_owned())
                    })
                    .collect();
                for (at, key) in &due {
                    expiry.remove((*at, key.as_str())).expect("unindex");
                    let mut row: StateRow = serde_json::from_slice(
                        rows.get(key.as_str()).expect("get").expect("row").value(),
                    )
                    .expect("json");
                    row.last_state = row.state;
                    row.state = EntityState::Offline;
                    row.lease_version += 1;
                    let bytes = serde_json::to_vec(&row).expect("json");
                    rows.insert(key.as_str(), bytes.as_slice()).expect("put");
                }
                due.len()
            };
            tx.commit().expect("commit");
            expired += claimed;
            if claimed < SCAN_BATCH {
                return expired;
            }
        }
    }
    fn read(&self, id: &str) {
        let tx = self.db.begin_read().expect("read");
        let rows = tx.open_table(JSON_ROWS).expect("rows");
        let key = format!("6:{id}");
        let row = rows
            .get(key.as_str())
            .expect("get")
            .map(|v| serde_json::from_slice::<StateRow>(v.value()).expect("json"));
        std::hint::black_box(row);
    }
}

/// Renews the leases in `order`, `BATCH` to a commit; returns renewals/s.
fn renew_all(
    store: &dyn Leases,
    order: &[usize],
    batch: usize,
    timeout_seconds: u64,
    now: i64,
) -> f64 {
    let started = Instant::now();
    for chunk in order.chunks(batch) {
        let batch: Vec<Renewal> = chunk.iter().map(|&i| renewal(i, timeout_seconds)).collect();
        store.renew(&batch, now);
    }
    order.len() as f64 / started.elapsed().as_secs_f64()
}

/// Measures one store in this process and prints `key value` lines.
fn measure(kind: &str, count: usize) {
    let dir = std::env::temp_dir().join(format!("sluice-bench-lease-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let db = Store::open(&dir).expect("store");
    let path = db.path().to_path_buf();
    let store: Box<dyn Leases> = match kind {
        "binary" => Box::new(Engine(Box::new(RedbStateStore::open(&db).expect("leases")))),
        _ => {
            drop(db);
            let db = redb::Builder::new()
                .set_cache_size(32 << 20)
                .create(&path)
                .expect("baseline database");
            Box::new(JsonTable { db })
        }
    };
    let order = shuffled(count, ORDER);
    let created = renew_all(store.as_ref(), &order, BATCH, 3600, T0);
    let renewed = renew_all(store.as_ref(), &order, BATCH, 3600, T0 + 1_000);
    let loaded = renew_all(store.as_ref(), &order, LOADED_BATCH, 3600, T0 + 2_000);

    // 10,000 leases spread over the table run out; the scan claims them.
    let ending = ending(count);
    let expiring = ending.len();
    renew_all(store.as_ref(), &ending, BATCH, 1, T0 + 3_000);
    let started = Instant::now();
    let expired = store.expire(T0 + 10_000);
    let claim_ms = started.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(expired, expiring, "exactly the leases that ran out");

    let reads = 100_000.min(count);
    let started = Instant::now();
    for &i in order.iter().take(reads) {
        store.read(&format!("device-{i:07}"));
    }
    let read_rate = reads as f64 / started.elapsed().as_secs_f64();
    let (rss, peak) = memory_mib();
    let bytes = std::fs::metadata(&path).map_or(0, |m| m.len()) as f64;
    println!("renew_new {created:.0}");
    println!("renew {renewed:.0}");
    println!("renew_loaded {loaded:.0}");
    println!("claim_ms {claim_ms:.1}");
    println!("reads {read_rate:.0}");
    println!("rss {rss:.0}");
    println!("peak {peak:.0}");
    println!("bytes_per_lease {:.0}", bytes / count as f64);
    // Last, heartbeats in an order unlike the one rows were created in.
    let reordered = renew_all(
        store.as_ref(),
        &shuffled(count, NEW_ORDER),
        LOADED_BATCH,
        3600,
        T0 + 20_000,
    );
    let bytes = std::fs::metadata(&path).map_or(0, |m| m.len()) as f64;
    println!("renew_reordered {reordered:.0}");
    println!("bytes_reordered {:.0}", bytes / count as f64);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// 10,000 leases spread evenly over `count`.
fn ending(count: usize) -> Vec<usize> {
    let expiring = EXPIRING.min(count);
    (0..expiring).map(|i| i * (count / expiring)).collect()
}

/// The PostgreSQL store at `url` with 1, 2 and 3 engines at once: each renews
/// its share of the devices (as device ownership would split them), then all
/// claim the same 10,000 expired leases together; no row may be expired twice.
fn measure_postgres(url: &str, count: usize) {
    let engines: Vec<Engine> = (0..3)
        .map(|_| {
            let db = Postgres::open(url, 2).expect("postgres");
            Engine(Box::new(PgStateStore::new(&db)))
        })
        .collect();
    let order = shuffled(count, ORDER);
    let created = renew_all(&engines[0], &order, BATCH, 3600, T0);
    println!("renew_new {created:.0}");
    let ending = ending(count);
    for n in 1..=3usize {
        let now = T0 + n as i64 * 10_000;
        let started = Instant::now();
        std::thread::scope(|scope| {
            for (e, engine) in engines.iter().take(n).enumerate() {
                let share: Vec<usize> = order.iter().copied().filter(|i| i % n == e).collect();
                scope.spawn(move || renew_all(engine, &share, BATCH, 3600, now));
            }
        });
        let renewed = count as f64 / started.elapsed().as_secs_f64();
        renew_all(&engines[0], &ending, BATCH, 1, now + 1_000);
        let started = Instant::now();
        let expired: usize = std::thread::scope(|scope| {
            let claims: Vec<_> = engines
                .iter()
                .take(n)
                .map(|engine| scope.spawn(move || engine.expire(now + 5_000)))
                .collect();
            claims.into_iter().map(|c| c.join().expect("claim")).sum()
        });
        let claim_ms = started.elapsed().as_secs_f64() * 1000.0;
        assert_eq!(expired, ending.len(), "each lease expired once");
        println!("renew_{n} {renewed:.0}");
        println!("claim_ms_{n} {claim_ms:.1}");
    }
}

/// Starts a PostgreSQL of the bench's own (`scripts/postgres.sh`, durable
/// settings), measures it in a child process and stops it; `None` when it
/// cannot start (not installed).
fn run_postgres(count: usize) -> Option<HashMap<String, f64>> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/postgres.sh");
    let dir = std::env::temp_dir().join(format!("sluice-bench-pg-{}", std::process::id()));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .ok()?;
    let dir_arg = dir.display().to_string();
    let started = Command::new(&script)
        .args(["start", &dir_arg, &port.to_string(), "durable"])
        .status()
        .is_ok_and(|s| s.success());
    let figures = started.then(|| {
        run(
            &[
                "--store",
                "postgres",
                "--url",
                &format!("postgresql://postgres@127.0.0.1:{port}/postgres"),
            ],
            count,
        )
    });
    let _ = Command::new(&script).args(["stop", &dir_arg]).status();
    let _ = std::fs::remove_dir_all(&dir);
    figures
}

/// Runs this bench in a child process with `args` and reads its figures.
fn run(args: &[&str], count: usize) -> HashMap<String, f64> {
    let output = Command::new(std::env::current_exe().expect("bench binary"))
        .args(args)
        .env("SLUICE_BENCH_LEASES", count.to_string())
        .output()
        .expect("child");
    assert!(output.status.success(), "{args:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_owned(), v.parse().ok()?))
        })
        .collect()
}

fn main() {
    let count: usize = std::env::var("SLUICE_BENCH_LEASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        let at = args.iter().position(|a| a == name)?;
        args.get(at + 1).map(String::as_str)
    };
    match (arg("--store"), arg("--url")) {
        (Some("postgres"), Some(url)) => return measure_postgres(url, count),
        (Some(kind), _) => return measure(kind, count),
        _ => {}
    }
    let binary = run(&["--store", "binary"], count);
    let json = run(&["--store", "json"], count);
    let postgres = run_postgres(count);
    let f = |m: &HashMap<String, f64>, k: &str| m.get(k).copied().unwrap_or(f64::NAN);
    println!(
        "{count} leases; devices report in a random order, the same each pass; one durable commit per batch; scan batches of {SCAN_BATCH}"
    );
    println!(
        "{:<34}{:>14}{:>14}{:>10}",
        "", "binary", "json (base)", "ratio"
    );
    for (label, key, higher_is_better) in [
        ("renewals/s, new rows (20k/commit)", "renew_new", true),
        ("renewals/s (20k/commit)", "renew", true),
        ("renewals/s (250k/commit)", "renew_loaded", true),
        ("claim + expire 10,000 rows, ms", "claim_ms", false),
        ("point reads/s", "reads", true),
        ("RSS after the reads, MiB", "rss", false),
        ("peak RSS, MiB", "peak", false),
        ("file bytes per lease", "bytes_per_lease", false),
        ("then renewals/s, a new order", "renew_reordered", true),
        ("then file bytes per lease", "bytes_reordered", false),
    ] {
        let (b, j) = (f(&binary, key), f(&json, key));
        let ratio = if higher_is_better { b / j } else { j / b };
        println!("{label:<34}{b:>14.1}{j:>14.1}{ratio:>9.1}x");
    }
    println!();
    println!("target                               figure      met");
    for (label, figure, met) in [
        (
            "renewals >= 200,000/s (loaded)",
            f(&binary, "renew_loaded"),
            f(&binary, "renew_loaded") >= 200_000.0,
        ),
        (
            "claim 10,000 <= 50 ms",
            f(&binary, "claim_ms"),
            f(&binary, "claim_ms") <= 50.0,
        ),
        (
            "RSS <= 150 MiB",
            f(&binary, "peak"),
            f(&binary, "peak") <= 150.0,
        ),
        (
            "<= 150 bytes per lease",
            f(&binary, "bytes_per_lease"),
            f(&binary, "bytes_per_lease") <= 150.0,
        ),
    ] {
        println!(
            "{label:<34}{figure:>10.1}      {}",
            if met { "yes" } else { "NO" }
        );
    }
    println!();
    let Some(pg) = postgres else {
        println!("PostgreSQL: not measured (scripts/postgres.sh could not start a server)");
        return;
    };
    println!("PostgreSQL 15 (own cluster, durable defaults), the same rows and batches");
    println!("{:<34}{:>14}{:>14}", "", "postgres", "redb");
    println!(
        "{:<34}{:>14.1}{:>14.1}",
        "renewals/s, new rows (20k/commit)",
        f(&pg, "renew_new"),
        f(&binary, "renew_new")
    );
    for n in 1..=3 {
        println!(
            "{:<34}{:>14.1}{:>14.1}",
            format!("renewals/s, {n} engine(s)"),
            f(&pg, &format!("renew_{n}")),
            f(&binary, "renew")
        );
        println!(
            "{:<34}{:>14.1}{:>14.1}",
            format!("claim 10,000 ms, {n} engine(s)"),
            f(&pg, &format!("claim_ms_{n}")),
            f(&binary, "claim_ms")
        );
    }
}
