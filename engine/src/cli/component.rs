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
use sluice::model::{ProtocolInfo, SettingType};
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
        anyhow::bail!("--kind is one of codec, stage, rules, decoder, not `{kind}`");
    };
    let collector =
        config::load_collector(config_path).map_err(|problems| anyhow::anyhow!("{problems}"))?;
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let runtime = Runtime::new(RuntimeConfig::default())?;
    let loaded = runtime.load(kind, name, &bytes)?;
    let shelf = Shelf::new(&collector.wal.dir);
    shelf.keep(kind, name, version, &bytes, loaded.hash())?;
    #[allow(clippy::print_stdout)]
    {
        println!(
            "{name} {version} ({kind}, sha256 {}) kept in {}; active from the gateway's next start",
            loaded.hash(),
            collector.wal.dir.display()
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

/// What a channel of `protocol` may say, as `sluice component check` prints it.
fn describe(protocol: &ProtocolInfo) -> String {
    let transports: Vec<&str> = protocol.transports.iter().map(|t| t.describe()).collect();
    let port = protocol.default_port.map_or_else(
        || "no standard port".to_owned(),
        |port| format!("port {port} by default"),
    );
    let mut text = format!(
        "  protocol {}: on {}; {port}\n    address: {}\n",
        protocol.name,
        transports.join(" or "),
        protocol.address_help
    );
    for setting in &protocol.settings {
        let kind = match &setting.kind {
            SettingType::Boolean => "true or false".to_owned(),
            SettingType::Integer { min, max } => format!("{min} to {max}"),
            SettingType::Float => "a number".to_owned(),
            SettingType::Text => "text".to_owned(),
            SettingType::Choice(names) => names.join(" | "),
        };
        let default = setting
            .default
            .as_ref()
            .map_or_else(String::new, |value| format!(", default {value}"));
        text.push_str(&format!(
            "    {}: {kind}{default}: {}\n",
            setting.name, setting.help
        ));
    }
    text
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
                    for protocol in loaded.protocols() {
                        print!("{}", describe(protocol));
                    }
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
