//! Every fuzz target on the stable toolchain: each input of its corpus and
//! regressions (`corpus/TARGET/`, `regressions/TARGET/`), each twice so that
//! nothing may stay allocated after the second, then deterministic mutations
//! of them. A broken reader fails here without libFuzzer.
//!
//! `SLUICE_FUZZ_MUTATIONS` sets the mutations a target (default 3,000);
//! `SLUICE_FUZZ_SEED` the generator's seed.

use std::fs;
use std::path::{Path, PathBuf};

use sluice_fuzz::{TARGETS, Target};
use sluice_guest::fuzz::Rng;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn inputs(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let bytes = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, bytes)
        })
        .collect()
}

fn run_target(target: &Target) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let corpus = inputs(&root.join("corpus").join(target.name));
    assert!(
        !corpus.is_empty(),
        "{}: no corpus in corpus/{} (capture it with `cargo xtask fuzz --seed`)",
        target.name,
        target.name
    );
    let regressions = inputs(&root.join("regressions").join(target.name));
    for (path, bytes) in corpus.iter().chain(&regressions) {
        let outcome = std::panic::catch_unwind(|| target.run_checking_leaks(bytes));
        assert!(outcome.is_ok(), "{}: {} fails", target.name, path.display());
    }
    let mutations = env_u64("SLUICE_FUZZ_MUTATIONS", 3_000);
    let mut rng = Rng::new(env_u64("SLUICE_FUZZ_SEED", 0x5EED_F022) ^ target.name.len() as u64);
    for _ in 0..mutations {
        let (_, base) = &corpus[rng.below(corpus.len())];
        // Mutate the input's header (its first bytes pick the call) or its body.
        let input = if rng.below(4) == 0 {
            let cut = rng.below(base.len().min(12) + 1);
            let mut input = rng.mutate(&base[..cut]);
            input.extend_from_slice(&base[cut..]);
            input
        } else {
            let keep = rng.below(base.len().min(12) + 1);
            let mut input = base[..keep].to_vec();
            input.extend(rng.mutate(&base[keep..]));
            input
        };
        let outcome = std::panic::catch_unwind(|| target.run(&input));
        assert!(outcome.is_ok(), "{}: fails on {input:02x?}", target.name);
    }
}

macro_rules! targets {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                let target = sluice_fuzz::target(stringify!($name)).expect("a target");
                run_target(target);
            }
        )*

        #[test]
        fn every_target_has_a_test_here() {
            let tested = [$(stringify!($name)),*];
            for target in TARGETS {
                assert!(tested.contains(&target.name), "{} is not run here", target.name);
            }
        }
    };
}

targets!(
    modbus_tcp,
    modbus_rtu,
    s7,
    mc,
    modbus_tcp_vs_tokio_modbus,
    device_config,
    pipeline,
    wal_record,
    downlink,
    http_body,
);
