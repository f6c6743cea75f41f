//! `cargo xtask fuzz [TARGET...] [--time S] [--runs N] [--merge] [--seed]`: the
//! coverage-guided fuzz targets of `fuzz/` under libFuzzer (docs/fuzzing.md).
//!
//! The targets are built once, optimised and instrumented for coverage
//! (LLVM's SanitizerCoverage, which the stable toolchain has), into
//! `target/fuzz/`. Each target then runs for `--time` seconds or `--runs`
//! inputs, whichever ends first (default 60 s), starting from its corpus and
//! regressions; what it learns is kept in `target/fuzz/learned/TARGET/` for the
//! next run, and `--merge` adds to `fuzz/corpus/TARGET/` a small set of the
//! inputs that reach edges the corpus does not (libFuzzer's set-cover merge,
//! edges without hit counts).
//! A crash, a hang (10 s)
//! or an input over the memory limit stops the target and fails the task, with
//! the input in `target/fuzz/artifacts/TARGET/`. `--seed` replaces the corpora with seeds
//! captured from the real peers instead (`fuzz/tests/seeds.rs`).

use std::fs;
use std::path::Path;
use std::process::Command;

use super::{host_triple, run};

/// SanitizerCoverage as libFuzzer reads it: 8-bit edge counters, the table of
/// instrumented code and comparison operands, with overflow and debug checks on.
const COVERAGE_FLAGS: &str = "-Cpasses=sancov-module \
     -Cllvm-args=-sanitizer-coverage-level=4 \
     -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
     -Cllvm-args=-sanitizer-coverage-pc-table \
     -Cllvm-args=-sanitizer-coverage-trace-compares \
     -Cdebug-assertions -Coverflow-checks --cfg fuzzing";

/// What a run of a target did, from libFuzzer's final statistics.
struct Ran {
    target: String,
    executions: u64,
    edges: u64,
    per_second: u64,
    passed: bool,
}

pub fn fuzz(root: &Path, args: &[String]) -> Result<(), String> {
    let mut targets = Vec::new();
    let mut limit = Vec::new();
    let mut merge = false;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seed" => return seed(root),
            "--merge" => merge = true,
            "--time" | "--runs" => {
                let value = args.next().ok_or(format!("{arg} needs a number"))?;
                value
                    .parse::<u64>()
                    .map_err(|_| format!("{arg} {value}: not a number"))?;
                let flag = if arg == "--time" {
                    "max_total_time"
                } else {
                    "runs"
                };
                limit.push(format!("-{flag}={value}"));
            }
            name if !name.starts_with('-') => targets.push(name.to_owned()),
            other => return Err(format!("unknown option {other}")),
        }
    }
    if targets.is_empty() {
        targets = listed_targets(root)?;
    }
    if limit.is_empty() {
        limit.push("-max_total_time=60".to_owned());
    }
    let binary = build(root)?;
    let mut ran = Vec::new();
    for target in &targets {
        ran.push(run_target(root, &binary, target, &limit, merge)?);
    }
    println!(
        "\n{:<28} {:>14} {:>7} {:>10}  result",
        "target", "executions", "edges", "per second"
    );
    for r in &ran {
        let result = if r.passed {
            "no crash, hang or memory blow-up"
        } else {
            "FAILED"
        };
        println!(
            "{:<28} {:>14} {:>7} {:>10}  {result}",
            r.target, r.executions, r.edges, r.per_second
        );
    }
    match ran.iter().filter(|r| !r.passed).count() {
        0 => Ok(()),
        n => Err(format!(
            "{n} target(s) failed; the inputs are in target/fuzz/artifacts/ (add each to \
             fuzz/regressions/TARGET/ once fixed)"
        )),
    }
}

/// The targets with a corpus: the directories of `fuzz/corpus/`.
fn listed_targets(root: &Path) -> Result<Vec<String>, String> {
    let dir = root.join("fuzz").join("corpus");
    let mut names: Vec<String> = fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Ok(names)
}

fn build(root: &Path) -> Result<std::path::PathBuf, String> {
    let host = host_triple()?;
    let flags_var = format!(
        "CARGO_TARGET_{}_RUSTFLAGS",
        host.to_uppercase().replace('-', "_")
    );
    println!("==> cargo build (libFuzzer, instrumented) with {flags_var}");
    // `--target` keeps the flags off build scripts and proc macros.
    let status = Command::new("cargo")
        .args([
            "build",
            "--locked",
            "--release",
            "-p",
            "sluice-fuzz",
            "--features",
            "libfuzzer",
            "--bin",
            "fuzz",
            "--target",
            &host,
            "--target-dir",
            "target/fuzz",
        ])
        .env(&flags_var, COVERAGE_FLAGS)
        .current_dir(root)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building the fuzz targets failed ({status})"));
    }
    Ok(root.join("target/fuzz").join(host).join("release/fuzz"))
}

fn run_target(
    root: &Path,
    binary: &Path,
    target: &str,
    limit: &[String],
    merge: bool,
) -> Result<Ran, String> {
    let work = root.join("target/fuzz/learned").join(target);
    let artifacts = root.join("target/fuzz/artifacts").join(target);
    for dir in [&work, &artifacts] {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let corpus = root.join("fuzz/corpus").join(target);
    let regressions = root.join("fuzz/regressions").join(target);
    println!("==> fuzz {target} {}", limit.join(" "));
    let mut command = Command::new(binary);
    command
        .env("SLUICE_FUZZ_TARGET", target)
        .args(limit)
        .args([
            // FUZZ-2: an input that runs longer is a hang.
            "-timeout=10",
            "-rss_limit_mb=2048",
            "-print_final_stats=1",
            "-reload=0",
        ])
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .arg(&work)
        .arg(&corpus);
    if regressions.is_dir() {
        command.arg(&regressions);
    }
    let output = command
        .output()
        .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
    let log = String::from_utf8_lossy(&output.stderr);
    fs::write(work.with_extension("log"), log.as_bytes()).map_err(|e| e.to_string())?;
    let stat = |name: &str| {
        log.lines()
            .find_map(|l| l.strip_prefix(&format!("stat::{name}:")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    // The last status line that counts edges, e.g. `#1048576 DONE cov: 812 ft: 2301 ...`.
    let edges = log
        .lines()
        .rev()
        .find_map(|l| l.split("cov: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let ran = Ran {
        target: target.to_owned(),
        executions: stat("number_of_executed_units"),
        edges,
        per_second: stat("average_exec_per_sec"),
        passed: output.status.success(),
    };
    if !ran.passed {
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        eprintln!("{target} failed:\n{}", tail.join("\n"));
    } else if merge {
        let status = Command::new(binary)
            .env("SLUICE_FUZZ_TARGET", target)
            .args(["-merge=1", "-set_cover_merge=1", "-use_counters=0"])
            .arg(&corpus)
            .arg(&work)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
        if !status.status.success() {
            return Err(format!("merging into {} failed", corpus.display()));
        }
    }
    Ok(ran)
}

/// Captures the seed corpora: the codecs' from the real peers.
fn seed(root: &Path) -> Result<(), String> {
    run(root, "bash", &["scripts/setup-peers.sh"])?;
    run(
        root,
        "cargo",
        &[
            "test",
            "--locked",
            "-p",
            "sluice-fuzz",
            "--test",
            "seeds",
            "--",
            "--ignored",
            "--test-threads=1",
        ],
    )
}
