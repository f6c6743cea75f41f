//! The devices the collector runs, as one roster replaced whole when the device
//! configuration changes. Readers (rounds, the HTTP API, commands) take the
//! current roster and keep it for as long as they need; a device that is left
//! out of a new roster finishes its round in progress and is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;

use super::LinkInfo;
use super::build::{self, Builder, PipelineSet, Services};
use super::device::Device;
use super::heartbeat;
use crate::config::{DeviceConfig, GatewayConfig};
use crate::io::Budget;
use crate::lease::{Announce, EntityState, EntityType};
use crate::runtime::Registry;
use crate::scheduler::PlanChange;
use crate::sync::{lock, read, write};
use crate::yaml::Diagnostics;

/// The devices of one configuration and the links they use.
#[derive(Debug, Default)]
pub struct Roster {
    devices: Vec<Arc<Device>>,
    links: Vec<LinkInfo>,
    by_id: HashMap<String, usize>,
    by_key: HashMap<u64, usize>,
}

impl Roster {
    pub(super) fn new(devices: Vec<Arc<Device>>, links: Vec<LinkInfo>) -> Self {
        let by_id = devices
            .iter()
            .enumerate()
            .map(|(i, d)| (d.id.clone(), i))
            .collect();
        let by_key = devices
            .iter()
            .enumerate()
            .map(|(i, d)| (d.key, i))
            .collect();
        Self {
            devices,
            links,
            by_id,
            by_key,
        }
    }

    /// The polled devices, in configuration order.
    pub fn devices(&self) -> &[Arc<Device>] {
        &self.devices
    }

    /// The links the devices use, each once.
    pub fn links(&self) -> &[LinkInfo] {
        &self.links
    }

    /// The device with this `deviceId`.
    pub fn get(&self, id: &str) -> Option<&Arc<Device>> {
        self.by_id.get(id).map(|i| &self.devices[*i])
    }

    /// The device built with this [`Device::key`].
    pub fn by_key(&self, key: u64) -> Option<&Arc<Device>> {
        self.by_key.get(&key).map(|i| &self.devices[*i])
    }

    /// The device with this MQTT identity.
    pub fn by_identity(&self, product_id: &str, device_num: &str) -> Option<&Arc<Device>> {
        self.devices
            .iter()
            .find(|d| d.product_id == product_id && d.device_num == device_num)
    }
}

/// What a reload of the device configuration did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceChanges {
    pub added: Vec<String>,
    /// Rebuilt: their configuration (or their product's) changed.
    pub changed: Vec<String>,
    pub removed: Vec<String>,
    pub unchanged: usize,
    /// Sections that changed too but apply only at the next start.
    pub restart_needed: Vec<&'static str>,
}

/// What was applied last, and the heartbeats running for it.
#[derive(Debug)]
struct Applied {
    config: GatewayConfig,
    links_made: u64,
    heartbeats: HashMap<(u64, usize), AbortHandle>,
    /// Set once the collector runs: heartbeats start from then on.
    shutdown: Option<watch::Receiver<bool>>,
}

/// The running collector's devices, and what it takes to change them.
#[derive(Debug)]
pub struct Fleet {
    roster: RwLock<Arc<Roster>>,
    /// Counts roster changes, for whoever keeps something per device.
    generation: watch::Sender<u64>,
    services: Services,
    budget: Budget,
    plans: mpsc::UnboundedSender<PlanChange>,
    /// Held through a reload: one at a time.
    applied: Mutex<Applied>,
}

impl Fleet {
    pub(super) fn new(
        roster: Roster,
        (config, links_made): (GatewayConfig, u64),
        (services, budget): (Services, Budget),
        plans: mpsc::UnboundedSender<PlanChange>,
    ) -> Self {
        Self {
            roster: RwLock::new(Arc::new(roster)),
            generation: watch::Sender::new(0),
            services,
            budget,
            plans,
            applied: Mutex::new(Applied {
                config,
                links_made,
                heartbeats: HashMap::new(),
                shutdown: None,
            }),
        }
    }

    /// The current devices.
    pub fn roster(&self) -> Arc<Roster> {
        Arc::clone(&read(&self.roster))
    }

