//! Reloads while the engine runs: the pipeline files (every device's pipeline
//! rebuilt, swapped in at its next round) and the device configuration (devices
//! added, changed and removed; the others untouched). Both are checked whole
//! first; a refused reload changes nothing and says why (RELOAD-2). The files are watched,
//! and `POST /reload` reloads both at once.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use super::deployer::Deployer;
use super::error::DeployError;
use super::status::ReloadStatus;
use crate::collector::{DeviceChanges, swap_pipelines};
use crate::compile::{self, Conflict, Loaded};
use crate::config::GatewayConfig;
use crate::pipeline::files_in;
use crate::sync::lock;
use crate::telemetry::{Collector, ConstCounter, DescriptorEncoder, Metrics, encode_scraped};
use crate::yaml::Diagnostics;

/// How often the files are looked at for changes.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// How the reloads went, read at each scrape.
#[derive(Debug)]
struct ReloadMetrics(Weak<Deployer>);

impl Collector for ReloadMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let Some(deployer) = self.0.upgrade() else {
            return Ok(());
        };
        let (pipelines, devices) = (deployer.reload_status(), deployer.device_reload_status());
        for (name, help, value) in [
            (
                "sluice_pipeline_reloads",
                "Reloads of the pipeline files that swapped new pipelines in.",
                pipelines.reloads,
            ),
            (
                "sluice_pipeline_reload_failures",
                "Reloads of the pipeline files refused (the running pipelines stayed).",
                pipelines.failures,
            ),
            (
                "sluice_config_reloads",
                "Reloads of the device configuration that were applied.",
                devices.reloads,
            ),
            (
                "sluice_config_reload_failures",
                "Reloads of the device configuration refused (the running devices stayed).",
                devices.failures,
            ),
        ] {
            encode_scraped(&mut encoder, name, help, &ConstCounter::new(value))?;
        }
        Ok(())
    }
}

/// What one `POST /reload` did: each source's outcome, when there is one.
#[derive(Debug)]
pub struct ReloadReport {
    /// Devices whose pipelines were swapped.
    pub pipelines: Option<Result<usize, DeployError>>,
    pub devices: Option<Result<DeviceReload, DeployError>>,
}

/// What a reload of the device configuration did.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceReload {
    pub changes: DeviceChanges,
    /// Pushed devices whose file entry was edited: the push stays in force.
    pub conflicts: Vec<Conflict>,
}

impl Deployer {
    /// Registers how the reloads went (`sluice_*_reloads_total`, `..._failures_total`).
    pub fn register_metrics(self: &Arc<Self>, metrics: &Metrics) {
        metrics.collect(ReloadMetrics(Arc::downgrade(self)));
    }

    /// How the reloads of the pipeline files went.
    pub fn reload_status(&self) -> ReloadStatus {
        lock(&self.status).0.clone()
    }

    /// How the reloads of the device configuration went.
    pub fn device_reload_status(&self) -> ReloadStatus {
        lock(&self.status).1.clone()
    }

    /// Reads the pipeline files again and, when the running configuration compiles
    /// with them, swaps every device's new pipeline in at its next round, and the
    /// alarm rules built from their `alarms:` at once. Blocking.
    ///
    /// # Errors
    /// No pipelines directory, or problems in a file or in building a pipeline
    /// (`FILE:LINE:COL` each); the running pipelines stay.
    pub fn reload_pipeline_files(&self) -> Result<usize, DeployError> {
        if self.sources.pipelines_dir.is_none() {
            return Err(DeployError::Invalid(
                "the engine runs without --pipelines: only the built-in pipeline is in use".into(),
            ));
        }
        let _one = lock(&self.busy);
        let result = self
            .sources
            .load_pipelines()
            .and_then(|set| {
                let mut compiled = self.compile_running(Some(set.clone()))?;
                if let Some(alarms) = &self.alarms {
                    alarms.replace_rules(&mut compiled, None);
                }
                let swapped = swap_pipelines(self.fleet.roster().devices(), compiled);
                *lock(&self.pipelines) = set;
                tracing::info!(devices = swapped, "pipelines reloaded");
                Ok(swapped)
            })
            .map_err(DeployError::Pipelines);
        lock(&self.status).0.record("pipeline", &result);
        result
    }

    /// Reads the device configuration file again, lays the pushed devices over it
    /// (CMD-P3 of `docs/commands.md`), and applies what changed in its `devices` and
    /// `products`: the changed and new devices are compiled (with the running
    /// pipelines) and put in place with the others untouched. Blocking.
    ///
    /// # Errors
    /// No configuration file, or problems in it or in a changed device
    /// (`FILE:LINE:COL` each); the running devices stay.
    pub fn reload_devices(&self) -> Result<DeviceReload, DeployError> {
        if self.sources.config_file.is_none() {
            return Err(DeployError::Invalid(
                "the engine runs without a configuration file".into(),
            ));
        }
        let _one = lock(&self.busy);
        let result = self
            .sources
            .load_running(&self.registry.protocols())
            .map_err(|mut problems| {
                // With what the components say of the rest (ARCH-3).
                let document = self.sources.document().ok().flatten();
                problems.extend(compile::components_view(
                    &self.sources,
                    document.as_ref(),
                    &self.registry,
                ));
                problems.sorted()
            })
            .and_then(|overlaid| {
                let file = self.sources.config_name();
                let changes = self.apply_devices(&file, &overlaid.config, || Ok(()))?;
                Ok(DeviceReload {
                    changes,
                    conflicts: overlaid.conflicts,
                })
            })
            .map_err(DeployError::Devices);
        if let Ok(reload) = &result {
            if !reload.changes.restart_needed.is_empty() {
                tracing::warn!(
                    sections = ?reload.changes.restart_needed,
                    "these sections changed too and apply at the next start"
                );
            }
            self.record_conflicts(reload.conflicts.clone());
        }
        lock(&self.status).1.record("device configuration", &result);
        crate::memory::release_after_build();
        result
    }

