//! `sluice component add FILE --name N --version V --kind K --config CONFIG`:
//! checks a component against its world and keeps it in the gateway's data
//! directory as the active version of its name; the gateway installs it at its
//! next start. (A running gateway takes uploads over HTTP: `PUT /components/...`.)
//! `sluice component new KIND NAME DIR` writes a component crate (the SDK);
//! `sluice component check FILE` says which world a `.wasm` fits.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use sluice::config;
use sluice::deploy::Shelf;
use sluice::runtime::{ComponentKind, Runtime, RuntimeConfig, WIT_PACKAGE, WIT_VERSION};
use sluice::sdk;

pub fn add(
    file: &Path,
    name: &str,
    version: &str,
    kind: &str,
    config_path: &Path,
) -> anyhow::Result<ExitCode> {
    let Some(kind) = ComponentKind::parse(kind) else {
        anyhow::bail!("--kind is one of codec, stage, rules, not `{kind}`");
    };
    let config =
        config::load_file(config_path).map_err(|problems| anyhow::anyhow!("{problems}"))?;
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let runtime = Runtime::new(RuntimeConfig::default())?;
    let loaded = runtime.load(kind, name, &bytes)?;
    let shelf = Shelf::new(&config.collector.wal.dir);
    shelf.keep(kind, name, version, &bytes, loaded.hash())?;
    #[allow(clippy::print_stdout)]
    {
        println!(
            "{name} {version} ({kind}, sha256 {}) kept in {}; active from the gateway's next start",
            loaded.hash(),
            config.collector.wal.dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn new(kind: &str, name: &str, dir: &Path) -> anyhow::Result<ExitCode> {
    let written = sdk::new_crate(kind, name, dir)?;
    #[allow(clippy::print_stdout)]
    {
        println!(
            "{} files of the {kind} crate `{name}` written into {}; build it there with \
             `cargo build --release --target wasm32-wasip2` (its README.md says what next)",
            written.len(),
            dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn check(file: &Path) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let name = file
        .file_stem()
        .map_or_else(|| "component".into(), |s| s.to_string_lossy().into_owned());
    let runtime = Runtime::new(RuntimeConfig::default())?;
    let mut refusals: Vec<String> = Vec::new();
    for kind in ComponentKind::ALL {
        match runtime.load(kind, &name, &bytes) {
            Ok(loaded) => {
                #[allow(clippy::print_stdout)]
                {
                    println!(
                        "{}: a {kind} component for {WIT_PACKAGE}@{WIT_VERSION} (sha256 {})",
                        file.display(),
                        loaded.hash()
                    );
                }
                return Ok(ExitCode::SUCCESS);
            }
            Err(error) => {
                let error = error.to_string();
                if !refusals.contains(&error) {
                    refusals.push(error);
                }
            }
        }
    }
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "{}: fits no world of {WIT_PACKAGE}@{WIT_VERSION}:",
            file.display()
        );
        for refusal in refusals {
            eprintln!("  {refusal}");
        }
    }
    Ok(ExitCode::FAILURE)
}
