//! Components deployed while the engine runs: uploaded versions are compiled and
//! checked against their world, every device's pipeline is rebuilt with them off
//! the hot path, and the new pipelines are swapped in at each device's next round.
//! A version that breaks any pipeline is rolled back before a device sees it.
//! Deployed versions are kept in the data directory (`components/NAME/VERSION.wasm`
//! and `components/NAME/manifest.json`, written via rename) and installed again at
//! start, with the version that was active.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::clock::now_ms;
use crate::collector::{Device, PipelineSet, SandboxLimits, reload_codec, reload_pipelines};
use crate::runtime::{ComponentInfo, ComponentKind, LoadError, Registry};
use crate::yaml::Diagnostics;

/// Sub-directory of the data directory holding deployed components.
pub const COMPONENTS_DIR: &str = "components";

/// Why a deployment was refused; nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("the new version breaks a pipeline, so the previous one stays active:\n{0}")]
    Breaks(Diagnostics),
    #[error("cannot keep the component in the data directory: {0}")]
    Storage(String),
    #[error("the pipeline files have problems, so the running pipelines stay:\n{0}")]
    Pipelines(Diagnostics),
}

/// How reloads of the pipeline files went, for `/health` and `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReloadStatus {
    /// Reloads that swapped new pipelines in.
    pub reloads: u64,
    /// Reloads refused; the running pipelines stayed.
    pub failures: u64,
    /// Why the last reload was refused, until one succeeds.
    pub last_error: Option<String>,
}

/// What the data directory records of one component name.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    kind: String,
    active: String,
    /// Version -> content hash.
    versions: BTreeMap<String, String>,
}

fn kind_name(kind: ComponentKind) -> &'static str {
    kind.as_str()
}

/// `codec`, `stage` or `rules`.
pub fn parse_kind(text: &str) -> Option<ComponentKind> {
    [
        ComponentKind::Codec,
        ComponentKind::Stage,
        ComponentKind::Rules,
    ]
    .into_iter()
    .find(|k| k.as_str() == text)
}

/// A name or version usable as a file name: letters, digits, `.`, `_`, `-`.
fn check_word(what: &str, word: &str) -> Result<(), DeployError> {
    let fine = !word.is_empty()
        && word.len() <= 64
        && !word.starts_with('.')
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if fine {
        Ok(())
    } else {
        Err(DeployError::Invalid(format!(
            "{what} `{word}`: use 1 to 64 letters, digits, `.`, `_` or `-`, not starting with `.`"
        )))
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temporary = path.with_extension(format!("tmp-{}", now_ms()));
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, path)
}

/// The deployed components in a data directory.
#[derive(Debug, Clone)]
pub struct Shelf {
    dir: PathBuf,
}

impl Shelf {
    pub fn new(data_dir: &Path) -> Self {
        Self {
            dir: data_dir.join(COMPONENTS_DIR),
        }
    }

    fn manifest_path(&self, name: &str) -> PathBuf {
        self.dir.join(name).join("manifest.json")
    }

    fn manifest(&self, name: &str) -> Option<Manifest> {
        let text = std::fs::read(self.manifest_path(name)).ok()?;
        serde_json::from_slice(&text).ok()
    }

    fn save_manifest(&self, name: &str, manifest: &Manifest) -> Result<(), DeployError> {
        let bytes =
            serde_json::to_vec_pretty(manifest).map_err(|e| DeployError::Storage(e.to_string()))?;
        write_atomically(&self.manifest_path(name), &bytes)
            .map_err(|e| DeployError::Storage(e.to_string()))
    }

    /// Keeps `bytes` as `version` of `name` and records it as the active one.
    ///
    /// # Errors
    /// A bad name or version, or the file system refused.
    pub fn keep(
        &self,
        kind: ComponentKind,
        name: &str,
        version: &str,
        bytes: &[u8],
        hash: &str,
    ) -> Result<(), DeployError> {
        check_word("name", name)?;
        check_word("version", version)?;
        let folder = self.dir.join(name);
        std::fs::create_dir_all(&folder).map_err(|e| DeployError::Storage(e.to_string()))?;
        write_atomically(&folder.join(format!("{version}.wasm")), bytes)
            .map_err(|e| DeployError::Storage(e.to_string()))?;
        let mut manifest = self.manifest(name).unwrap_or_default();
        manifest.kind = kind_name(kind).to_owned();
        manifest.active = version.to_owned();
        manifest
            .versions
            .insert(version.to_owned(), hash.to_owned());
        self.save_manifest(name, &manifest)
    }

