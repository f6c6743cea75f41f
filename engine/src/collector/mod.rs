//! The collector: builds devices, links and pipelines from the configuration and
//! runs the scheduler over them.
//!
//! Channels of several devices naming the same protocol, host and port share one
//! link (one TCP connection, requests serialised on it) unless a channel sets
//! `sharedConnection: false`. Codec sessions and pipeline processors live in the
//! device's tenant's component pools. The devices change while it runs
//! ([`Fleet::reload`]) without touching the others' connections.

mod build;
mod device;
mod fleet;
mod framing;
mod heartbeat;
mod reporter;
mod swap;
mod tag_io;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Mutex as AsyncMutex, watch};

pub use build::{
    BuildError, Endpoint, PipelineSet, SandboxLimits, Services, codec_name, component_tag,
};
pub use device::{Channel, Device, DeviceParts, LeaseTerms, Probe};
pub use fleet::{DeviceChanges, Fleet, Roster};
pub use swap::{reload_codec, reload_pipelines};
pub use tag_io::{TagIoError, Writable};

use crate::config::GatewayConfig;
use crate::io::{Budget, Link, LinkSettings};
use crate::lease::{
    DRIVER_HEARTBEAT, DRIVER_LEASE_SECONDS, EntityState, EntityType, Renewal, TimeoutSource,
};
use crate::runtime::Registry;
use crate::scheduler::{RoundFuture, RoundOutcome, Rounds, Scheduler};

/// A link, what it connects to and how.
#[derive(Debug, Clone)]
pub struct LinkInfo {
    pub endpoint: Endpoint,
    pub settings: LinkSettings,
    pub link: Arc<AsyncMutex<Link>>,
}

impl LinkInfo {
    pub fn protocol(&self) -> &'static str {
        self.endpoint.protocol().name()
    }

    /// `HOST:PORT`, for reporting.
    pub fn address(&self) -> String {
        self.settings.address()
    }
}

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
        // A device removed since it was planned has nothing left to do.
        let Some(device) = self.fleet.roster().by_key(device).cloned() else {
            return Box::pin(async { RoundOutcome::Done });
        };
        let fleet = Arc::clone(&self.fleet);
        let span = tracing::info_span!("round", device = %device.id);
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
    /// Builds the collector for the enabled devices of `config` (read from `file`).
    ///
    /// # Errors
    /// Every problem found, with positions in `file`: protocols without a codec,
    /// unknown pipelines, tags or settings a component refuses.
    pub fn build(
        file: &str,
        config: &GatewayConfig,
        registry: &Registry,
        pipelines: &PipelineSet,
        services: Services,
    ) -> Result<Collector, BuildError> {
        let budget = Budget::new(&config.collector.connections);
        let mut builder = build::Builder::new(
            (file, config),
            (registry, pipelines),
            (&services, &budget),
            None,
            0,
        );
        let devices: Vec<_> = config
            .devices
            .iter()
            .filter(|d| d.enabled)
            .filter_map(|device| builder.device(device))
            .collect();
        let (links, links_made, errors) = builder.finish();
        let roster = Roster::new(devices, links);
        let scheduler = Scheduler::new(
            roster.devices().iter().map(|d| d.plan()).collect(),
            Duration::from_millis(config.collector.per_device_timeout_ms),
        );
        let fleet = Fleet::new(
            roster,
            (config.clone(), links_made),
            (services, budget),
            scheduler.changer(),
        );
        errors.into_result(Collector {
            fleet: Arc::new(fleet),
            scheduler: Some(scheduler),
        })
    }

    /// The devices, as they are now and after every reload.
    pub fn fleet(&self) -> &Arc<Fleet> {
        &self.fleet
    }

    /// Runs rounds (and heartbeats) until `shutdown` turns true. Can run once.
    pub async fn run(&mut self, shutdown: watch::Receiver<bool>) {
        let Some(scheduler) = self.scheduler.take() else {
            return;
        };
        self.fleet.start(shutdown.clone());
        let rounds = Arc::new(DeviceRounds {
            fleet: Arc::clone(&self.fleet),
        });
        let drivers = tokio::spawn(drivers_heartbeat(Arc::clone(&self.fleet), shutdown.clone()));
        scheduler.run(rounds, shutdown).await;
        drivers.abort();
    }
}

/// Each protocol driver heartbeats itself per tenant: online while the calls of
/// its codec pools succeed, fault when some failed since the last heartbeat. The
/// pools are those the devices use now, so a newly deployed codec version is
/// watched from its first call.
async fn drivers_heartbeat(fleet: Arc<Fleet>, mut shutdown: watch::Receiver<bool>) {
    // Failures of each pool (by address) at the last heartbeat.
    let mut seen: HashMap<usize, u64> = HashMap::new();
    let mut ticker = tokio::time::interval(DRIVER_HEARTBEAT);
    while crate::clock::next_tick(&mut ticker, &mut shutdown).await {
        // Per tenant and codec: its pools and their failures so far.
        let mut drivers: HashMap<(u32, String), HashMap<usize, u64>> = HashMap::new();
        for device in fleet.roster().devices() {
            for channel in &device.channels {
                let health = channel.session.get().health();
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
