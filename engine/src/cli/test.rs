//! `sluice test FILE...`: runs the `tests:` cases of pipeline files against the
//! built-in components, and the `cases:` of codec test files (a top-level
//! `codec`) against their codec; prints every failure as FILE:LINE:COL.

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
        match codec_cases(&file) {
            Some(root) => {
                let outcome = sdk::run_codec_cases(&file, &root, &registry);
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

/// The document of `file` when it is a codec test file (a mapping with a
/// top-level `codec`); `None` for anything else, read as a pipeline (which
/// reports what is wrong with it).
fn codec_cases(file: &Path) -> Option<Node> {
    let text = std::fs::read_to_string(file).ok()?;
    let root = yaml::parse(&file.display().to_string(), &text).ok()?;
    let is_codec = root
        .as_map()
        .is_some_and(|entries| entries.iter().any(|(key, _)| key.name == "codec"));
    is_codec.then_some(root)
}