    /// Puts the devices of `config` in place: those that differ from the running
    /// ones are compiled (with the running pipelines) and, once `commit` agrees,
    /// swapped in with the others untouched. Called with `busy` held; the caller
    /// hands the build's freed memory back (`memory::release_after_build`) once its own
    /// bookkeeping is done, so nothing waits for that.
    ///
    /// # Errors
    /// Problems in a changed device, or what `commit` says; nothing changed.
    pub(super) fn apply_devices(
        &self,
        file: &str,
        config: &GatewayConfig,
        commit: impl FnOnce() -> Result<(), Diagnostics>,
    ) -> Result<DeviceChanges, Diagnostics> {
        let mut pools = self.running_pools();
        let reload = self.fleet.begin_reload(file, config);
        let loaded = Loaded {
            file: file.to_owned(),
            config: reload.config().clone(),
            pipelines: lock(&self.pipelines).clone(),
            conflicts: Vec::new(),
        };
        let compiled = compile::build(loaded, &self.registry, &mut pools, &|d| reload.rebuilds(d));
        let mut problems = reload.problems().clone();
        match compiled {
            Ok(compiled) if problems.is_empty() => {
                commit()?;
                Ok(reload.apply(compiled))
            }
            Ok(_) => Err(problems.sorted()),
            Err(more) => {
                problems.extend(more);
                Err(problems.sorted())
            }
        }
    }

    /// The pushed devices whose file entry was edited since their push, as the
    /// last start or reload found them.
    pub fn conflicts(&self) -> Vec<Conflict> {
        lock(&self.conflicts).clone()
    }

    fn record_conflicts(&self, conflicts: Vec<Conflict>) {
        for conflict in &conflicts {
            tracing::warn!(
                device = %conflict.device_id,
                edit = ?conflict.file_edit,
                "the file's entry of a pushed device was edited; the pushed configuration stays in force until it is withdrawn"
            );
        }
        *lock(&self.conflicts) = conflicts;
    }

    /// Reloads the pipeline files (when there is a directory), then the device
    /// configuration (when there is a file), so devices may name a pipeline
    /// added in the same go.
    pub fn reload(&self) -> ReloadReport {
        ReloadReport {
            pipelines: self
                .sources
                .pipelines_dir
                .is_some()
                .then(|| self.reload_pipeline_files()),
            devices: self
                .sources
                .config_file
                .is_some()
                .then(|| self.reload_devices()),
        }
    }
}

type Fingerprint = Vec<(PathBuf, u64, Option<SystemTime>)>;

fn stamp(path: PathBuf) -> (PathBuf, u64, Option<SystemTime>) {
    let meta = std::fs::metadata(&path).ok();
    let size = meta.as_ref().map_or(0, std::fs::Metadata::len);
    let modified = meta.and_then(|m| m.modified().ok());
    (path, size, modified)
}

/// Every pipeline file's name, size and modification time.
fn pipeline_files(dir: &Path) -> Fingerprint {
    files_in(dir)
        .unwrap_or_default()
        .into_iter()
        .map(stamp)
        .collect()
}

fn config_file(file: Option<&Path>) -> Fingerprint {
    file.map(|f| stamp(f.to_path_buf())).into_iter().collect()
}

/// Reloads the pipeline files whenever one is added, changed or removed, and
/// the device configuration whenever its file changes (or when new pipelines
/// came while its last reload was refused), until `shutdown`. A change is taken
/// once the files have looked the same for one whole tick, so a file caught
/// while it is being written is not read half-way.
pub async fn watch_sources(
    deployer: Arc<Deployer>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let sources = deployer.sources().clone();
    let dir = sources.pipelines_dir.as_deref();
    let file = sources.config_file.as_deref();
    let look = || (dir.map(pipeline_files), config_file(file));
    let mut applied = look();
    let mut last = applied.clone();
    let mut timer = tokio::time::interval(WATCH_EVERY);
    while crate::clock::next_tick(&mut timer, &mut shutdown).await {
        let now = look();
        let settled = now == last;
        last = now.clone();
        if !settled || now == applied {
            continue;
        }
        let pipelines_changed = now.0 != applied.0;
        let config_changed = now.1 != applied.1;
        applied = now;
        let deployer = Arc::clone(&deployer);
        // Refusals are logged and kept in the status by the reloads themselves.
        let _ = tokio::task::spawn_blocking(move || {
            let pipelines_ok = pipelines_changed && deployer.reload_pipeline_files().is_ok();
            let devices_refused = deployer.device_reload_status().last_error.is_some();
            if config_changed || (pipelines_ok && devices_refused) {
                let _ = deployer.reload_devices();
            }
        })
        .await;
    }
}