    /// Changes whenever the devices change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    pub(super) fn services(&self) -> &Services {
        &self.services
    }

    /// The alarm service the devices' rules run in, if any.
    pub fn alarms(&self) -> Option<&Arc<crate::alarm::Alarms>> {
        self.services.alarms.as_ref()
    }

    /// Starts the heartbeats of the current links; later rosters start theirs as
    /// they come. Needs the runtime.
    pub(super) fn start(&self, shutdown: watch::Receiver<bool>) {
        let mut applied = lock(&self.applied);
        applied.shutdown = Some(shutdown);
        self.sync_heartbeats(&mut applied, &self.roster());
    }

    /// Runs one heartbeat per link that asks for it: keeps those of unchanged
    /// devices running, stops the others, starts the new ones.
    fn sync_heartbeats(&self, applied: &mut Applied, roster: &Roster) {
        let Some(shutdown) = applied.shutdown.clone() else {
            return;
        };
        let allowed = applied.config.collector.heartbeat_failures.max(1);
        let wanted = heartbeat::for_links(roster.devices(), allowed);
        let mut running = std::mem::take(&mut applied.heartbeats);
        for beat in wanted {
            let key = beat.key();
            let handle = match running.remove(&key) {
                Some(handle) => handle,
                None => tokio::spawn(beat.run(shutdown.clone())).abort_handle(),
            };
            applied.heartbeats.insert(key, handle);
        }
        for stale in running.into_values() {
            stale.abort();
        }
    }

    /// Applies a new device configuration: devices whose configuration did not
    /// change keep running untouched (their connections, sessions and rounds);
    /// changed ones are rebuilt, new ones added, and removed ones stopped after
    /// their round in progress. All or nothing: when any device cannot be built,
    /// nothing changes. Only `devices` and `products` apply live; `collector` and
    /// `tenants` are reported as needing a restart. Blocking (compiles pipelines).
    ///
    /// # Errors
    /// Every problem found, at its position in `file`.
    pub fn reload(
        &self,
        file: &str,
        new: &GatewayConfig,
        registry: &Registry,
        pipelines: &PipelineSet,
    ) -> Result<DeviceChanges, Diagnostics> {
        let mut applied = lock(&self.applied);
        let running = &applied.config;
        let mut changes = DeviceChanges {
            restart_needed: restart_needed(running, new),
            ..DeviceChanges::default()
        };
        let mut config = GatewayConfig {
            collector: running.collector.clone(),
            tenants: running.tenants.clone(),
            products: new.products.clone(),
            devices: new.devices.clone(),
        };
        // A tenant's fallback pipeline is the running one, like the rest of `tenants`.
        crate::config::resolve_pipelines(&mut config.devices, &config.products, &config.tenants);
        let previous = self.roster();
        let mut builder = Builder::new(
            (file, &config),
            (registry, pipelines),
            (&self.services, &self.budget),
            Some(&previous),
            applied.links_made,
        );
        // Kept first, so their links are in place before any device is built:
        // a rebuilt device on the same endpoint shares them.
        let wanted = build::wanted_links(&config);
        let enabled: Vec<&DeviceConfig> = config.devices.iter().filter(|d| d.enabled).collect();
        let kept: Vec<Option<&Arc<Device>>> = enabled
            .iter()
            .map(|device| {
                let old = previous.get(&device.device_id)?;
                let same = running
                    .device(&device.device_id)
                    .is_some_and(|before| before.enabled && before.same_as(device))
                    && product_timeout(running, device) == product_timeout(&config, device)
                    && build::links_fit(old, &previous, &wanted);
                same.then_some(old)
            })
            .collect();
        for old in kept.iter().flatten() {
            builder.keep(old);
        }
        let mut devices = Vec::new();
        let mut rules = Vec::new();
        for (device, kept) in enabled.into_iter().zip(kept) {
            if let Some(old) = kept {
                devices.push(Arc::clone(old));
                changes.unchanged += 1;
                continue;
            }
            if device.tenant_id != 0 && running.tenant(device.tenant_id).is_none() {
                builder.errors().push(
                    device.pos,
                    format!(
                        "device `{}`: tenant {} is new; tenants are added at the next start",
                        device.device_id, device.tenant_id
                    ),
                );
                continue;
            }
            if previous.get(&device.device_id).is_some() {
                changes.changed.push(device.device_id.clone());
            } else {
                changes.added.push(device.device_id.clone());
            }
            let Some(built) = builder.device(device) else {
                continue;
            };
            if let Some(alarms) = &self.services.alarms {
                match crate::alarm::build::device_rules(alarms, device, pipelines) {
                    Ok(Some(device_rules)) => {
                        rules.push((device.device_id.clone(), built.key, device_rules));
                    }
                    Ok(None) => {}
                    Err(error) => builder.errors().push(device.pos, error),
                }
            }
            devices.push(built);
        }
        let (links, links_made, errors) = builder.finish();
        if !errors.is_empty() {
            return Err(errors);
        }
        changes.removed = previous
            .devices()
            .iter()
            .filter(|d| {
                !config
                    .devices
                    .iter()
                    .any(|c| c.enabled && c.device_id == d.id)
            })
            .map(|d| d.id.clone())
            .collect();
        let roster = Arc::new(Roster::new(devices, links));
        self.commit(&previous, &roster, rules, &changes);
        applied.config = config;
        applied.links_made = links_made;
        self.sync_heartbeats(&mut applied, &roster);
        Ok(changes)
    }

    /// Puts a checked roster in place and tells everyone who keeps something per
    /// device: alarm rules, lease announcements, the scheduler.
    fn commit(
        &self,
        previous: &Roster,
        roster: &Arc<Roster>,
        rules: Vec<(String, u64, crate::alarm::DeviceRules)>,
        changes: &DeviceChanges,
    ) {
        let leases = &self.services.leases;
        if let Some(alarms) = &self.services.alarms {
            // A changed device's rules are replaced (or dropped when its new
            // pipeline has none); a late round of its old build finds them taken.
            for id in changes.removed.iter().chain(&changes.changed) {
                alarms.detach(id);
            }
            for (id, build, device_rules) in rules {
                alarms.attach(&id, build, device_rules);
            }
        }
        for id in changes.added.iter().chain(&changes.changed) {
            if let Some(device) = roster.get(id) {
                leases.announce(
                    (EntityType::Device, id.clone()),
                    Announce::device(
                        &self.services.uplink,
                        &device.product_id,
                        &device.device_num,
                    ),
                );
            }
        }
        *write(&self.roster) = Arc::clone(roster);
        for id in &changes.removed {
            if let Some(old) = previous.get(id) {
                // The scheduler outlives the fleet's users; a send fails only at shutdown.
                let _ = self.plans.send(PlanChange::Remove(old.key));
            }
        }
        for id in &changes.changed {
            if let (Some(old), Some(new)) = (previous.get(id), roster.get(id)) {
                let _ = self.plans.send(PlanChange::Replace(old.key, new.plan()));
            }
        }
        for id in &changes.added {
            if let Some(device) = roster.get(id) {
                let _ = self.plans.send(PlanChange::Add(device.plan()));
            }
        }
        for id in &changes.removed {
            if let Err(error) = leases.retire(EntityType::Device, id, EntityState::Offline) {
                tracing::error!(device = %id, %error, "cannot mark a removed device offline");
            }
        }
        self.generation.send_modify(|generation| *generation += 1);
        tracing::info!(
            added = changes.added.len(),
            changed = changes.changed.len(),
            removed = changes.removed.len(),
            unchanged = changes.unchanged,
            "devices reloaded"
        );
    }
}

/// The lease length its product gives `device` in `config`.
fn product_timeout(config: &GatewayConfig, device: &DeviceConfig) -> Option<u64> {
    config
        .product(&device.product_id)
        .and_then(|p| p.state_timeout_s)
}

/// The sections of `new` that differ from the running ones but cannot change live.
fn restart_needed(running: &GatewayConfig, new: &GatewayConfig) -> Vec<&'static str> {
    let mut sections = Vec::new();
    if running.collector != new.collector {
        sections.push("collector");
    }
    let same_tenants = running.tenants.len() == new.tenants.len()
        && running
            .tenants
            .iter()
            .zip(&new.tenants)
            .all(|(a, b)| a.same_as(b));
    if !same_tenants {
        sections.push("tenants");
    }
    sections
}
