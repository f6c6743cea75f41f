//! `sluice test FILE...`: runs the `tests:` cases of pipeline files against the
//! built-in components and prints every failure as FILE:LINE:COL.

use std::path::Path;
use std::process::ExitCode;

use sluice::pipeline;
use sluice::runtime::{Registry, Runtime, RuntimeConfig};

#[allow(clippy::print_stdout)]
pub fn run(files: &[impl AsRef<Path>]) -> anyhow::Result<ExitCode> {
    let registry = Registry::with_builtins(Runtime::new(RuntimeConfig::default())?)?;
    let mut failed = 0;
    let mut passed = 0;
    let paths: Vec<_> = files.iter().map(|f| f.as_ref().to_path_buf()).collect();
    // Loaded as one set, so the files may include each other's pipelines.
    for (file, spec) in paths.iter().zip(pipeline::load_set(&paths)) {
        match spec.and_then(|spec| pipeline::run_tests(&spec, &registry)) {
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
