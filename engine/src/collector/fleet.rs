//! The devices the collector runs, as one roster replaced whole when the device
//! configuration changes. Readers (rounds, the HTTP API, commands) take the
//! current roster and keep it for as long as they need; a device that is left
//! out of a new roster finishes its round in progress and is dropped.
//!
//! A reload has two steps: [`Fleet::begin_reload`] decides which devices are kept
//! as they run and which are rebuilt; the caller compiles the rebuilt ones, and
//! [`PendingReload::apply`] wires and commits them, all or nothing.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;

use super::heartbeat;
use super::links::wanted_links;
use super::roster::Roster;
use super::wiring::{Services, Wiring};
use crate::compile::Compiled;
use crate::config::{DeviceConfig, GatewayConfig, resolve_pipelines};
use crate::io::Budget;
use crate::lease::{Announce, EntityKey, EntityState};
use crate::scheduler::ScheduleChange;
use crate::sync::{lock, read, write};
use crate::yaml::Diagnostics;

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
    scheduler: mpsc::UnboundedSender<ScheduleChange>,
    /// Held through a reload: one at a time.
    applied: Mutex<Applied>,
}

/// What a fleet starts from: its first roster, the configuration that roster was
/// built from, and what its devices are wired to.
#[derive(Debug)]
pub(super) struct FleetParts {
    pub(super) roster: Roster,
    pub(super) config: GatewayConfig,
    /// Links made so far: it seeds the reconnect jitter of the next ones.
    pub(super) links_made: u64,
    pub(super) services: Services,
    pub(super) budget: Budget,
    /// Where changes of the devices polled go (the scheduler).
    pub(super) scheduler: mpsc::UnboundedSender<ScheduleChange>,
}

