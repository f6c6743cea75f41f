//! The collector: builds devices, links and pipelines from the configuration and
//! runs the scheduler over them.
//!
//! Channels of several devices naming the same protocol, host and port share one
//! link (one TCP connection, requests serialised on it) unless a channel sets
//! `sharedConnection: false`. Codec sessions and pipeline processors live in the
//! device's tenant's component pools.

mod build;
mod device;
mod heartbeat;
mod reporter;
mod swap;
mod tag_io;

use std::sync::Arc;

use tokio::sync::{Mutex as AsyncMutex, watch};

pub use build::{BuildError, PipelineSet, SandboxLimits, Services, codec_name, component_tag};

pub use device::{Channel, Device, DeviceParts, LeaseTerms};
pub use swap::{Swappable, reload_codec, reload_pipelines};
pub use tag_io::{TagIoError, Writable};

use crate::io::Link;
use crate::lease::{
    DRIVER_HEARTBEAT, DRIVER_LEASE_SECONDS, EntityState, EntityType, Leases, Renewal, TimeoutSource,
};
use crate::runtime::CodecPool;
use crate::scheduler::{RoundCounters, RoundFuture, Rounds, Scheduler};
use crate::store::SeqAllocator;
use crate::uplink::Uplink;

/// A link and what is known of it for reporting.
#[derive(Debug)]
pub struct LinkInfo {
    pub protocol: &'static str,
    pub address: String,
    pub link: Arc<AsyncMutex<Link>>,
}

/// Everything the running collector shares with the HTTP API.
#[derive(Debug)]
pub struct Collector {
    pub devices: Arc<[Arc<Device>]>,
    pub links: Vec<LinkInfo>,
    pub counters: Arc<[RoundCounters]>,
    scheduler: Option<Scheduler>,
    heartbeats: Vec<heartbeat::Heartbeat>,
    /// Codec pools in use, by tenant: the drivers that heartbeat themselves.
    drivers: Vec<(u32, String, Arc<CodecPool>)>,
    leases: Arc<Leases>,
    seq: Arc<SeqAllocator>,
    uplink: Uplink,
}

struct DeviceRounds {
    devices: Arc<[Arc<Device>]>,
    seq: Arc<SeqAllocator>,
    uplink: Uplink,
}

impl Rounds for DeviceRounds {
    fn run(&self, device: usize, tags: Arc<[u32]>) -> RoundFuture {
        let device = Arc::clone(&self.devices[device]);
        let seq = Arc::clone(&self.seq);
        let uplink = self.uplink.clone();
        let span = tracing::info_span!("round", device = %device.id);
        Box::pin(tracing::Instrument::instrument(
            async move { device.poll(&tags, &seq, &uplink).await },
            span,
        ))
    }
}

impl Collector {
    /// Runs rounds (and heartbeats) until `shutdown` turns true. Can run once.
    pub async fn run(&mut self, shutdown: watch::Receiver<bool>) {
        let Some(scheduler) = self.scheduler.take() else {
            return;
        };
        let rounds = Arc::new(DeviceRounds {
            devices: Arc::clone(&self.devices),
            seq: Arc::clone(&self.seq),
            uplink: self.uplink.clone(),
        });
        let beats: Vec<_> = self
            .heartbeats
            .drain(..)
            .map(|beat| tokio::spawn(beat.run(shutdown.clone())))
            .collect();
        let drivers = tokio::spawn(drivers_heartbeat(
            std::mem::take(&mut self.drivers),
            Arc::clone(&self.leases),
            shutdown.clone(),
        ));
        scheduler.run(rounds, shutdown).await;
        for beat in beats {
            beat.abort();
        }
        drivers.abort();
    }
}

/// Each protocol driver heartbeats itself: online while its codec calls succeed,
/// fault when some failed since the last heartbeat.
async fn drivers_heartbeat(
    drivers: Vec<(u32, String, Arc<CodecPool>)>,
    leases: Arc<Leases>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut failures: Vec<u64> = drivers.iter().map(|(_, _, pool)| pool.failures()).collect();
    let mut ticker = tokio::time::interval(DRIVER_HEARTBEAT);
    loop {
        tokio::select! {
            _ = ticker.tick() => {
                for ((tenant, name, pool), seen) in drivers.iter().zip(failures.iter_mut()) {
                    let now = pool.failures();
                    let state = if now > *seen { EntityState::Fault } else { EntityState::Online };
                    *seen = now;
                    leases.renew(Renewal {
                        entity_type: EntityType::Driver,
                        entity_id: name.clone(),
                        parent_id: String::new(),
                        tenant_id: *tenant,
                        state,
                        timeout_seconds: DRIVER_LEASE_SECONDS,
                        timeout_source: TimeoutSource::System,
                        extension: serde_json::json!({ "componentFailures": now }),
                    });
                }
            }
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    return;
                }
            }
        }
    }
}
