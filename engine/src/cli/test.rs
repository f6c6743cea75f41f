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
    for file in files {
        let file = file.as_ref();
        match pipeline::load_file(file).and_then(|spec| pipeline::run_tests(&spec, &registry)) {
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
