//! The collector at work: the scheduler running every device's rounds, the
//! messages of the devices that publish by themselves, and the protocol
//! drivers' renewals of their own leases.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::fleet::{Fleet, FleetParts};
use super::roster::Roster;
use super::scrape::FleetState;
use super::wiring::{Services, Wiring};
use crate::compile::Compiled;
use crate::io::Budget;
use crate::lease::{
    DRIVER_LEASE_SECONDS, DRIVER_RENEWAL_PERIOD, EntityKey, EntityState, EntityType, Renewal,
    TimeoutSource,
};
use crate::scheduler::{RoundFuture, RoundOutcome, Rounds, Scheduler};
use crate::store::SeqAllocator;
use crate::telemetry::Metrics;

/// The collector: its devices (shared with the HTTP API, commands and
/// deployments) and the scheduler that polls them.
#[derive(Debug)]
pub struct Collector {
    fleet: Arc<Fleet>,
    scheduler: Option<Scheduler>,
}

struct DeviceRounds {
    fleet: Arc<Fleet>,
}

impl Rounds for DeviceRounds {
    fn run(&self, device: u64, tags: Arc<[u32]>) -> RoundFuture {
        // A device removed since it was scheduled has nothing left to do.
        // So has a device another engine owns (STATE-S7 of docs/state.md).
        let Some(device) = self
            .fleet
            .roster()
            .by_key(device)
            .filter(|d| self.fleet.owns(&d.id))
            .cloned()
        else {
            return Box::pin(async { RoundOutcome::Done });
        };
        let fleet = Arc::clone(&self.fleet);
        // At debug level only: an enabled span costs each round its creation
        // (the device id formatted and stored) and an enter and exit at every
        // poll, ~2.5% of the engine's CPU at 1,000 devices. What is logged at
        // the default level during a round names its link or component itself.
        let span = tracing::debug_span!("round", device = %device.id);
        Box::pin(tracing::Instrument::instrument(
            async move {
                let services = fleet.services();
                device.poll(&tags, &services.seq, &services.uplink).await
            },
            span,
        ))
    }
}

impl Collector {
    /// The collector of the compiled devices; their rules go to the sample sink.
    pub fn new(compiled: Compiled, services: Services) -> Collector {
        let Compiled {
            config, devices, ..
        } = compiled;
        let budget = Budget::new(&config.collector.connections);
        let mut wiring = Wiring::new(&config, &services, &budget, None, 0);
        let mut built = Vec::new();
        let mut rules = Vec::new();
        for compiled in devices {
            let (device, device_rules) = wiring.device(compiled);
            if let Some(device_rules) = device_rules {
                rules.push((device.id.clone(), device.key, device_rules));
            }
            built.push(device);
        }
        let (links, links_made) = wiring.finish();
        if let Some(sink) = &services.sink {
            sink.devices_built(&[], rules);
        }
        let roster = Roster::new(built, links);
        let scheduler = Scheduler::new(
            roster.devices().iter().map(|d| d.schedule()).collect(),
            Duration::from_millis(config.collector.per_device_timeout_ms),
        );
        let fleet = Fleet::new(FleetParts {
            roster,
            config,
            links_made,
            services,
            budget,
            scheduler: scheduler.changer(),
        });
        Collector {
            fleet: Arc::new(fleet),
            scheduler: Some(scheduler),
        }
    }

    /// Registers the collector's metrics: every device's families, and the
    /// device and connection states read at each scrape.
    pub fn register_metrics(&self, metrics: &Metrics) {
        self.fleet.services().metrics.register(metrics);
        metrics.collect(FleetState(Arc::downgrade(&self.fleet)));
    }

    /// The devices, as they are now and after every reload.
    pub fn fleet(&self) -> &Arc<Fleet> {
        &self.fleet
    }

