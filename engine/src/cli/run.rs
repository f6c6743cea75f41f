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
    let configured = prepared.compiled.config.collector.worker_threads.max(1) as usize;
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let workers = configured.min(cpus);
    if workers < configured {
        tracing::info!(
            configured,
            cpus,
            "workerThreads is more than this machine's CPUs: running {workers}"
        );
    }
    let runtime = async_runtime(workers)?;
    runtime.block_on(async move {
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!("stopping");
            let _ = stop.send(true);
        });
        // A task like every other: on a multi-thread runtime `block_on` runs its
        // future outside the workers, and the scheduler inside would hand every
        // round to them and back (two thread wake-ups a round).
        tokio::spawn(gateway::run(prepared, sources, node_id, stopped))
            .await
            .map_err(|panicked| anyhow::anyhow!("the gateway stopped: {panicked}"))?
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The engine's async runtime: `workers` threads share the tasks. With one,
/// every task runs on this thread (tokio's current-thread scheduler): a round's
/// wake-ups (timer, socket, publisher) are then calls on one thread rather
/// than hand-offs between threads that park and unpark each other, which at
/// 1,000 devices cost a third of the engine's CPU (docs/performance.md). Disk
/// and compiler work still goes to tokio's blocking threads. More threads than
/// CPUs would only add hand-offs: the caller caps `workers` at the CPUs.
fn async_runtime(workers: usize) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = if workers == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.worker_threads(workers);
        builder
    };
    builder.thread_name("sluice-worker").enable_all().build()
}

/// SIGINT or SIGTERM.
pub(super) async fn wait_for_signal() {
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

#[cfg(test)]
mod tests {
    use tokio::runtime::RuntimeFlavor;

    use super::async_runtime;

    #[test]
    fn one_worker_is_a_current_thread_runtime_and_more_share_a_multi_thread_one() {
        for (workers, flavor) in [
            (1, RuntimeFlavor::CurrentThread),
            (2, RuntimeFlavor::MultiThread),
        ] {
            let runtime = async_runtime(workers).expect("runtime");
            assert_eq!(runtime.handle().runtime_flavor(), flavor);
            assert_eq!(runtime.metrics().num_workers(), workers);
        }
    }

    #[test]
    fn one_worker_runs_every_task_on_the_calling_thread_and_blocking_work_elsewhere() {
        let runtime = async_runtime(1).expect("runtime");
        let caller = std::thread::current().id();
        let ran_on =
            runtime.block_on(async { tokio::spawn(async { std::thread::current().id() }).await });
        assert_eq!(ran_on.expect("task"), caller);
        let blocking_on = runtime
            .block_on(async { tokio::task::spawn_blocking(|| std::thread::current().id()).await })
            .expect("blocking task");
        assert_ne!(blocking_on, caller);
    }
}
