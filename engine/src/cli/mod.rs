//! Commands of the `sluice` binary.

mod check;
mod component;
#[cfg(feature = "demo")]
mod demo;
mod reload;
mod run;
mod sign;
mod test;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Sluice: polls PLCs and meters, turns registers into engineering values and
/// ships them upstream without losing any.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, about, long_about = None)]
pub struct Cli {
    /// Log more (-v: debug, -vv: trace); `RUST_LOG` overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate device configs and pipeline files as `run` would; prints every
    /// problem as FILE:LINE:COL.
    Check {
        /// Config or pipeline YAML files (a file with a top-level `stages` key is a
        /// pipeline; the configs are compiled with them).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// A directory of pipeline files, as given to `run`.
        #[arg(long)]
        pipelines: Option<PathBuf>,
    },
    /// Run the `tests:` cases of pipeline files, and the `cases:` of codec and
    /// decoder test files; prints every failure as FILE:LINE:COL.
    Test {
        /// Pipeline YAML files, codec or decoder test files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Run a gateway: poll the configured devices and publish their values.
    Run {
        /// The device configuration file.
        #[arg(long, short)]
        config: PathBuf,
        /// A directory of pipeline files (the built-in `default` is always available).
        #[arg(long)]
        pipelines: Option<PathBuf>,
        /// This engine's name among those sharing a database: the owner of the
        /// devices it polls, the node of its command claims (default:
        /// `SLUICE_NODE_ID`, else `collector.commands.nodeId`, else the host name).
        #[arg(long)]
        node_id: Option<String>,
    },
    /// Ask the running gateway to read its pipeline files and device configuration
    /// again now (it also watches them); prints what changed, or every problem.
    Reload {
        /// The gateway's configuration file (its `collector.http` says where it listens).
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Manage the components of a gateway.
    Component {
        #[command(subcommand)]
        action: ComponentAction,
    },
    /// Sign a downlink message (property/set, function/invoke, config/push) the
    /// way the gateway checks it; prints the payload to publish.
    Sign {
        /// A key file (one key per line; the first is used), as the gateway's
        /// `operatorKeyFile` or a tenant's `downlinkKeyFile`.
        #[arg(long)]
        key_file: PathBuf,
        /// The topic the message is published on (the signature covers it).
        #[arg(long)]
        topic: String,
        /// The payload, a JSON object with a `requestId` (default: read from
        /// stdin); `ts` is set to now unless it has one.
        payload: Option<String>,
    },
    /// Run the self-contained demo: a simulated meter, an in-process MQTT broker and
    /// the engine; prints every MQTT message as `TOPIC PAYLOAD`.
    Demo {
        /// Stop after this many property reports (default: run until interrupted).
        #[arg(long)]
        reports: Option<u64>,
    },
}

#[derive(Debug, Subcommand)]
enum ComponentAction {
    /// Check a component against its world and keep it in the gateway's data
    /// directory as the active version of its name (used from the next start).
    Add {
        /// The component (`.wasm`).
        file: PathBuf,
        /// Its name (a built-in name replaces that component).
        #[arg(long)]
        name: String,
        #[arg(long)]
        version: String,
        /// `codec`, `stage`, `rules` or `decoder`.
        #[arg(long)]
        kind: String,
        /// The gateway's configuration file (its `collector.wal.dir` is the data directory).
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Write a new component crate into DIR that builds on its own, anywhere
    /// (`cargo build --release --target wasm32-wasip2`): the WIT and the guest
    /// kit go into the crate.
    New {
        /// The kind of component: `stage`, `codec` or `decoder`.
        kind: String,
        /// The crate's and the component's name.
        name: String,
        /// Where the crate goes (a new or empty directory).
        dir: PathBuf,
    },
    /// Say, without a gateway, whether a `.wasm` fits this engine: which world it
    /// implements and for which WIT version, or why it fits none.
    Check {
        /// The component (`.wasm`).
        file: PathBuf,
    },
}

/// Logs go to stderr; stdout carries command output only.
pub fn init_logging(verbose: u8) {
    // The embedded broker (demo) logs every client that goes, even a clean
    // disconnect, as an error: it says what matters through the engine's
    // log, so it is heard only when asked for.
    let default = match verbose {
        0 => "info,rumqttd=off",
        1 => "debug,rumqttd=info",
        _ => "trace",
    };
    // `RUST_LOG`: comma-separated `target=level` directives and a bare level
    // for the rest, as `debug,sluice::uplink=trace` (no span or field filters).
    let asked = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let parsed = asked.as_deref().map(str::parse::<Targets>);
    let filter = match &parsed {
        Some(Ok(filter)) => filter.clone(),
        _ => default.parse().unwrap_or_default(),
    };
    // Colours for a terminal only: a file or a pipe gets plain text.
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    // The filter on the one layer, so the registry's level hint is the
    // filter's: records of the libraries that log through `log` (the component
    // compiler logs a great deal below info) are not even made beyond it.
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(terminal)
                .with_writer(std::io::stderr)
                .with_filter(filter),
        )
        .init();
    if let (Some(asked), Some(Err(e))) = (asked, parsed) {
        tracing::warn!(RUST_LOG = asked, error = %e, "not understood; logging at the default level");
    }
}

/// Runs the parsed command.
///
/// # Errors
/// Failures that stop the command (a check that finds problems is not one: it
/// prints them and exits with status 1).
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Check { files, pipelines } => check::run(&files, pipelines),
        Command::Test { files } => test::run(&files),
        Command::Run {
            config,
            pipelines,
            node_id,
        } => run::run(&config, pipelines, node_id),
        Command::Demo { reports } => demo(reports),
        Command::Reload { config } => reload::run(&config),
        Command::Sign {
            key_file,
            topic,
            payload,
        } => sign::run(&key_file, &topic, payload),
        Command::Component { action } => match action {
            ComponentAction::Add {
                file,
                name,
                version,
                kind,
                config,
            } => component::add(&file, &name, &version, &kind, &config),
            ComponentAction::New { kind, name, dir } => component::new(&kind, &name, &dir),
            ComponentAction::Check { file } => component::check(&file),
        },
    }
}

#[cfg(feature = "demo")]
fn demo(reports: Option<u64>) -> anyhow::Result<ExitCode> {
    demo::run(reports)
}

/// Gateway builds leave the demo out.
#[cfg(not(feature = "demo"))]
fn demo(_reports: Option<u64>) -> anyhow::Result<ExitCode> {
    anyhow::bail!(
        "this build has no demo (a gateway build, without the `demo` feature): run it from a \
         checkout with `cargo run --release -- demo`"
    )
}
