//! `sluice component add FILE --name N --version V --kind K --config CONFIG`:
//! checks a component against its world and keeps it in the gateway's data
//! directory as the active version of its name; the gateway installs it at its
//! next start. (A running gateway takes uploads over HTTP: `PUT /components/...`.)

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use sluice::config;
use sluice::deploy::Shelf;
use sluice::runtime::{ComponentKind, Runtime, RuntimeConfig};

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