    /// Records that `version` of `name` is the active one.
    ///
    /// # Errors
    /// The file system refused.
    pub fn record_active(
        &self,
        kind: ComponentKind,
        name: &str,
        version: &str,
    ) -> Result<(), DeployError> {
        let mut manifest = self.manifest(name).unwrap_or_default();
        manifest.kind = kind_name(kind).to_owned();
        manifest.active = version.to_owned();
        std::fs::create_dir_all(self.dir.join(name))
            .map_err(|e| DeployError::Storage(e.to_string()))?;
        self.save_manifest(name, &manifest)
    }

    /// Installs every kept version into `registry` and activates the recorded
    /// one; returns what could not be installed (the engine runs without it).
    pub fn restore(&self, registry: &Registry) -> Vec<String> {
        let mut problems = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return problems;
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        for name in names {
            let Some(manifest) = self.manifest(&name) else {
                problems.push(format!("component `{name}`: unreadable manifest"));
                continue;
            };
            let Some(kind) = parse_kind(&manifest.kind) else {
                problems.push(format!(
                    "component `{name}`: unknown kind `{}`",
                    manifest.kind
                ));
                continue;
            };
            for version in manifest.versions.keys() {
                let path = self.dir.join(&name).join(format!("{version}.wasm"));
                let installed = std::fs::read(&path)
                    .map_err(|e| e.to_string())
                    .and_then(|bytes| {
                        registry
                            .install(kind, &name, version, &bytes)
                            .map_err(|e| e.to_string())
                    });
                if let Err(error) = installed {
                    problems.push(format!("component `{name}` version `{version}`: {error}"));
                }
            }
            if let Err(error) = registry.activate(&name, &manifest.active) {
                problems.push(format!("component `{name}`: {error}"));
            }
        }
        problems
    }
}

/// Deploys components into a running engine.
#[derive(Debug)]
pub struct Deployer {
    registry: Arc<Registry>,
    devices: Arc<[Arc<Device>]>,
    /// The pipeline files in use, and the directory they come from.
    pipelines: Mutex<PipelineSet>,
    pipelines_dir: Option<PathBuf>,
    limits: SandboxLimits,
    shelf: Shelf,
    /// One deployment at a time: each one's rebuild sees the previous one done.
    busy: Mutex<()>,
    status: Mutex<ReloadStatus>,
}

impl Deployer {
    pub fn new(
        registry: Arc<Registry>,
        devices: Arc<[Arc<Device>]>,
        (pipelines, pipelines_dir, limits): (PipelineSet, Option<PathBuf>, SandboxLimits),
        shelf: Shelf,
    ) -> Self {
        Self {
            registry,
            devices,
            pipelines: Mutex::new(pipelines),
            pipelines_dir,
            limits,
            shelf,
            busy: Mutex::new(()),
            status: Mutex::default(),
        }
    }

    pub fn pipelines_dir(&self) -> Option<&Path> {
        self.pipelines_dir.as_deref()
    }

    pub fn reload_status(&self) -> ReloadStatus {
        lock(&self.status).clone()
    }

    /// Reads the pipeline files again and, when every pipeline builds for every
    /// device, swaps them in at each device's next round. Blocking.
    ///
    /// # Errors
    /// No pipelines directory, or problems in a file or in building a pipeline
    /// (`FILE:LINE:COL` each); the running pipelines stay.
    pub fn reload_pipeline_files(&self) -> Result<usize, DeployError> {
        let Some(dir) = &self.pipelines_dir else {
            return Err(DeployError::Invalid(
                "the engine runs without --pipelines: only the built-in pipeline is in use".into(),
            ));
        };
        let _one = lock(&self.busy);
        let result = PipelineSet::load_dir(dir)
            .map_err(DeployError::Pipelines)
            .and_then(|set| {
                let swapped = reload_pipelines(&self.devices, &self.registry, &set, &self.limits)
                    .map_err(DeployError::Pipelines)?;
                *lock(&self.pipelines) = set;
                Ok(swapped)
            });
        let mut status = lock(&self.status);
        match &result {
            Ok(swapped) => {
                status.reloads += 1;
                status.last_error = None;
                tracing::info!(devices = swapped, "pipelines reloaded");
            }
            Err(error) => {
                status.failures += 1;
                status.last_error = Some(error.to_string());
                tracing::error!(%error, "pipeline reload refused");
            }
        }
        result
    }

    pub fn list(&self) -> Vec<ComponentInfo> {
        self.registry.list()
    }

