//! The deployed components in the data directory: `components/NAME/VERSION.wasm`
//! and `components/NAME/manifest.json` (the versions with their content hashes,
//! and which one is active), each written via rename, and installed again at
//! start.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::{DeployError, check_word};
use crate::clock::now_ms;
use crate::runtime::{ComponentKind, Registry};

/// Sub-directory of the data directory holding deployed components.
pub const COMPONENTS_DIR: &str = "components";

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
    /// Forgets version `version` of `name`: its file, and its folder when it
    /// was the last one.
    pub fn forget(&self, name: &str, version: &str) -> Result<(), DeployError> {
        let storage = |e: std::io::Error| DeployError::Storage(e.to_string());
        let Some(mut manifest) = self.manifest(name) else {
            return Ok(()); // never kept: an upload of the same name failed
        };
        manifest.versions.remove(version);
        let folder = self.dir.join(name);
        if manifest.versions.is_empty() {
            return std::fs::remove_dir_all(&folder).map_err(storage);
        }
        self.save_manifest(name, &manifest)?;
        match std::fs::remove_file(folder.join(format!("{version}.wasm"))) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(storage(e)),
            _ => Ok(()),
        }
    }

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
            let Some(kind) = ComponentKind::parse(&manifest.kind) else {
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