impl Fleet {
    pub(super) fn new(parts: FleetParts) -> Self {
        let FleetParts {
            roster,
            config,
            links_made,
            services,
            budget,
            scheduler,
        } = parts;
        Self {
            roster: RwLock::new(Arc::new(roster)),
            generation: watch::Sender::new(0),
            services,
            budget,
            scheduler,
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

    /// The configuration the devices run with now.
    pub fn config(&self) -> GatewayConfig {
        lock(&self.applied).config.clone()
    }

    /// What `read` takes from the configuration the devices run with now, without
    /// a copy of the whole of it (a large fleet's is tens of MiB). Holds the lock
    /// reloads take: `read` must not wait.
    pub fn read_config<T>(&self, read: impl FnOnce(&GatewayConfig) -> T) -> T {
        read(&lock(&self.applied).config)
    }

    /// Changes whenever the devices change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    pub(super) fn services(&self) -> &Services {
        &self.services
    }

    /// The connections to the brokers devices publish to, by address.
    pub fn device_brokers(&self) -> Vec<(String, crate::intake::BrokerState)> {
        self.services.device_brokers.states()
    }

    /// Whether this engine may poll `device` now (STATE-S7 of docs/state.md).
    pub fn owns(&self, device: &str) -> bool {
        self.services.ownership.owns(device)
    }

    /// Told of every round that brought samples.
    pub fn rounds_done(&self) -> &Arc<super::latest::RoundsDone> {
        &self.services.rounds_done
    }

    /// Who polls the devices.
    pub fn ownership(&self) -> &Arc<super::ownership::Ownership> {
        &self.services.ownership
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
        let wanted = heartbeat::for_links(roster.devices(), allowed, &self.services.ownership);
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

    /// Starts a reload to the device configuration `new` (read from `file`):
    /// devices whose configuration did not change are kept running untouched
    /// (RELOAD-1: their connections, sessions and rounds); the others are to be compiled and
    /// handed to [`PendingReload::apply`]. Only `devices` and `products` apply live;
    /// `collector` and `tenants` are reported as needing a restart. One reload at
    /// a time: the pending reload holds the fleet until it is applied or dropped.
    pub fn begin_reload(&self, file: &str, new: &GatewayConfig) -> PendingReload<'_> {
        let applied = lock(&self.applied);
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
        resolve_pipelines(&mut config.devices, &config.products, &config.tenants);
        let previous = self.roster();
        let wanted = wanted_links(&config);
        let mut problems = Diagnostics::new(file);
        let mut kept = HashSet::new();
        for device in config.devices.iter().filter(|d| d.enabled) {
            let old = previous.get(&device.device_id);
            let same = old.is_some_and(|old| {
                running
                    .device(&device.device_id)
                    .is_some_and(|before| before.enabled && before.same_as(device))
                    && product_timeout(running, device) == product_timeout(&config, device)
                    && previous.links_fit(old, &wanted)
            });
            if same {
                kept.insert(device.device_id.clone());
                changes.unchanged += 1;
            } else if device.tenant_id != 0 && running.tenant(device.tenant_id).is_none() {
                problems.push(
                    device.pos,
                    format!(
                        "device `{}`: tenant {} is new; tenants are added at the next start",
                        device.device_id, device.tenant_id
                    ),
                );
            } else if old.is_some() {
                changes.changed.push(device.device_id.clone());
            } else {
                changes.added.push(device.device_id.clone());
            }
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
        PendingReload {
            fleet: self,
            applied,
            config,
            kept,
            previous,
            changes,
            problems,
        }
    }

    /// Puts a wired roster in place and tells everyone who keeps something per
    /// device: the sample sink, lease announcements, the scheduler.
    fn commit(&self, previous: &Roster, roster: &Arc<Roster>, changes: &DeviceChanges) {
        let leases = &self.services.leases;
        for id in changes.added.iter().chain(&changes.changed) {
            if let Some(device) = roster.get(id) {
                leases.announce(
                    EntityKey::device(device.tenant_id, id),
                    Announce::device(&device.product_id, &device.device_num),
                );
                // The driver of a protocol uploaded while the gateway runs.
                for channel in &device.channels {
                    let codec = channel.session.get().pool();
                    leases.announce(
                        EntityKey::driver(device.tenant_id, codec.name()),
                        Announce::driver(device.tenant_id, codec.name()),
                    );
                }
            }
        }
        *write(&self.roster) = Arc::clone(roster);
        for id in &changes.removed {
            if let Some(old) = previous.get(id) {
                // The scheduler outlives the fleet's users; a send fails only at shutdown.
                let _ = self.scheduler.send(ScheduleChange::Remove(old.key));
            }
        }
        for id in &changes.changed {
            if let (Some(old), Some(new)) = (previous.get(id), roster.get(id)) {
                // RELOAD-3: the new build inherits the old one's lock, so the two
                // never poll at once.
                let _ = self
                    .scheduler
                    .send(ScheduleChange::Replace(old.key, new.schedule()));
            }
        }
        for id in &changes.added {
            if let Some(device) = roster.get(id) {
                let _ = self.scheduler.send(ScheduleChange::Add(device.schedule()));
            }
        }
        // RELOAD-4: a removed device is announced offline and its late lease
        // renewals are dropped; so is the row a device moved to another tenant
        // leaves behind (rows are keyed by tenant).
        let moved = changes.changed.iter().filter(|id| {
            let tenants = previous.get(id).zip(roster.get(id));
            tenants.is_some_and(|(old, new)| old.tenant_id != new.tenant_id)
        });
        for id in changes.removed.iter().chain(moved) {
            let Some(old) = previous.get(id) else {
                continue;
            };
            let entity = EntityKey::device(old.tenant_id, id);
            if let Err(error) = leases.retire(&entity, EntityState::Offline) {
                tracing::error!(device = %id, %error, "cannot mark a removed device offline");
            }
        }
        for id in &changes.removed {
            self.services.metrics.forget(id);
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

/// A reload decided but not applied: which devices stay and which are rebuilt.
#[derive(Debug)]
pub struct PendingReload<'f> {
    fleet: &'f Fleet,
    applied: MutexGuard<'f, Applied>,
    config: GatewayConfig,
    kept: HashSet<String>,
    previous: Arc<Roster>,
    changes: DeviceChanges,
    problems: Diagnostics,
}

impl PendingReload<'_> {
    /// The configuration the devices will run with: the new devices and products,
    /// the running collector and tenants.
    pub fn config(&self) -> &GatewayConfig {
        &self.config
    }

    /// Whether `device` is (re)built, so must be compiled.
    pub fn rebuilds(&self, device: &DeviceConfig) -> bool {
        !self.kept.contains(&device.device_id)
    }

    /// What the reload refuses on its own (the compiler aside): tenants added.
    pub fn problems(&self) -> &Diagnostics {
        &self.problems
    }

    /// Wires the compiled devices (those [`PendingReload::rebuilds`] picked) beside
    /// the kept ones and puts them all in place at once.
    pub fn apply(mut self, compiled: Compiled) -> DeviceChanges {
        let fleet = self.fleet;
        let mut wiring = Wiring::new(
            &self.config,
            &fleet.services,
            &fleet.budget,
            Some(&self.previous),
            self.applied.links_made,
        );
        // Kept first, so their links are in place before any device is wired: a
        // rebuilt device on the same endpoint shares them (RELOAD-5).
        let kept: Vec<_> = self
            .previous
            .devices()
            .iter()
            .filter(|d| self.kept.contains(&d.id))
            .cloned()
            .collect();
        for device in &kept {
            wiring.keep(device);
        }
        let mut fresh: HashMap<String, _> = compiled
            .devices
            .into_iter()
            .map(|d| (d.config.device_id.clone(), d))
            .collect();
        let mut devices = Vec::new();
        let mut rules = Vec::new();
        for config in self.config.devices.iter().filter(|d| d.enabled) {
            if let Some(old) = kept.iter().find(|d| d.id == config.device_id) {
                devices.push(Arc::clone(old));
            } else if let Some(compiled) = fresh.remove(&config.device_id) {
                let (device, device_rules) = wiring.device(compiled);
                if let Some(device_rules) = device_rules {
                    rules.push((device.id.clone(), device.key, device_rules));
                }
                devices.push(device);
            }
        }
        let (links, links_made) = wiring.finish();
        let roster = Arc::new(Roster::new(devices, links));
        if let Some(sink) = &fleet.services.sink {
            // A rebuilt device's old build is no longer judged by any rules; its
            // new build is judged by the new ones from its first round.
            let gone: Vec<String> = self
                .changes
                .removed
                .iter()
                .chain(&self.changes.changed)
                .cloned()
                .collect();
            sink.devices_built(&gone, rules);
        }
        fleet.commit(&self.previous, &roster, &self.changes);
        self.applied.config = std::mem::take(&mut self.config);
        self.applied.links_made = links_made;
        fleet.sync_heartbeats(&mut self.applied, &roster);
        self.changes
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
