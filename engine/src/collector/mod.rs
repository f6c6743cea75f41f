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

use std::sync::Arc;

use tokio::sync::{Mutex as AsyncMutex, watch};

pub use build::{BuildError, PipelineSet};

pub use device::{Channel, Device, Presence};

use crate::io::Link;
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
        scheduler.run(rounds, shutdown).await;
        for beat in beats {
            beat.abort();
        }
    }
}