    /// Runs rounds (and the links' heartbeats, and the drivers' lease renewals)
    /// until `shutdown` turns true. Can run once.
    pub async fn run(&mut self, shutdown: watch::Receiver<bool>) {
        let Some(scheduler) = self.scheduler.take() else {
            return;
        };
        self.fleet.start(shutdown.clone());
        let rounds = Arc::new(DeviceRounds {
            fleet: Arc::clone(&self.fleet),
        });
        let drivers = tokio::spawn(renew_driver_leases(
            Arc::clone(&self.fleet),
            shutdown.clone(),
        ));
        let arrivals = tokio::spawn(super::arrivals::route(
            Arc::clone(&self.fleet),
            shutdown.clone(),
        ));
        scheduler.run(rounds, shutdown).await;
        drivers.abort();
        arrivals.abort();
    }
}

/// Each protocol driver (a codec, or the decoder of devices that publish by
/// themselves) renews its own lease per tenant: online while the calls
/// of its pools succeed, fault when some failed since the last renewal. The
/// pools are those the devices use now, so a newly deployed codec version is
/// watched from its first call.
async fn renew_driver_leases(fleet: Arc<Fleet>, mut shutdown: watch::Receiver<bool>) {
    // Failures of each pool (by address) at the last renewal.
    let mut seen: HashMap<usize, u64> = HashMap::new();
    let mut ticker = tokio::time::interval(DRIVER_RENEWAL_PERIOD);
    while crate::clock::next_tick(&mut ticker, &mut shutdown).await {
        // Per tenant and codec: its pools and their failures so far.
        let mut drivers: HashMap<(u32, String), HashMap<usize, u64>> = HashMap::new();
        for device in fleet.roster().devices() {
            let codecs = device.channels.iter().map(|c| c.session.get().health());
            // A device that publishes by itself is read by its decoder.
            let decoder = device.push.iter().flat_map(|p| p.reader_health());
            for health in codecs.chain(decoder) {
                drivers
                    .entry((device.tenant_id, health.component))
                    .or_default()
                    .insert(health.pool, health.failures);
            }
        }
        let mut now_seen = HashMap::new();
        for ((tenant, name), pools) in drivers {
            let failed = pools
                .iter()
                .any(|(pool, failures)| *failures > seen.get(pool).copied().unwrap_or(0));
            let total: u64 = pools.values().sum();
            now_seen.extend(pools);
            fleet.services().leases.renew(Renewal {
                expired_state: EntityState::Offline,
                entity_type: EntityType::Driver,
                entity_id: name,
                parent_id: String::new(),
                tenant_id: tenant,
                state: if failed {
                    EntityState::Fault
                } else {
                    EntityState::Online
                },
                timeout_seconds: DRIVER_LEASE_SECONDS,
                timeout_source: TimeoutSource::System,
                extension: serde_json::json!({ "componentFailures": total }),
            });
        }
        seen = now_seen;
    }
}

/// Renews the ownership leases of the devices (when engines share a database)
/// until `shutdown`; then stops polling, waits out rounds in progress and
/// gives the leases up, so the other engines take the devices at once.
pub async fn keep_ownership(
    fleet: Arc<Fleet>,
    seq: Arc<SeqAllocator>,
    mut shutdown: watch::Receiver<bool>,
) {
    let ownership = Arc::clone(fleet.ownership());
    let Some(period) = ownership.renewal_period() else {
        return;
    };
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while crate::clock::next_tick(&mut ticker, &mut shutdown).await {
        let devices: Vec<String> = fleet
            .roster()
            .devices()
            .iter()
            .map(|d| d.id.clone())
            .collect();
        let this = Arc::clone(&ownership);
        let gained = tokio::task::spawn_blocking(move || this.renew(devices))
            .await
            .unwrap_or_default();
        for device in &gained {
            seq.forget(device);
        }
        // STATE-7: the taken devices' statuses name this collector from now on.
        let roster = fleet.roster();
        let taken: Vec<_> = gained
            .iter()
            .filter_map(|device| roster.get(device))
            .map(|device| EntityKey::device(device.tenant_id, &device.id))
            .collect();
        let leases = Arc::clone(&fleet.services().leases);
        let _ = tokio::task::spawn_blocking(move || leases.restate(&taken)).await;
        if !gained.is_empty() {
            tracing::info!(gained = gained.len(), "devices taken over");
        }
    }
    ownership.stop();
    tokio::time::sleep(ownership.round_margin()).await;
    let _ = tokio::task::spawn_blocking(move || ownership.release()).await;
}
