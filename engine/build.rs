//! Builds the guest components in `../components` for wasm32-wasip2 and embeds the
//! default ones, deflated, in the engine binary.
//!
//! - `components/{codecs,stages,rules,decoders}/NAME` are the default components, embedded
//!   under NAME with the kind of their folder;
//! - `components/sockets/NAME` are components the engine composes others into,
//!   embedded as the constant `NAME` (upper case) and never registered;
//! - `components/testing/NAME` are guests for the engine's own tests; their
//!   directory is handed to the tests as `SLUICE_TEST_COMPONENTS`;
//! - the WIT, the guest kit and `components/templates/KIND` are embedded as text
//!   for `sluice component new` (the SDK), which writes them into a crate of its own;
//! - `docs/openapi.json`, what `GET /openapi.json` answers, deflated too.
//!
//! It also links the static musl binaries with packed relocations.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::{env, fs};

const TARGET: &str = "wasm32-wasip2";

/// Component folders and the `ComponentKind` of what they hold.
const KINDS: [(&str, &str); 4] = [
    ("codecs", "Codec"),
    ("stages", "Stage"),
    ("rules", "Rules"),
    ("decoders", "Decoder"),
];

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest.parent().expect("engine/ sits in the project root");
    let components = root.join("components");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));

    watch(root, &components);
    compact_relocations();
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
    sdk_sources(root, &components, &out_dir);
    let openapi = root.join("docs").join("openapi.json");
    println!("cargo:rerun-if-changed={}", openapi.display());
    let document = fs::read(&openapi).expect("docs/openapi.json is readable");
    deflate_into(&document, &out_dir.join("openapi.json.deflate"));
    println!(
        "cargo:rustc-env=SLUICE_TEST_COMPONENTS={}",
        artifacts.display()
    );
}

/// The static x86_64 musl binary (a gateway build) is position-independent,
/// so its start code moves every pointer in its data: about 23,000
/// relocations, 24 bytes each. Packed (`DT_RELR`, which musl's start code
/// applies) they take 6 KB instead of 550 KB, and the image keeps its random
/// address. The aarch64 target links at a fixed address: nothing to pack.
fn compact_relocations() {
    let linux = env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let musl = env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|target_env| target_env == "musl");
    if linux && musl {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
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
    deflate_into(&bytes, &out_dir.join(&file));
    file
}

/// Writes `bytes` deflated (the smallest stream miniz_oxide makes) to `to`.
fn deflate_into(bytes: &[u8], to: &Path) {
    let deflated = miniz_oxide::deflate::compress_to_vec(bytes, 10);
    fs::write(to, deflated).expect("OUT_DIR is writable");
}

/// Rebuild when the contract or any component source changes (not on `target/`).
fn watch(root: &Path, components: &Path) {
    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    for file in ["Cargo.toml", "Cargo.lock", ".cargo/config.toml"] {
        println!("cargo:rerun-if-changed={}", components.join(file).display());
    }
    for folder in [
        "guest",
        "codecs",
        "stages",
        "sockets",
        "rules",
        "decoders",
        "testing",
        "templates",
    ] {
        let path = components.join(folder);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

/// `sdk_sources.rs`: what `sluice component new` writes, the files deflated
/// like the built-in components. The guest kit's manifest gets the values it
/// inherits from the components' workspace, and a new crate the same
/// `wit-bindgen` and release profile as the built-in components.
fn sdk_sources(root: &Path, components: &Path, out_dir: &Path) {
    let workspace =
        fs::read_to_string(components.join("Cargo.toml")).expect("components/Cargo.toml");
    let inherited = section(&workspace, "[workspace.package]");
    let mut kit_manifest = String::new();
    for line in fs::read_to_string(components.join("guest/Cargo.toml"))
        .expect("components/guest/Cargo.toml")
        .lines()
    {
        match line.strip_suffix(".workspace = true") {
            Some(key) => {
                let value = inherited
                    .lines()
                    .find(|l| l.split('=').next().map(str::trim) == Some(key))
                    .unwrap_or_else(|| panic!("`{key}` is not in [workspace.package]"));
                kit_manifest.push_str(value);
            }
            None => kit_manifest.push_str(line),
        }
        kit_manifest.push('\n');
    }
    let bindgen = section(&workspace, "[workspace.dependencies]")
        .lines()
        .find(|l| l.starts_with("wit-bindgen "))
        .expect("wit-bindgen in [workspace.dependencies]")
        .to_owned();
    let profile = format!(
        "[profile.release]\n{}",
        section(&workspace, "[profile.release]")
    );
    let sdk = out_dir.join("sdk");
    fs::create_dir_all(&sdk).expect("OUT_DIR is writable");
    let mut packed = 0;
    let mut text = |path: &Path| {
        let bytes = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        packed += 1;
        let to = sdk.join(format!("{packed}.deflate"));
        deflate_into(&bytes, &to);
        format!(
            "Embedded::new(include_bytes!({:?}))",
            to.display().to_string()
        )
    };
    let mut out = String::from(
        "/// The WIT package, file by file.\npub const WIT: &[(&str, Embedded)] = &[\n",
    );
    for file in files(&root.join("wit"), "") {
        out.push_str(&format!(
            "    ({file:?}, {}),\n",
            text(&root.join("wit").join(&file))
        ));
    }
    out.push_str("];\n/// The guest kit's sources, by their path in its crate.\npub const KIT: &[(&str, Embedded)] = &[\n");
    let kit = components.join("guest");
    for file in files(&kit.join("src"), "src") {
        out.push_str(&format!("    ({file:?}, {}),\n", text(&kit.join(&file))));
    }
    out.push_str("];\n");
    out.push_str(&format!(
        "/// The guest kit's manifest.\npub const KIT_MANIFEST: &str = {kit_manifest:?};\n"
    ));
    out.push_str(&format!("/// The `wit-bindgen` dependency of a component crate.\npub const WIT_BINDGEN: &str = {bindgen:?};\n"));
    out.push_str(&format!("/// The release profile of a component crate.\npub const RELEASE_PROFILE: &str = {profile:?};\n"));
    out.push_str(&format!(
        "/// The versions the built-in components are built with.\npub const LOCK: Embedded = {};\n",
        text(&components.join("Cargo.lock"))
    ));
    for kind in ["codec", "decoder"] {
        out.push_str(&format!(
            "/// The {kind} template's test cases (`NAME` the crate's name).\npub const {}_CASES: Embedded = {};\n",
            kind.to_uppercase(),
            text(&components.join(format!("templates/{kind}/tests/cases.yaml")))
        ));
    }
    for kind in ["stage", "codec", "decoder"] {
        out.push_str(&format!(
            "/// The {kind} template's source.\npub const {}_TEMPLATE: Embedded = {};\n",
            kind.to_uppercase(),
            text(&components.join(format!("templates/{kind}/src/lib.rs")))
        ));
    }
    fs::write(out_dir.join("sdk_sources.rs"), out).expect("OUT_DIR is writable");
}

/// The lines of TOML `text` after the header `name`, up to the next header.
fn section<'a>(text: &'a str, name: &str) -> &'a str {
    let start = text.find(name).unwrap_or_else(|| panic!("no {name}")) + name.len();
    let rest = text[start..].trim_start_matches('\n');
    &rest[..rest.find("\n[").map_or(rest.len(), |end| end + 1)]
}

/// The files under `dir`, recursively, as paths from `dir` prefixed by `prefix`, sorted.
fn files(dir: &Path, prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        if entry.path().is_dir() {
            found.extend(files(&entry.path(), &path));
        } else {
            found.push(path);
        }
    }
    found
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
