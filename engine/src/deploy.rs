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
use crate::collector::{Device, PipelineSet, SandboxLimits, reload_pipelines};
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
    pipelines: PipelineSet,
    limits: SandboxLimits,
    shelf: Shelf,
    /// One deployment at a time: each one's rebuild sees the previous one done.
    busy: Mutex<()>,
}

impl Deployer {
    pub fn new(
        registry: Arc<Registry>,
        devices: Arc<[Arc<Device>]>,
        (pipelines, limits): (PipelineSet, SandboxLimits),
        shelf: Shelf,
    ) -> Self {
        Self {
            registry,
            devices,
            pipelines,
            limits,
            shelf,
            busy: Mutex::new(()),
        }
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
        let _one = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        let previous = self.active_version(name);
        let loaded = self.registry.install(kind, name, version, bytes)?;
        if let Err(problems) = self.rebuild() {
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
        let _one = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        let previous = self.active_version(name);
        let loaded = self.registry.activate(name, version)?;
        if let Err(problems) = self.rebuild() {
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

    fn rebuild(&self) -> Result<usize, Diagnostics> {
        reload_pipelines(&self.devices, &self.registry, &self.pipelines, &self.limits)
    }
}
