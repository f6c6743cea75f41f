//! One gateway: everything `sluice run` starts, wired together.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use tokio::sync::watch;

use crate::api::{self, ApiState, CollectorView};
use crate::collector::{Collector, PipelineSet};
use crate::config::GatewayConfig;
use crate::runtime::{Registry, Runtime, RuntimeConfig};
use crate::store::{SeqAllocator, Store};
use crate::uplink::Uplink;
use crate::wal::Outbox;

/// Sub-directory of the data directory holding precompiled components.
const COMPONENT_CACHE: &str = "component-cache";

/// What to run.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// The config file, for messages.
    pub config_file: String,
    /// Extra pipeline files; the built-in `default` is always there.
    pub pipelines_dir: Option<PathBuf>,
}

/// Runs the gateway until `shutdown` turns true.
///
/// # Errors
/// Anything that stops it from starting: an unusable data directory, pipelines
/// or devices the components refuse, an HTTP address in use.
pub async fn run(
    config: GatewayConfig,
    options: GatewayOptions,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let data_dir: &Path = &config.collector.wal.dir;
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: Some(data_dir.join(COMPONENT_CACHE)),
        ..RuntimeConfig::default()
    })?;
    let registry = Registry::with_builtins(runtime)?;
    let pipelines = match &options.pipelines_dir {
        Some(dir) => PipelineSet::load_dir(dir)?,
        None => PipelineSet::builtin()?,
    };
    let store = Store::open(data_dir)?;
    let seq = Arc::new(SeqAllocator::open(&store)?);
    let outbox = Outbox::open(&config.collector.wal, &store)?;
    let committer = tokio::spawn(Arc::clone(&outbox).run_committer(shutdown.clone()));
    let (uplink, publisher) = Uplink::start(
        &config.collector.mqtt,
        Arc::clone(&outbox),
        shutdown.clone(),
    );
    let mut collector = Collector::build(
        &options.config_file,
        &config,
        &registry,
        &pipelines,
        uplink.clone(),
        seq,
    )
    .map_err(|problems| anyhow::anyhow!("{problems}"))
    .context("the configuration cannot run")?;
    tracing::info!(
        devices = collector.devices.len(),
        connections = collector.links.len(),
        database = %store.path().display(),
        "collector started"
    );
    let api_task = match &config.collector.http {
        Some(http) => {
            let state = ApiState {
                collector: Arc::new(CollectorView::of(&collector)),
                uplink: Arc::clone(uplink.stats()),
                started: Instant::now(),
            };
            let listener = tokio::net::TcpListener::bind(http.listen)
                .await
                .with_context(|| format!("cannot listen on {}", http.listen))?;
            Some(tokio::spawn(api::serve(listener, state, shutdown.clone())))
        }
        None => None,
    };
    collector.run(shutdown).await;
    // Reports of the last rounds are committed before the process ends (they are
    // published at the next start if the broker does not take them now).
    let _ = committer.await;
    let _ = publisher.await;
    if let Some(task) = api_task {
        let _ = task.await;
    }
    Ok(())
}
