//! Component versions by name, with an atomic swap of the active version.
//!
//! A new version is compiled and checked against its world before the registry's
//! lock is taken; only a component that passed replaces the active one, in one
//! step (COMP-4). Users of a component pick up the active version at their next
//! round boundary, never in the middle of one.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use super::{ComponentKind, LoadError, LoadedComponent, Runtime};
use crate::model::Protocols;
use crate::sync::{lock, read, write};

/// What a caller may know of a registered version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentInfo {
    pub name: String,
    pub version: String,
    pub kind: ComponentKind,
    pub hash: String,
    pub active: bool,
}

#[derive(Default)]
struct Entry {
    versions: BTreeMap<String, Arc<LoadedComponent>>,
    active: String,
}

/// Every component the engine can use, by name.
pub struct Registry {
    runtime: Runtime,
    entries: RwLock<BTreeMap<String, Entry>>,
    /// Stages composed into the built-in `chain_socket`, by the stage's name and hash.
    plugged: Mutex<HashMap<(String, String), Arc<LoadedComponent>>>,
    /// Bumped whenever the active version of some component changes.
    changed: tokio::sync::watch::Sender<u64>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").finish_non_exhaustive()
    }
}

impl Registry {
    /// A registry holding the components built into the engine binary.
    ///
    /// # Errors
    /// When a built-in component does not load (a broken build).
    pub fn with_builtins(runtime: Runtime) -> Result<Self, LoadError> {
        let registry = Self {
            runtime,
            entries: RwLock::default(),
            plugged: Mutex::default(),
            changed: tokio::sync::watch::Sender::new(0),
        };
        for builtin in super::builtin::BUILTIN {
            registry.install(
                builtin.kind,
                builtin.name,
                super::builtin::BUILTIN_VERSION,
                &builtin.wasm.inflate(builtin.name)?,
            )?;
        }
        Ok(registry)
    }

    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Tells of every change of an active version (install or activate).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// Compiles and checks `bytes`, then makes them the active version of `name`.
    /// Installing the same version again replaces it.
    ///
    /// # Errors
    /// When the component does not load or is of another kind than the versions
    /// already registered under `name`; the active version is then unchanged.
    pub fn install(
        &self,
        kind: ComponentKind,
        name: &str,
        version: &str,
        bytes: &[u8],
    ) -> Result<Arc<LoadedComponent>, LoadError> {
        if let Some(existing) = self.active(name)
            && existing.kind() != kind
        {
            return Err(LoadError::WrongWorld {
                name: name.to_owned(),
                kind,
                detail: format!(
                    "`{name}` is already registered as a {} component",
                    existing.kind()
                ),
            });
        }
        // Compile and check outside the lock: readers are never held up.
        let loaded = self.runtime.load(kind, name, bytes)?;
        let mut entries = write(&self.entries);
        speaks_alone(&entries, &loaded)?;
        let entry = entries.entry(name.to_owned()).or_default();
        entry
            .versions
            .insert(version.to_owned(), Arc::clone(&loaded));
        entry.active = version.to_owned();
        drop(entries);
        self.bump();
        tracing::debug!(component = name, version, kind = %kind, hash = loaded.hash(), "component installed");
        Ok(loaded)
    }

    /// Makes an earlier version of `name` active again.
    ///
    /// # Errors
    /// When no such version is registered.
    pub fn activate(&self, name: &str, version: &str) -> Result<Arc<LoadedComponent>, LoadError> {
        let mut entries = write(&self.entries);
        let loaded = entries
            .get(name)
            .and_then(|entry| entry.versions.get(version))
            .cloned()
            .ok_or_else(|| unknown(name, version))?;
        speaks_alone(&entries, &loaded)?;
        let Some(entry) = entries.get_mut(name) else {
            return Err(unknown(name, version));
        };
        entry.active = version.to_owned();
        drop(entries);
        self.bump();
        Ok(loaded)
    }

    /// Takes version `version` of `name` out: an inactive version, or the
    /// active one when it is the only one (the name goes with it). Returns it,
    /// for [`Registry::put_back`].
    ///
    /// # Errors
    /// No such version, the engine's own build, or the active version of a
    /// name with others (one of them must be made active first).
    pub fn remove(&self, name: &str, version: &str) -> Result<Arc<LoadedComponent>, LoadError> {
        let mut entries = write(&self.entries);
        let entry = entries
            .get_mut(name)
            .ok_or_else(|| unknown(name, version))?;
        let refused = |detail: String| LoadError::Invalid {
            name: name.to_owned(),
            detail,
        };
        if version == super::builtin::BUILTIN_VERSION {
            return Err(refused(
                "the engine's own build stays: upload another version to use instead".into(),
            ));
        }
        if entry.active == version && entry.versions.len() > 1 {
            return Err(refused(format!(
                "version `{version}` is active: make another version active first"
            )));
        }
        let removed = entry
            .versions
            .remove(version)
            .ok_or_else(|| unknown(name, version))?;
        if entry.versions.is_empty() {
            entries.remove(name);
            drop(entries);
            self.bump();
        }
        Ok(removed)
    }

