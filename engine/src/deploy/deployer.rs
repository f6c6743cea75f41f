//! The deployer: components uploaded or activated, checked against the running
//! configuration, and put to use in every pipeline, link and sandbox.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use super::error::{DeployError, check_word};
use super::shelf::Shelf;
use super::status::ReloadStatus;
use crate::alarm::Alarms;
use crate::collector::{Fleet, swap_codec, swap_decoder, swap_pipelines};
use crate::compile::{self, Compiled, Conflict, Loaded, Pools, Sources};
use crate::config;
use crate::model::Whitelist;
use crate::pipeline::PipelineSet;
use crate::runtime::{ComponentInfo, ComponentKind, Registry, content_hash};
use crate::sync::lock;
use crate::yaml::Diagnostics;

/// Deploys components into a running engine.
#[derive(Debug)]
pub struct Deployer {
    pub(super) registry: Arc<Registry>,
    pub(super) fleet: Arc<Fleet>,
    /// The alarm service whose rules a rules component's new version replaces.
    pub(super) alarms: Option<Arc<Alarms>>,
    /// The whitelists of the start, which every compile keeps.
    pub(super) whitelist: Whitelist,
    /// The pipelines in use.
    pub(super) pipelines: Mutex<PipelineSet>,
    /// The files they and the devices come from.
    pub(super) sources: Sources,
    pub(super) shelf: Shelf,
    /// One deployment or reload at a time: each one sees the previous one done
    /// (RELOAD-6).
    pub(super) busy: Mutex<()>,
    /// How reloads of the pipeline files, and of the device configuration, went.
    pub(super) status: Mutex<(ReloadStatus, ReloadStatus)>,
    /// Pushed devices whose file entry was edited since their push.
    pub(super) conflicts: Mutex<Vec<Conflict>>,
}

/// What a deployer starts from: what it deploys into (the components, the
/// devices, the alarm rules), what it compiles against, and what the start
/// found on the shelf.
#[derive(Debug)]
pub struct DeployerParts {
    pub registry: Arc<Registry>,
    pub fleet: Arc<Fleet>,
    /// The alarm service whose rules a rules component's new version replaces.
    pub alarms: Option<Arc<Alarms>>,
    /// The pipelines in use.
    pub pipelines: PipelineSet,
    /// The files the pipelines and the devices come from.
    pub sources: Sources,
    /// The whitelists of the start, which every compile keeps.
    pub whitelist: Whitelist,
    /// The deployed components kept in the data directory.
    pub shelf: Shelf,
    /// Pushed devices whose file entry was edited since their push.
    pub conflicts: Vec<Conflict>,
}

impl Deployer {
    pub fn new(parts: DeployerParts) -> Self {
        let DeployerParts {
            registry,
            fleet,
            alarms,
            pipelines,
            sources,
            whitelist,
            shelf,
            conflicts,
        } = parts;
        Self {
            registry,
            fleet,
            alarms,
            whitelist,
            pipelines: Mutex::new(pipelines),
            sources,
            shelf,
            busy: Mutex::new(()),
            status: Mutex::default(),
            conflicts: Mutex::new(conflicts),
        }
    }

