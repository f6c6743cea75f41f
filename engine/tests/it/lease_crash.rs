//! The lease table survives SIGKILL in the middle of a batch exactly (STATE-1, STATE-3):
//! a worker process renews and expires leases on a clock of its own, printing
//! each operation once it returned; it is killed at a moment of its own choosing;
//! then every row must be what a reference model says after the operations the
//! worker acknowledged, or after those and the one it was in (never a renewal it
//! acknowledged lost, never an expiry applied twice).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sluice::lease::{
    EXPIRE_BATCH, EntityState, EntityType, RedbStateStore, Renewal, StateFilter, StateStore,
    TimeoutSource,
};
use sluice::store::Store;

const T0: i64 = 1_800_000_000_000;
const DEVICES: usize = 4_000;
const WORKER_DIR: &str = "SLUICE_LEASE_WORKER_DIR";

/// Operation `op`: even ones renew round `op / 2`, odd ones scan it.
fn round(op: usize) -> (usize, bool) {
    (op / 2, op.is_multiple_of(2))
}

/// Devices miss one round in four, so a quarter of them run out each round.
fn renewed_in(round: usize, device: usize) -> bool {
    !(device + round).is_multiple_of(4)
}

fn id(device: usize) -> String {
    format!("d{device:05}")
}

fn renewal(device: usize) -> Renewal {
    Renewal {
        expired_state: EntityState::Offline,
        entity_type: EntityType::Device,
        entity_id: id(device),
        parent_id: "modbus".into(),
        tenant_id: 0,
        state: EntityState::Online,
        timeout_seconds: 1,
        timeout_source: TimeoutSource::Device,
        extension: serde_json::json!({}),
    }
}

fn renew_at(round: usize) -> i64 {
    T0 + round as i64 * 1_000
}

fn scan_at(round: usize) -> i64 {
    renew_at(round) + 600
}

/// What the model keeps of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Row {
    state: EntityState,
    version: u64,
    heartbeat: i64,
    expires: i64,
}

/// The rows after operations `0..ops`.
fn model(ops: usize) -> BTreeMap<usize, Row> {
    let mut rows: BTreeMap<usize, Row> = BTreeMap::new();
    for op in 0..ops {
        let (round, renews) = round(op);
        for device in 0..DEVICES {
            if renews {
                if renewed_in(round, device) {
                    let version = rows.get(&device).map_or(0, |r| r.version) + 1;
                    let at = renew_at(round);
                    rows.insert(
                        device,
                        Row {
                            state: EntityState::Online,
                            version,
                            heartbeat: at,
                            expires: at + 1_000,
                        },
                    );
                }
            } else if let Some(row) = rows.get_mut(&device)
                && row.state == EntityState::Online
                && row.expires <= scan_at(round)
            {
                row.state = EntityState::Offline;
                row.version += 1;
                row.expires = scan_at(round) + 1_000;
            }
        }
    }
    rows
}

/// The worker: runs operations until it is killed, acknowledging each.
#[test]
fn lease_worker() {
    let Ok(dir) = std::env::var(WORKER_DIR) else {
        return;
    };
    let store = Store::open(Path::new(&dir)).expect("store");
    let leases = RedbStateStore::open(&store).expect("leases");
    for op in 0.. {
        let (round, renews) = round(op);
        if renews {
            let batch: Vec<Renewal> = (0..DEVICES)
                .filter(|&d| renewed_in(round, d))
                .map(renewal)
                .collect();
            leases.renew(&batch, renew_at(round)).expect("renew");
        } else {
            while leases
                .expire(scan_at(round), EXPIRE_BATCH)
                .expect("expire")
                .more
            {}
        }
        // The acknowledgement the parent reads; stdout is the only channel.
        #[allow(clippy::print_stdout)]
        {
            println!("ack {op}");
        }
    }
}

#[test]
fn sigkill_in_the_middle_of_a_batch_leaves_the_state_exact() {
    for (attempt, delay_ms) in [3u64, 17, 41].into_iter().enumerate() {
        let dir = std::env::temp_dir().join(format!(
            "sluice-lease-crash-{}-{attempt}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let mut worker = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "lease_crash::lease_worker",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(WORKER_DIR, &dir)
            .stdout(Stdio::piped())
            .spawn()
            .expect("worker");
        let mut lines = BufReader::new(worker.stdout.take().expect("stdout")).lines();
        let started = Instant::now();
        let mut acked = None;
        while acked.is_none_or(|op| op < 4) {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "worker stalled"
            );
            let line = lines.next().expect("worker output").expect("line");
            if let Some(op) = line.strip_prefix("ack ") {
                acked = op.parse::<usize>().ok();
            }
        }
        std::thread::sleep(Duration::from_millis(delay_ms));
        worker.kill().expect("SIGKILL");
        worker.wait().expect("reaped");
        for line in lines {
            let line = line.expect("line");
            if let Some(op) = line.strip_prefix("ack ") {
                acked = op.parse::<usize>().ok();
            }
        }
        let acked = acked.expect("an acknowledged operation") + 1;

        let store = Store::open(&dir).expect("reopen after SIGKILL");
        let leases = RedbStateStore::open(&store).expect("leases");
        let stored: BTreeMap<String, _> = leases
            .list(&StateFilter::default())
            .expect("list")
            .into_iter()
            .map(|r| (r.entity_id.clone(), r))
            .collect();
        let (done, in_flight) = (model(acked), model(acked + 1));
        for device in 0..DEVICES {
            let row = stored.get(&id(device)).map(|r| Row {
                state: r.state,
                version: r.lease_version,
                heartbeat: r.last_heartbeat,
                expires: r.expire_time,
            });
            let (before, after) = (done.get(&device).copied(), in_flight.get(&device).copied());
            assert!(
                row == before || row == after,
                "device {device} after op {acked}: stored {row:?}, model {before:?} or {after:?}"
            );
        }
        drop(leases);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
