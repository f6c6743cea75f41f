//! `sluice check FILE... [--pipelines DIR]`: compiles every device configuration
//! exactly as `sluice run` would (with the pipeline files given and the
//! components it would run), checks every pipeline file, and prints every
//! problem as `FILE:LINE:COL`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sluice::compile::Sources;
use sluice::config::CollectorConfig;
use sluice::gateway::{self, Purpose, Refusal};
use sluice::pipeline::{self, Pipeline};
use sluice::runtime::Limits;
use sluice::tls::ReloadingCertificate;
use sluice::yaml::{Diagnostics, Kind, parse};

pub fn run(files: &[PathBuf], pipelines_dir: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let (pipelines, configs): (Vec<PathBuf>, Vec<PathBuf>) =
        files.iter().cloned().partition(|f| is_pipeline(f));
    let mut verdicts: Vec<(PathBuf, Result<(), Diagnostics>)> = Vec::new();
    if !pipelines.is_empty() {
        // The components the first configuration's gateway runs (a gateway with
        // every default without one), those deployed into its data directory included.
        let collector = configs
            .first()
            .and_then(|c| sluice::config::load_collector(c).ok())
            .unwrap_or_default();
        let (registry, _) = gateway::registry(&collector, Purpose::Check)?;
        // Loaded as one set, so the files may include each other's pipelines.
        for (file, spec) in pipelines.iter().zip(pipeline::load_set(&pipelines)) {
            let built = spec
                .and_then(|spec| Pipeline::build(&spec, &registry, Limits::default()).map(drop));
            verdicts.push((file.clone(), built));
        }
    }
    for config in configs {
        let sources = Sources {
            config_file: Some(config.clone()),
            pipelines_dir: pipelines_dir.clone(),
            pipeline_files: pipelines.clone(),
        };
        let mut problems = match gateway::compile(&sources, Purpose::Check) {
            Ok(_) => Diagnostics::new(config.display().to_string()),
            Err(Refusal::Problems(problems)) => problems,
            Err(other) => return Err(other.into()),
        };
        if let Ok(collector) = sluice::config::load_collector(&config) {
            problems.extend(tls_problems(&config, &collector));
        }
        let compiled = problems.into_result(());
        verdicts.push((config, compiled));
    }
    let mut printed: Vec<String> = Vec::new();
    for (file, verdict) in verdicts {
        match verdict {
            Ok(()) => println!("{}: ok", file.display()),
            Err(problems) => {
                // A pipeline file's problem is also each configuration's that uses it.
                for line in problems.to_string().lines() {
                    if !printed.iter().any(|p| p == line) {
                        println!("{line}");
                        printed.push(line.to_owned());
                    }
                }
            }
        }
    }
    if printed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("{} problem(s) found", printed.len());
        Ok(ExitCode::FAILURE)
    }
}

/// What the TLS files `collector` names would do at a connect: a file that
/// cannot be read or holds no certificate (key), an expired client certificate.
fn tls_problems(file: &Path, collector: &CollectorConfig) -> Diagnostics {
    let mut problems = Diagnostics::new(file.display().to_string());
    if let Some(tls) = &collector.mqtt.tls
        && let Err(problem) = sluice::uplink::check_tls_files(tls, sluice::clock::now_ms())
    {
        problems.push(tls.pos, format!("collector.mqtt.tls: {problem}"));
    }
    if let Some(tls) = collector.http.as_ref().and_then(|http| http.tls.as_ref())
        && let Err(problem) = ReloadingCertificate::new(&tls.cert_file, &tls.key_file)
    {
        problems.push(tls.pos, format!("collector.http.tls: {problem}"));
    }
    problems
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
