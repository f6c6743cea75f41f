//! Project tasks: `cargo xtask <task>`.
//!
//! - `test`: everything a fresh machine needs (wasm target, protocol peers), then every
//!   test (the README's test command), and the alarm, command and lease tests a second
//!   time on a PostgreSQL server of their own;
//! - `lint`: the engine's layers (see `layers`), the invariants' IDs (see
//!   `invariants`), `cargo fmt --check` and `cargo clippy -D warnings` on both
//!   workspaces;
//! - `layers`: the import graph of the engine's top-level modules, checked;
//! - `invariants`: the design notes' invariant IDs against their citations;
//! - `ci`: `lint` then `test`, as `.ci/run` does;
//! - `dist [--check]`: the gateway binaries and packages (see `dist`);
//! - `fuzz [TARGET...] [--time S] [--runs N] [--merge] [--seed]`: the fuzz
//!   targets under libFuzzer (see `fuzz`).
#![allow(clippy::print_stdout)]

mod dist;
mod fuzz;
mod invariants;
mod layers;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const WASM_TARGET: &str = "wasm32-wasip2";

fn main() -> ExitCode {
    let task = std::env::args().nth(1).unwrap_or_default();
    let root = project_root();
    let result = match task.as_str() {
        "test" => test(&root),
        "lint" => lint(&root),
        "ci" => lint(&root).and_then(|()| test(&root)),
        "layers" => check_layers(&root, true),
        "invariants" => check_invariants(&root),
        "dist" => dist::dist(&root, std::env::args().nth(2).as_deref() == Some("--check")),
        "fuzz" => fuzz::fuzz(&root, &std::env::args().skip(2).collect::<Vec<_>>()),
        _ => {
            eprintln!(
                "usage: cargo xtask <test | lint | layers | invariants | ci | dist [--check] | fuzz [TARGET...] [--time S] [--runs N] [--merge] [--seed]>"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask {task}: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The checkout this runs for: `cargo xtask` gives the manifest's directory at run
/// time, so a binary built by another checkout sharing the target directory
/// (`CARGO_TARGET_DIR`) still works on this one; the build's own is the fallback.
fn project_root() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    manifest.parent().map(Path::to_path_buf).unwrap_or(manifest)
}

fn run(dir: &Path, program: &str, args: &[&str]) -> Result<(), String> {
    run_with(dir, program, args, &[])
}

fn run_with(dir: &Path, program: &str, args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    println!("==> {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .status()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{program} {}` failed ({status})", args.join(" ")))
    }
}

/// The engine's integration tests (`--test it`) with `args` after `--` (filters
/// and options). Built with the whole workspace's features, as `cargo test
/// --workspace` builds them, so the binary that run built is run again.
fn integration_tests(root: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    let mut all = vec!["test", "--locked", "--workspace", "--test", "it", "--"];
    all.extend_from_slice(args);
    run_with(root, "cargo", &all, env)
}

fn ensure_wasm_target(root: &Path) -> Result<(), String> {
    run(root, "rustup", &["target", "add", WASM_TARGET])
}

fn test(root: &Path) -> Result<(), String> {
    ensure_wasm_target(root)?;
    // The real protocol peers (pymodbus, libmodbus, mosquitto, ...) the tests talk to.
    run(root, "bash", &["scripts/setup-peers.sh"])?;
    // The guests' pure logic (byte orders, address parsing, read planning) is unit
    // tested natively; the components themselves are tested through the engine.
    let host = host_triple()?;
    run(
        &root.join("components"),
        "cargo",
        &["test", "--locked", "--workspace", "--target", &host],
    )?;
    run(root, "cargo", &["test", "--workspace", "--locked"])?;
    store_tests_on_postgres(root)
}

/// The store tests (alarms, commands, alarm delivery, and leases through a
/// running engine, the engine's own and those reported from outside) that take their database from `SLUICE_TEST_POSTGRES`, run
/// again with it pointing at a PostgreSQL cluster made for them (and stopped
/// after, whatever the outcome).
fn store_tests_on_postgres(root: &Path) -> Result<(), String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map_err(|e| format!("no free port for PostgreSQL: {e}"))?
        .port()
        .to_string();
    let dir = std::env::temp_dir().join(format!("sluice-store-tests-{}", std::process::id()));
    let dir_arg = dir.display().to_string();
    run(
        root,
        "bash",
        &["scripts/postgres.sh", "start", &dir_arg, &port, "fast"],
    )?;
    let server = format!("postgresql://postgres@127.0.0.1:{port}");
    let tested = integration_tests(
        root,
        &[
            "alarms::",
            "commands::",
            "alarm_delivery::",
            "leases::",
            "outside_heartbeats::",
        ],
        &[("SLUICE_TEST_POSTGRES", &server)],
    );
    let stopped = run(root, "bash", &["scripts/postgres.sh", "stop", &dir_arg]);
    let _ = std::fs::remove_dir_all(&dir);
    tested.and(stopped)
}

