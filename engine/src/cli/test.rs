//! `sluice test FILE...`: runs the `tests:` cases of pipeline files against the
//! built-in components, and the `cases:` of codec and decoder test files (a
//! top-level `codec` or `decoder`) against their component; prints every
//! failure as FILE:LINE:COL.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sluice::pipeline;
use sluice::runtime::{Registry, Runtime, RuntimeConfig};
use sluice::sdk;
use sluice::yaml::{self, Diagnostics, Node};

#[allow(clippy::print_stdout)]
pub fn run(files: &[impl AsRef<Path>]) -> anyhow::Result<ExitCode> {
    let registry = Registry::with_builtins(Runtime::new(RuntimeConfig::default())?)?;
    let mut outcomes: Vec<(PathBuf, Result<usize, Diagnostics>)> = Vec::new();
    let mut pipelines = Vec::new();
    for file in files {
        let file = file.as_ref().to_path_buf();
        match component_cases(&file) {
            Some((root, ComponentCases::Codec)) => {
                let outcome = sdk::run_codec_cases(&file, &root, &registry);
                outcomes.push((file, outcome));
            }
            Some((root, ComponentCases::Decoder)) => {
                let outcome = sdk::run_decoder_cases(&file, &root, &registry);
                outcomes.push((file, outcome));
            }
            None => pipelines.push(file),
        }
    }
    // Loaded as one set, so the files may include each other's pipelines.
    for (file, spec) in pipelines.iter().zip(pipeline::load_set(&pipelines)) {
        let outcome = spec.and_then(|spec| pipeline::run_tests(&spec, &registry));
        outcomes.push((file.clone(), outcome));
    }
    let (mut failed, mut passed) = (0, 0);
    for (file, outcome) in outcomes {
        match outcome {
            Ok(cases) => {
                passed += cases;
                println!("{}: {cases} test(s) passed", file.display());
            }
            Err(problems) => {
                failed += problems.len();
                println!("{problems}");
            }
        }
    }
    if failed == 0 {
        println!("{passed} test(s) passed");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("{failed} problem(s)");
        Ok(ExitCode::FAILURE)
    }
}

/// Which component a test file's cases are for.
enum ComponentCases {
    Codec,
    Decoder,
}

/// The document of `file` when it is a codec or decoder test file (a mapping
/// with a top-level `codec` or `decoder`); `None` for anything else, read as a
/// pipeline (which reports what is wrong with it).
fn component_cases(file: &Path) -> Option<(Node, ComponentCases)> {
    let text = std::fs::read_to_string(file).ok()?;
    let root = yaml::parse(&file.display().to_string(), &text).ok()?;
    let kind = root
        .as_map()?
        .iter()
        .find_map(|(key, _)| match key.name.as_str() {
            "codec" => Some(ComponentCases::Codec),
            "decoder" => Some(ComponentCases::Decoder),
            _ => None,
        })?;
    Some((root, kind))
}
