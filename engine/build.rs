//! Builds the guest components in `../components` for wasm32-wasip2 and embeds the
//! default ones, deflated, in the engine binary.
//!
//! - `components/{codecs,stages,rules}/NAME` are the default components, embedded
//!   under NAME with the kind of their folder;
//! - `components/sockets/NAME` are components the engine composes others into,
//!   embedded as the constant `NAME` (upper case) and never registered;
//! - `components/testing/NAME` are guests for the engine's own tests; their
//!   directory is handed to the tests as `SLUICE_TEST_COMPONENTS`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::{env, fs};

const TARGET: &str = "wasm32-wasip2";
/// Component folders and the `ComponentKind` of what they hold.
const KINDS: [(&str, &str); 3] = [("codecs", "Codec"), ("stages", "Stage"), ("rules", "Rules")];

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest.parent().expect("engine/ sits in the project root");
    let components = root.join("components");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));

    watch(root, &components);
    ensure_target();
    build_components(&components);

    let artifacts = components.join("target").join(TARGET).join("release");
    let mut generated =
        String::from("/// Components built into the engine.\npub const BUILTIN: &[Builtin] = &[\n");
    for (folder, kind) in KINDS {
        for name in crate_dirs(&components.join(folder)) {
            let file = embed(&artifacts, &out_dir, &name);
            generated.push_str(&format!(
                "    Builtin {{ name: {name:?}, kind: ComponentKind::{kind}, wasm: Embedded(include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{file}\"))) }},\n"
            ));
        }
    }
    generated.push_str("];\n");
    for name in crate_dirs(&components.join("sockets")) {
        let file = embed(&artifacts, &out_dir, &name);
        generated.push_str(&format!(
            "/// The `{name}` socket component.\npub const {}: Embedded = Embedded(include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{file}\")));\n",
            name.to_uppercase().replace('-', "_")
        ));
    }
    fs::write(out_dir.join("builtin_components.rs"), generated).expect("OUT_DIR is writable");
    println!(
        "cargo:rustc-env=SLUICE_TEST_COMPONENTS={}",
        artifacts.display()
    );
}

/// Deflates component `name` from the guests' build into `OUT_DIR`; the file's name.
fn embed(artifacts: &Path, out_dir: &Path, name: &str) -> String {
    let built = format!("{}.wasm", name.replace('-', "_"));
    let wasm = artifacts.join(&built);
    let bytes = fs::read(&wasm).unwrap_or_else(|e| {
        panic!(
            "component `{name}` was not built at {}: {e}",
            wasm.display()
        )
    });
    let file = format!("{built}.deflate");
    let deflated = miniz_oxide::deflate::compress_to_vec(&bytes, 10);
    fs::write(out_dir.join(&file), deflated).expect("OUT_DIR is writable");
    file
}

/// Rebuild when the contract or any component source changes (not on `target/`).
fn watch(root: &Path, components: &Path) {
    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    for file in ["Cargo.toml", "Cargo.lock", ".cargo/config.toml"] {
        println!("cargo:rerun-if-changed={}", components.join(file).display());
    }
    for folder in ["guest", "codecs", "stages", "sockets", "rules", "testing"] {
        let path = components.join(folder);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

/// Package folders (holding a Cargo.toml) under `dir`, sorted.
fn crate_dirs(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// Installs the wasm32-wasip2 target when rustup can, or says exactly what to run.
fn ensure_target() {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output();
    let Ok(installed) = installed else {
        // No rustup: the toolchain was installed another way; the build below will
        // say whether it has the target.
        return;
    };
    if String::from_utf8_lossy(&installed.stdout)
        .lines()
        .any(|l| l.trim() == TARGET)
    {
        return;
    }
    let added = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status();
    if !matches!(added, Ok(status) if status.success()) {
        panic!(
            "the {TARGET} target is missing and could not be installed; run `rustup target add {TARGET}` and build again"
        );
    }
}

fn build_components(components: &Path) {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(components)
        .args([
            "build",
            "--release",
            "--locked",
            "--target",
            TARGET,
            "--target-dir",
        ])
        .arg(components.join("target"));
    // The outer build's flags and wrappers are for the host crate, not the guests.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        command.env_remove(var);
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("could not run cargo to build the components: {e}"));
    if !output.status.success() {
        panic!(
            "building the components in {} failed:\n{}",
            components.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
