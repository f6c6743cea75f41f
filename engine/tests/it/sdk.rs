//! The component SDK as an author uses it, away from any Sluice checkout:
//! `sluice component new` writes a crate into a fresh directory, cargo builds it
//! there, `sluice component check` says it fits, and the engine runs it.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use crate::common::{batch, runtime, setting, tag};
use crate::support::engine::scratch_dir;
use sluice::model::{DataType, Quality, SettingValue, Value};
use sluice::runtime::{ComponentKind, Limits};

fn sluice(args: &[&str], dir: &Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .arg(dir)
        .output()
        .expect("sluice runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn a_stage_written_by_the_sdk_builds_outside_the_repository_and_runs() {
    let dir = scratch_dir("sdk").join("add_offset");
    let (made, said) = sluice(&["component", "new", "stage", "add_offset"], &dir);
    assert!(made, "{said}");
    let (again, said) = sluice(&["component", "new", "stage", "add_offset"], &dir);
    assert!(!again && said.contains("is not empty"), "{said}");

    // The author's build: no path of the crate leads back into this checkout, and
    // the build runs from the crate's own directory. The target directory is the
    // tests' own, so a second run of the suite builds nothing.
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("manifest");
    assert!(!manifest.contains(".."), "{manifest}");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sdk-target");
    let built = Command::new(env!("CARGO"))
        .current_dir(&dir)
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .expect("cargo runs");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let wasm = target.join("wasm32-wasip2/release/add_offset.wasm");

    let (fits, said) = sluice(&["component", "check"], &wasm);
    assert!(
        fits && said.contains("a stage component for sluice:dataflow@0.4.0"),
        "{said}"
    );
    let (fits, said) = sluice(&["component", "check"], &dir.join("Cargo.toml"));
    assert!(!fits && said.contains("fits no world"), "{said}");

    let runtime = runtime();
    let bytes = std::fs::read(&wasm).expect("built");
    let component = runtime
        .load(ComponentKind::Stage, "add_offset", &bytes)
        .expect("loads as a stage");
    let pool = runtime
        .stage_pool(&component, Limits::default())
        .expect("pool");
    let tags = Arc::from(&[tag("t", "40001", DataType::Float32)][..]);
    let refused = pool
        .processor(
            &[setting("ad", SettingValue::Float(1.0))],
            Arc::clone(&tags),
        )
        .expect_err("an unknown setting");
    assert!(refused.to_string().contains("`ad`"), "{refused}");
    let processor = pool
        .processor(&[setting("add", SettingValue::Float(1.5))], tags)
        .expect("processor");
    let out = processor
        .process(batch(&[Value::Float(20.0)]))
        .expect("process");
    assert_eq!(out.samples[0].value, Value::Float(21.5));
    assert_eq!(out.samples[0].quality, Quality::Good);
    if let Some(scratch) = dir.parent() {
        std::fs::remove_dir_all(scratch).expect("cleaned up");
    }
}
