//! `sluice run --config FILE [--node-id NAME]`: compiles the gateway (every problem is printed as
//! `sluice check` prints it) and runs it until SIGINT or SIGTERM.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sluice::compile::Sources;
use sluice::gateway::{self, Prepared, Purpose, Refusal};
use tokio::sync::watch;

pub fn run(
    config_path: &Path,
    pipelines: Option<PathBuf>,
    node_id: Option<String>,
) -> anyhow::Result<ExitCode> {
    let sources = Sources {
        config_file: Some(config_path.to_path_buf()),
        pipelines_dir: pipelines,
        pipeline_files: Vec::new(),
    };
    let Some(prepared) = prepare(&sources, Purpose::Run)? else {
        return Ok(ExitCode::FAILURE);
    };
    serve(prepared, sources, node_id)
}

/// The compiled gateway, or `None` once its problems are printed.
pub fn prepare(sources: &Sources, purpose: Purpose) -> anyhow::Result<Option<Prepared>> {
    match gateway::compile(sources, purpose) {
        Ok(prepared) => Ok(Some(prepared)),
        Err(Refusal::Problems(problems)) => {
            eprintln!("{problems}");
            eprintln!("{} problem(s) found", problems.len());
            Ok(None)
        }
        Err(other) => Err(other.into()),
    }
}

/// Runs `prepared` on a runtime of its configured size until a signal.
fn serve(
    prepared: Prepared,
    sources: Sources,
    node_id: Option<String>,
) -> anyhow::Result<ExitCode> {
    let workers = prepared.compiled.config.collector.worker_threads.max(1) as usize;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("sluice-worker")
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!("stopping");
            let _ = stop.send(true);
        });
        // On a worker, like every task it starts: `block_on` runs its future on
        // this thread, and the scheduler inside would hand every round to the
        // workers and back (two thread wake-ups a round).
        tokio::spawn(gateway::run(prepared, sources, node_id, stopped))
            .await
            .map_err(|panicked| anyhow::anyhow!("the gateway stopped: {panicked}"))?
    })?;
    Ok(ExitCode::SUCCESS)
}

/// SIGINT or SIGTERM.
async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