    /// Installs `bytes` as `version` of `name` and makes it active in every
    /// pipeline (from each device's next round), or changes nothing. Blocking:
    /// compiles and rebuilds.
    ///
    /// # Errors
    /// Bytes that are not a component of `kind`, a bad name or version, a version
    /// that breaks a pipeline (rolled back), or storage trouble.
    pub fn upload(
        &self,
        kind: ComponentKind,
        name: &str,
        version: &str,
        bytes: &[u8],
    ) -> Result<ComponentInfo, DeployError> {
        check_word("name", name)?;
        check_word("version", version)?;
        let _one = lock(&self.busy);
        let previous = self.active_version(name);
        let loaded = self.registry.install(kind, name, version, bytes)?;
        if let Err(problems) = self.rebuild(kind, name) {
            self.restore_previous(name, previous);
            return Err(DeployError::Breaks(problems));
        }
        self.shelf.keep(kind, name, version, bytes, loaded.hash())?;
        tracing::info!(
            component = name,
            version,
            hash = loaded.hash(),
            "component deployed"
        );
        Ok(ComponentInfo {
            name: name.to_owned(),
            version: version.to_owned(),
            kind,
            hash: loaded.hash().to_owned(),
            active: true,
        })
    }

    /// Makes an earlier (or later) registered version active again: a rollback.
    ///
    /// # Errors
    /// No such version, or it breaks a pipeline (the active one stays).
    pub fn activate(&self, name: &str, version: &str) -> Result<ComponentInfo, DeployError> {
        let _one = lock(&self.busy);
        let previous = self.active_version(name);
        let loaded = self.registry.activate(name, version)?;
        if let Err(problems) = self.rebuild(loaded.kind(), name) {
            self.restore_previous(name, previous);
            return Err(DeployError::Breaks(problems));
        }
        self.shelf.record_active(loaded.kind(), name, version)?;
        tracing::info!(component = name, version, "component activated");
        Ok(ComponentInfo {
            name: name.to_owned(),
            version: version.to_owned(),
            kind: loaded.kind(),
            hash: loaded.hash().to_owned(),
            active: true,
        })
    }

    fn active_version(&self, name: &str) -> Option<String> {
        self.registry
            .list()
            .into_iter()
            .find(|c| c.name == name && c.active)
            .map(|c| c.version)
    }

    fn restore_previous(&self, name: &str, previous: Option<String>) {
        if let Some(previous) = previous
            && let Err(error) = self.registry.activate(name, &previous)
        {
            tracing::error!(component = name, %error, "cannot restore the previous version");
        }
    }

    /// Puts the new active version of `name` to use: stages in every pipeline,
    /// a codec in every channel that speaks it (those links reconnect); rules
    /// evaluators are rebuilt at the next start.
    fn rebuild(&self, kind: ComponentKind, name: &str) -> Result<usize, Diagnostics> {
        match kind {
            ComponentKind::Stage => {
                let pipelines = lock(&self.pipelines);
                reload_pipelines(&self.devices, &self.registry, &pipelines, &self.limits)
            }
            ComponentKind::Codec => reload_codec(&self.devices, &self.registry, name, &self.limits),
            ComponentKind::Rules => Ok(0),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// How often the pipeline files are looked at for changes.
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// What the watcher compares: every YAML file's name, size and modification time.
fn fingerprint(dir: &Path) -> Vec<(PathBuf, u64, Option<std::time::SystemTime>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .map(|p| {
            let meta = std::fs::metadata(&p).ok();
            let size = meta.as_ref().map_or(0, std::fs::Metadata::len);
            let modified = meta.and_then(|m| m.modified().ok());
            (p, size, modified)
        })
        .collect();
    files.sort();
    files
}

/// Reloads the pipeline files whenever one is added, changed or removed, until
/// `shutdown`. Does nothing without a pipelines directory.
pub async fn watch_pipelines(
    deployer: Arc<Deployer>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let Some(dir) = deployer.pipelines_dir().map(Path::to_path_buf) else {
        return;
    };
    let mut seen = fingerprint(&dir);
    let mut timer = tokio::time::interval(WATCH_EVERY);
    loop {
        tokio::select! {
            _ = timer.tick() => {}
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    return;
                }
            }
        }
        let now = fingerprint(&dir);
        if now == seen {
            continue;
        }
        seen = now;
        let deployer = Arc::clone(&deployer);
        // Refusals are logged and kept in the status by the reload itself.
        let _ = tokio::task::spawn_blocking(move || deployer.reload_pipeline_files()).await;
    }
}
