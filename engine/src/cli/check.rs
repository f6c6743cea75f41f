//! `sluice check FILE...`: validates every file and prints every problem.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sluice::runtime::{Limits, Registry, Runtime, RuntimeConfig};
use sluice::yaml::{Kind, parse};
use sluice::{config, pipeline};

pub fn run(files: &[impl AsRef<Path>]) -> anyhow::Result<ExitCode> {
    let files: Vec<PathBuf> = files.iter().map(|f| f.as_ref().to_path_buf()).collect();
    let kinds: Vec<bool> = files.iter().map(|f| is_pipeline(f)).collect();
    let pipelines: Vec<PathBuf> = files
        .iter()
        .zip(&kinds)
        .filter(|(_, pipeline)| **pipeline)
        .map(|(file, _)| file.clone())
        .collect();
    let registry = if pipelines.is_empty() {
        None
    } else {
        Some(Registry::with_builtins(Runtime::new(
            RuntimeConfig::default(),
        )?)?)
    };
    // Loaded as one set, so the files may include each other's pipelines.
    let mut specs = pipeline::load_set(&pipelines).into_iter();
    let mut problems = 0;
    for (file, is_pipeline) in files.iter().zip(kinds) {
        let spec = if is_pipeline { specs.next() } else { None };
        let result = match (spec, &registry) {
            (Some(spec), Some(registry)) => spec.and_then(|spec| {
                pipeline::Pipeline::build(&spec, registry, Limits::default()).map(drop)
            }),
            _ => config::load_file(file).map(drop),
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
