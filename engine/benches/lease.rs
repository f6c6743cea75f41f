//! The lease table at scale: 1,000,000 device leases in redb.
//!
//! `cargo bench -p sluice --bench lease` (env `SLUICE_BENCH_LEASES` to change the
//! count). Prints renewals/s (as the engine applies them: one transaction per batch
//! of queued heartbeats), the time to claim and expire 10,000 rows in the scanner's
//! batches, point reads/s, the process's memory and the database file's size.
#![allow(clippy::print_stdout)]

use std::time::Instant;

use sluice::lease::{EntityState, EntityType, RedbStateStore, Renewal, StateStore, TimeoutSource};
use sluice::store::Store;

const T0: i64 = 1_800_000_000_000;
const BATCH: usize = 10_000;
const SCAN_BATCH: usize = 500;

fn renewal(i: usize, timeout_seconds: u64) -> Renewal {
    Renewal {
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

/// Renews `count` leases in batches starting at `now`; returns renewals per second.
fn renew_all(store: &RedbStateStore, count: usize, timeout_seconds: u64, now: i64) -> f64 {
    let started = Instant::now();
    for first in (0..count).step_by(BATCH) {
        let batch: Vec<Renewal> = (first..(first + BATCH).min(count))
            .map(|i| renewal(i, timeout_seconds))
            .collect();
        store.renew(&batch, now).expect("renew");
    }
    count as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let count: usize = std::env::var("SLUICE_BENCH_LEASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = std::env::temp_dir().join(format!("sluice-bench-lease-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let db = Store::open(&dir).expect("store");
    let store = RedbStateStore::new(&db);
    let (rss_before, _) = memory_mib();

    // First heartbeats create the rows; later ones update them.
    let created = renew_all(&store, count, 3600, T0);
    let renewed = renew_all(&store, count, 3600, T0 + 1000);

    // 10,000 leases run out: the scanner claims them in its batches.
    let expiring = 10_000.min(count);
    let batch: Vec<Renewal> = (0..expiring).map(|i| renewal(i, 1)).collect();
    store.renew(&batch, T0 + 2000).expect("renew");
    let started = Instant::now();
    let mut expired = 0;
    loop {
        let claimed = store.expire(T0 + 10_000, SCAN_BATCH).expect("expire").len();
        expired += claimed;
        if claimed < SCAN_BATCH {
            break;
        }
    }
    let expire_time = started.elapsed();
    assert_eq!(expired, expiring, "exactly the leases that ran out");

    let started = Instant::now();
    let reads = 100_000.min(count);
    for i in 0..reads {
        let id = format!("device-{:07}", (i * 7919) % count);
        std::hint::black_box(store.get(EntityType::Device, &id).expect("get"));
    }
    let read_rate = reads as f64 / started.elapsed().as_secs_f64();

    let (rss_after, peak) = memory_mib();
    let file = std::fs::metadata(db.path()).map(|m| m.len()).unwrap_or(0) as f64 / (1 << 20) as f64;
    println!("leases                      {count}");
    println!(
        "renewals/s, new rows        {created:.0}  (batches of {BATCH}, one transaction each)"
    );
    println!("renewals/s, existing rows   {renewed:.0}");
    println!(
        "claim + expire {expiring} rows  {:.1} ms  (batches of {SCAN_BATCH}: {:.0} rows/s)",
        expire_time.as_secs_f64() * 1000.0,
        expiring as f64 / expire_time.as_secs_f64()
    );
    println!("point reads/s               {read_rate:.0}");
    println!(
        "memory (RSS)                {rss_before:.0} MiB before, {rss_after:.0} MiB after, peak {peak:.0} MiB"
    );
    println!(
        "database file               {file:.0} MiB ({:.0} bytes per lease)",
        file * (1 << 20) as f64 / count as f64
    );
    drop(store);
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}
