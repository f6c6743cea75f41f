//! The `sluice` command line.
#![allow(clippy::print_stdout)]

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    sluice::memory::keep_heap_small();
    let args = cli::Cli::parse();
    cli::init_logging(args.verbose);
    match cli::run(args) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