    /// Registers again a version [`Registry::remove`] took out (a removal that
    /// was refused after all), active if nothing else of its name is.
    pub fn put_back(&self, version: &str, component: Arc<LoadedComponent>) {
        let mut entries = write(&self.entries);
        let entry = entries.entry(component.name().to_owned()).or_default();
        if entry.versions.is_empty() {
            entry.active = version.to_owned();
        }
        entry.versions.insert(version.to_owned(), component);
        drop(entries);
        self.bump();
    }

    /// The active version of `name`.
    pub fn active(&self, name: &str) -> Option<Arc<LoadedComponent>> {
        let entries = read(&self.entries);
        let entry = entries.get(name)?;
        entry.versions.get(&entry.active).cloned()
    }

    /// The protocols the active codecs speak, by name.
    pub fn protocols(&self) -> Protocols {
        let entries = read(&self.entries);
        let mut protocols = Protocols::default();
        for loaded in active_codecs(&entries) {
            // Installs and activations keep each protocol to one codec.
            if let Err(taken) = protocols.add(loaded.protocols()) {
                tracing::error!(codec = loaded.name(), %taken, "two codecs speak one protocol");
            }
        }
        protocols
    }

    /// A given version of `name`, active or not.
    pub fn version(&self, name: &str, version: &str) -> Option<Arc<LoadedComponent>> {
        let entries = read(&self.entries);
        entries.get(name)?.versions.get(version).cloned()
    }

    /// Whether `component` is the engine's own build of its name: a built-in, not
    /// an upload registered under a built-in's name.
    pub fn is_builtin(&self, component: &LoadedComponent) -> bool {
        self.version(component.name(), super::builtin::BUILTIN_VERSION)
            .is_some_and(|builtin| builtin.hash() == component.hash())
    }

    /// `stage` composed into the built-in `chain_socket`, composed and compiled
    /// once per stage build and kept while a pipeline uses it.
    ///
    /// # Errors
    /// As for [`Runtime::plug_into_chain`].
    pub fn plugged_into_chain(
        &self,
        stage: &LoadedComponent,
    ) -> Result<Arc<LoadedComponent>, LoadError> {
        let key = (stage.name().to_owned(), stage.hash().to_owned());
        if let Some(composed) = lock(&self.plugged).get(&key) {
            return Ok(Arc::clone(composed));
        }
        // Composed and compiled outside the lock; two builds at once both compose.
        let composed = self.runtime.plug_into_chain(stage)?;
        let mut plugged = lock(&self.plugged);
        // Compositions no pipeline holds any more (their stage replaced) go.
        plugged.retain(|_, kept| Arc::strong_count(kept) > 1);
        plugged.insert(key, Arc::clone(&composed));
        Ok(composed)
    }

    /// Every registered version, by name then version.
    pub fn list(&self) -> Vec<ComponentInfo> {
        let entries = read(&self.entries);
        entries
            .iter()
            .flat_map(|(name, entry)| {
                entry
                    .versions
                    .iter()
                    .map(move |(version, loaded)| ComponentInfo {
                        name: name.clone(),
                        version: version.clone(),
                        kind: loaded.kind(),
                        hash: loaded.hash().to_owned(),
                        active: *version == entry.active,
                    })
            })
            .collect()
    }
}

/// The active version of every codec.
fn active_codecs(entries: &BTreeMap<String, Entry>) -> impl Iterator<Item = &Arc<LoadedComponent>> {
    entries
        .values()
        .filter_map(|entry| entry.versions.get(&entry.active))
        .filter(|loaded| loaded.kind() == ComponentKind::Codec)
}

/// Refuses a codec that would speak a protocol the active version of another
/// codec speaks: a channel's protocol names one codec.
fn speaks_alone(
    entries: &BTreeMap<String, Entry>,
    codec: &LoadedComponent,
) -> Result<(), LoadError> {
    let mut others = Protocols::default();
    for loaded in active_codecs(entries).filter(|l| l.name() != codec.name()) {
        // Already one codec a protocol: adding cannot fail.
        let _ = others.add(loaded.protocols());
    }
    others
        .add(codec.protocols())
        .map_err(|taken| LoadError::ProtocolTaken {
            name: codec.name().to_owned(),
            taken,
        })
}

fn unknown(name: &str, version: &str) -> LoadError {
    LoadError::Invalid {
        name: name.to_owned(),
        detail: format!("no version `{version}` is registered"),
    }
}
