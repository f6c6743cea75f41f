//! The redb log held against the memory log as a reference model: the same
//! random appends (under both overflow policies), reads, releases and restarts
//! go to both, and they must agree on every answer. Messages all have one size,
//! so the memory ring's capacity in records and the redb quota in bytes are the
//! same bound.
//!
//! `SLUICE_MODEL_SEEDS=500 cargo test --test wal_model` runs longer.

use crate::common::{Rng, scratch};
use sluice::config::OverflowPolicy;
use sluice::store::Store;
use sluice::wal::{MemoryLog, Message, MessageLog, Record, RedbLog, encode};

/// A report of device `d0`..`d9`, all of one encoded size.
fn message(rng: &mut Rng, seq: u64) -> Message {
    let device = format!("d{}", rng.below(10));
    Message {
        topic: format!("P/{device}/property/post"),
        device,
        seq,
        payload: (0..16).map(|_| rng.next() as u8).collect(),
        retain: false,
    }
}

/// Both logs and what it takes to restart the durable one.
struct Pair {
    model: MemoryLog,
    /// Holds the store it was opened on; `None` only during a restart.
    log: Option<RedbLog>,
    dir: std::path::PathBuf,
    quota: u64,
}

impl Pair {
    fn new(name: &str, capacity: usize, record_size: u64) -> Self {
        let dir = scratch(name);
        let quota = capacity as u64 * record_size;
        let store = Store::open(&dir).expect("store");
        Self {
            model: MemoryLog::new(capacity),
            log: Some(RedbLog::open(&store, quota).expect("log")),
            dir,
            quota,
        }
    }

    fn log(&self) -> &RedbLog {
        self.log.as_ref().expect("open")
    }

    /// Closes the file and opens it again, as a restart does. Releases are
    /// carried to disk by the next durable commit (an empty append here).
    fn restart(&mut self) {
        self.log()
            .append(Vec::new(), OverflowPolicy::DropNewest)
            .expect("a durable commit");
        self.log = None;
        let store = Store::open(&self.dir).expect("reopen");
        self.log = Some(RedbLog::open(&store, self.quota).expect("reopen the log"));
    }

    fn agree(&self, seed: u64, step: usize) {
        let all = |log: &dyn MessageLog| log.read_after(None, usize::MAX).expect("read");
        assert_eq!(
            all(self.log()),
            all(&self.model),
            "seed {seed} step {step}: the logs hold the same records"
        );
        assert_eq!(
            self.log().size().0,
            self.model.size().0,
            "seed {seed} step {step}"
        );
    }
}

fn run(seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let record_size = encode(&message(&mut Rng(1), 1)).len() as u64;
    let capacity = 1 + rng.below(8);
    let mut pair = Pair::new(&format!("wal-model-{seed}"), capacity, record_size);
    let mut seq = 0usize;
    for step in 0..120 {
        match rng.below(10) {
            0..=3 => {
                let policy = if rng.below(2) == 0 {
                    OverflowPolicy::DropOldest
                } else {
                    OverflowPolicy::DropNewest
                };
                // Numbered as the outbox numbers them: on from the log's next id.
                let first = pair.model.next_id();
                assert_eq!(
                    pair.log().next_id(),
                    first,
                    "seed {seed} step {step}: the next id"
                );
                let batch: Vec<Record> = (first..first + rng.below(4) as u64)
                    .map(|id| {
                        seq += 1;
                        Record {
                            id,
                            message: message(&mut rng, seq as u64),
                        }
                    })
                    .collect();
                let got = pair.log().append(batch.clone(), policy).expect("append");
                let want = pair.model.append(batch, policy).expect("append");
                assert_eq!(
                    got, want,
                    "seed {seed} step {step}: append under {policy:?}"
                );
            }
            4..=5 => {
                let held = pair.model.read_after(None, usize::MAX).expect("read");
                let after = match rng.below(3) {
                    0 => None,
                    1 => held.get(rng.below(held.len())).map(|r| r.id),
                    _ => Some(rng.below(2 * seq + 2) as u64),
                };
                let limit = 1 + rng.below(5);
                assert_eq!(
                    pair.log().read_after(after, limit).expect("read"),
                    pair.model.read_after(after, limit).expect("read"),
                    "seed {seed} step {step}: read after {after:?}, {limit}"
                );
            }
            6..=7 => {
                let held = pair.model.read_after(None, usize::MAX).expect("read");
                let mut ids: Vec<u64> = held
                    .iter()
                    .filter(|_| rng.below(2) == 0)
                    .map(|r| r.id)
                    .collect();
                // An id that is gone (or never was) is ignored by both.
                ids.push(rng.below(2 * seq + 2) as u64);
                pair.log().release(&ids).expect("release");
                pair.model.release(&ids).expect("release");
            }
            8 => pair.restart(),
            _ => {}
        }
        pair.agree(seed, step);
    }
    let _ = std::fs::remove_dir_all(&pair.dir);
}

#[test]
fn the_redb_log_answers_as_the_memory_model_does() {
    let seeds = std::env::var("SLUICE_MODEL_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25u64);
    for seed in 1..=seeds {
        run(seed);
    }
}
