//! `sluice check FILE...`: validates every file and prints every problem.

use std::path::Path;
use std::process::ExitCode;

use sluice::runtime::{Limits, Registry, Runtime, RuntimeConfig};
use sluice::yaml::{Kind, parse};
use sluice::{config, pipeline};

pub fn run(files: &[impl AsRef<Path>]) -> anyhow::Result<ExitCode> {
    let mut registry = None;
    let mut problems = 0;
    for file in files {
        let file = file.as_ref();
        let result = if is_pipeline(file) {
            let registry = match &registry {
                Some(registry) => registry,
                None => registry.insert(Registry::with_builtins(Runtime::new(
                    RuntimeConfig::default(),
                )?)?),
            };
            pipeline::load_file(file).and_then(|spec| {
                pipeline::Pipeline::build(&spec, registry, Limits::default()).map(drop)
            })
        } else {
            config::load_file(file).map(drop)
        };
        match result {
            Ok(()) => println!("{}: ok", file.display()),
            Err(errors) => {
                problems += errors.len();
                println!("{errors}");
            }
        }
    }
    if problems == 0 {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("{problems} problem(s) found");
        Ok(ExitCode::FAILURE)
    }
}

/// A pipeline file has a top-level `stages` key; anything else is a device config.
fn is_pipeline(file: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(file) else {
        return false;
    };
    let name = file.display().to_string();
    match parse(&name, &text) {
        Ok(root) => {
            matches!(&root.kind, Kind::Map(entries) if entries.iter().any(|(k, _)| k.name == "stages"))
        }
        Err(_) => false,
    }
}
