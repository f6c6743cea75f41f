//! Application-level heartbeats: TCP alone does not notice a PLC that lost power
//! (no FIN is sent), so an idle link sends a small read every `heartbeatMs`; after
//! `heartbeatFailures` unanswered heartbeats in a row the link goes OFFLINE. A
//! heartbeat is skipped while the link is busy or recently answered a round.
//! A heartbeat only probes the link: it renews no lease (a device's rounds renew
//! its lease, `Device::renew_lease`).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::device::Device;
use super::ownership::Ownership;
use crate::io::LinkState;

/// A heartbeat for one link, using one device's channel to build the probe.
#[derive(Debug)]
pub struct Heartbeat {
    pub device: Arc<Device>,
    pub channel: usize,
    /// Channel-local tag the probe reads.
    pub tag: u32,
    pub every: Duration,
    pub failures_allowed: u32,
    /// A device another engine owns gets no heartbeat from this one.
    pub ownership: Arc<Ownership>,
}

/// One heartbeat per link whose channels ask for a probe: the first such channel
/// (in device order) sends it.
pub fn for_links(
    devices: &[Arc<Device>],
    failures_allowed: u32,
    ownership: &Arc<Ownership>,
) -> Vec<Heartbeat> {
    let mut seen: Vec<&Arc<crate::io::SharedLink>> = Vec::new();
    let mut beats = Vec::new();
    for device in devices {
        for (index, channel) in device.channels.iter().enumerate() {
            let Some(probe) = channel.probe else { continue };
            if seen.iter().any(|link| Arc::ptr_eq(link, &channel.link)) {
                continue;
            }
            seen.push(&channel.link);
            beats.push(Heartbeat {
                device: Arc::clone(device),
                channel: index,
                tag: probe.tag,
                every: probe.every,
                failures_allowed,
                ownership: Arc::clone(ownership),
            });
        }
    }
    beats
}

impl Heartbeat {
    /// Names the heartbeat: the device build and channel that send it.
    pub fn key(&self) -> (u64, usize) {
        (self.device.key, self.channel)
    }

    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let mut ticker = tokio::time::interval(self.every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while crate::clock::next_tick(&mut ticker, &mut shutdown).await {
            self.beat().await;
        }
    }

    async fn beat(&self) {
        if !self.ownership.owns(&self.device.id) {
            return;
        }
        let Some(channel) = self.device.channels.get(self.channel) else {
            return;
        };
        // A busy link is evidently alive.
        let Ok(mut link) = channel.link.try_lock() else {
            return;
        };
        let session = channel.session.get();
        let recent = link
            .last_success()
            .is_some_and(|at| Instant::now().duration_since(at) < self.every);
        if link.state() != LinkState::Online || recent {
            return;
        }
        let Ok(plan) = session.plan(&[self.tag]) else {
            return;
        };
        let Some(request) = plan.first() else {
            return;
        };
        let Ok(Ok(frame)) = session.encode_read(request.id) else {
            return;
        };
        // Any well-formed answer, a refusal included, proves the device is there.
        let answered = link
            .heartbeat(&*session, &frame, self.failures_allowed, |answer| {
                session.parse_read(request.id, answer, crate::clock::now_ms())
            })
            .await;
        if let Err(error) = answered {
            tracing::debug!(device = %self.device.id, %error, "heartbeat failed");
        }
    }
}
