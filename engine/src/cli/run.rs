//! `sluice run --config FILE`: runs a gateway until SIGINT or SIGTERM.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sluice::config;
use sluice::gateway::{self, GatewayOptions};
use tokio::sync::watch;

pub fn run(config_path: &Path, pipelines: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let config = match config::load_file(config_path) {
        Ok(config) => config,
        Err(problems) => {
            eprintln!("{problems}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.collector.worker_threads.max(1) as usize)
        .thread_name("sluice-worker")
        .enable_all()
        .build()?;
    let options = GatewayOptions {
        config_file: Some(config_path.to_path_buf()),
        pipelines_dir: pipelines,
    };
    runtime.block_on(async move {
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!("stopping");
            let _ = stop.send(true);
        });
        gateway::run(config, options, stopped).await
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