/// The target triple of this machine, as rustc reports it.
fn host_triple() -> Result<String, String> {
    let output = Command::new("rustc")
        .arg("-vV")
        .output()
        .map_err(|e| format!("cannot run rustc: {e}"))?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(str::to_owned)
        .ok_or_else(|| "rustc -vV printed no host triple".to_owned())
}

/// Checks that the engine's modules import one way only; prints the graph when `show`.
fn check_layers(root: &Path, show: bool) -> Result<(), String> {
    println!("==> layers of engine/src");
    match layers::check(&root.join("engine").join("src")) {
        Ok(graph) => {
            if show {
                for (module, targets) in &graph.edges {
                    let names: Vec<&str> = targets.iter().map(String::as_str).collect();
                    println!("{module} -> {}", names.join(" "));
                }
            }
            println!(
                "layers: {} modules ({} directory modules at any depth), no cycle, \
                 none names a higher layer",
                graph.edges.len(),
                graph.directories
            );
            Ok(())
        }
        Err(problems) => {
            for problem in &problems {
                eprintln!("layers: {problem}");
            }
            Err(format!("{} layering problem(s)", problems.len()))
        }
    }
}

/// Checks that every invariant the design notes define has one ID, cited by the
/// code, and that every ID cited is defined.
fn check_invariants(root: &Path) -> Result<(), String> {
    println!("==> invariants of docs/*.md");
    match invariants::check(root) {
        Ok(summary) => {
            println!(
                "invariants: {} defined in {} documents, {} citations ({} in code), \
                 all defined and all cited",
                summary.defined, summary.notes, summary.citations, summary.in_code
            );
            Ok(())
        }
        Err(problems) => {
            for problem in &problems {
                eprintln!("invariants: {problem}");
            }
            Err(format!("{} invariant problem(s)", problems.len()))
        }
    }
}

fn lint(root: &Path) -> Result<(), String> {
    check_layers(root, false)?;
    check_invariants(root)?;
    ensure_wasm_target(root)?;
    let components = root.join("components");
    run(root, "cargo", &["fmt", "--all", "--", "--check"])?;
    run(&components, "cargo", &["fmt", "--all", "--", "--check"])?;
    // The examples are crates of their own, built by the tests from SDK crates.
    run(
        root,
        "rustfmt",
        &[
            "--edition",
            "2024",
            "--check",
            "examples/codecs/dlt645/src/lib.rs",
        ],
    )?;
    run(
        &components,
        "cargo",
        &[
            "clippy",
            "--locked",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    run(
        root,
        "cargo",
        &[
            "clippy",
            "--workspace",
            "--locked",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    // The gateway build (`cargo xtask dist`): without the demo.
    run(
        root,
        "cargo",
        &[
            "clippy",
            "--locked",
            "-p",
            "sluice",
            "--no-default-features",
            "--",
            "-D",
            "warnings",
        ],
    )
}