    pub fn sources(&self) -> &Sources {
        &self.sources
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
        // A version names one content for good: the same bytes again just
        // make it active, other bytes are refused.
        if let Some(known) = self
            .registry
            .list()
            .into_iter()
            .find(|c| c.name == name && c.version == version)
            && known.hash != content_hash(bytes)
        {
            return Err(DeployError::Taken {
                name: name.to_owned(),
                version: version.to_owned(),
                hash: known.hash,
            });
        }
        let previous = self.active_version(name);
        let loaded = self.registry.install(kind, name, version, bytes)?;
        if let Err(refused) = self.rebuild(kind, name) {
            self.restore_previous(name, previous);
            return Err(refused);
        }
        // On disk before the deployment is answered (COMP-7).
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
        if let Err(refused) = self.rebuild(loaded.kind(), name) {
            self.restore_previous(name, previous);
            return Err(refused);
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

    /// Removes version `version` of `name`, from the registry and the data
    /// directory: an inactive version, or the only one when nothing uses it
    /// (a codec whose protocols devices use is refused, naming them).
    ///
    /// # Errors
    /// No such version, the engine's own build, an active version with others
    /// beside it, a component in use, or storage trouble.
    pub fn remove(&self, name: &str, version: &str) -> Result<ComponentInfo, DeployError> {
        let _one = lock(&self.busy);
        let removed = self.registry.remove(name, version)?;
        let kind = removed.kind();
        let gone = self.registry.active(name).is_none();
        if gone && let Err(refused) = self.rebuild(kind, name) {
            self.registry.put_back(version, Arc::clone(&removed));
            return Err(refused);
        }
        self.shelf.forget(name, version)?;
        tracing::info!(component = name, version, "component removed");
        Ok(ComponentInfo {
            name: name.to_owned(),
            version: version.to_owned(),
            kind,
            hash: removed.hash().to_owned(),
            active: false,
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
    /// a codec in every channel that speaks it (those links reconnect), a decoder
    /// in every device that publishes by itself and names it (from its next
    /// message), rules in every tenant sandbox that runs it. The running configuration is compiled
    /// again with it first; nothing is swapped unless all of it compiles (COMP-6).
    fn rebuild(&self, kind: ComponentKind, name: &str) -> Result<usize, DeployError> {
        if kind == ComponentKind::Codec {
            self.still_spoken(name)?;
        }
        let mut compiled = self.compile_running(None).map_err(DeployError::Breaks)?;
        let roster = self.fleet.roster();
        Ok(match kind {
            ComponentKind::Stage => swap_pipelines(roster.devices(), compiled),
            ComponentKind::Codec => swap_codec(roster.devices(), compiled, name),
            ComponentKind::Rules => self
                .alarms
                .as_ref()
                .map_or(0, |alarms| alarms.replace_rules(&mut compiled, Some(name))),
            ComponentKind::Decoder => swap_decoder(roster.devices(), compiled, name),
        })
    }

    /// Refuses an active version of codec `codec` that no longer speaks a
    /// protocol running devices use, naming them.
    fn still_spoken(&self, codec: &str) -> Result<(), DeployError> {
        let protocols = self.registry.protocols();
        let config = self.fleet.config();
        let mut dropped: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for device in &config.devices {
            for channel in &device.channels {
                let name = channel.protocol.name();
                let spoken = protocols.get(name).is_some_and(|p| p.codec == codec);
                if channel.protocol.codec() == codec && !spoken {
                    dropped
                        .entry(name)
                        .or_default()
                        .insert(device.device_id.as_str());
                }
            }
        }
        if dropped.is_empty() {
            return Ok(());
        }
        let uses: Vec<String> = dropped
            .iter()
            .map(|(protocol, devices)| {
                let devices: Vec<&str> = devices.iter().copied().collect();
                format!("{protocol}, which devices {} use", devices.join(", "))
            })
            .collect();
        Err(DeployError::InUse(format!(
            "this version of codec `{codec}` does not speak {}: change or remove those devices first",
            uses.join("; ")
        )))
    }

    /// The pools the running devices and tenants use, for a device reload to put
    /// the devices it rebuilds in.
    pub(super) fn running_pools(&self) -> Pools {
        let mut pools = Pools::new();
        pools.reuse_whitelist(self.whitelist.clone());
        let roster = self.fleet.roster();
        for (tenant, pool) in roster.codec_pools() {
            pools.reuse_codec(tenant, pool);
        }
        for (tenant, pool) in roster.decoder_pools() {
            pools.reuse_decoder(tenant, pool);
        }
        for (tenant, pool) in self.alarms.iter().flat_map(|a| a.sandboxes()) {
            pools.reuse_rules(tenant, pool);
        }
        pools
    }

    /// Compiles the running configuration with `pipelines` (the running ones if
    /// none) and the registry's active components, in pools of its own: nothing
    /// that runs is called (a quarantined sandbox does not stop a deployment that
    /// fixes it), and what is swapped in comes with sandboxes of the new versions.
    pub(super) fn compile_running(
        &self,
        pipelines: Option<PipelineSet>,
    ) -> Result<Compiled, Diagnostics> {
        let mut pools = Pools::new();
        pools.reuse_whitelist(self.whitelist.clone());
        let pipelines = pipelines.unwrap_or_else(|| lock(&self.pipelines).clone());
        let file = self.sources.config_name();
        // A new version of a codec may declare its settings otherwise.
        let mut config = self.fleet.config();
        config::rebind(&mut config, &self.registry.protocols(), &file)?;
        let loaded = Loaded {
            file,
            config,
            pipelines,
            conflicts: Vec::new(),
        };
        compile::build(loaded, &self.registry, &mut pools, &|_| true)
    }
}
