//! Lease-based state of drivers and devices.
//!
//! A heartbeat renews an entity's lease (a device's heartbeat is a round that
//! reached it; each protocol driver renews its own every 15 s with a 45 s lease).
//! Not to be confused with a link's heartbeat (`heartbeatMs`): a probe that tells
//! whether a connection still answers, and renews nothing.
//! A scanner wakes every `collector.lease.scanIntervalMs`, claims the rows whose
//! lease ran out in batches, re-checks each, and sets it offline. Every change of
//! state is announced: a retained status on the device's status topic and an event
//! (`device-offline`, `device-online`, `driver-offline`, ...) on its event topic,
//! for the alarm rules (published, and handed to the engine's alarm service). Rows live in the store, so a restart keeps them: a lease
//! that ran out while the engine was down expires at the first scan, and a lease
//! still running stays online until its device answers again.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::sync::{Notify, mpsc, watch};

pub use crate::model::{
    EntityKey, EntityState, EntityType, PlainRenewal, Renewal, StateFilter, StateRow,
    TimeoutSource, Transition,
};
pub use crate::store::{Claimed, RedbStateStore, StateStore, StoreError};

pub use announce::Announce;
pub use lengths::{DRIVER_LEASE_SECONDS, DRIVER_RENEWAL_PERIOD};

use crate::clock::now_ms;
use crate::mqtt::{DeviceTopic, entity_event};
use crate::sync::{lock, read, write};
use crate::uplink::Uplink;
use crate::wal::Message;
use queue::RenewalQueue;

mod announce;
mod lengths;
mod queue;
pub mod reported;
pub mod reported_mqtt;

/// Rows claimed per scanner transaction.
pub const EXPIRE_BATCH: usize = 10_000;

/// The lease service: queued heartbeats, the scanner, the announcements.
#[derive(Debug)]
pub struct Leases {
    store: Arc<dyn StateStore>,
    queue: Mutex<RenewalQueue>,
    wake: Notify,
    scan_interval: Duration,
    announce: RwLock<HashMap<EntityKey, Announce>>,
    /// Entities no longer configured: their heartbeats still in flight are dropped.
    retired: Mutex<HashSet<EntityKey>>,
    /// Held while renewals are written, and while an entity is retired.
    serial: Mutex<()>,
    uplink: Uplink,
    /// Where state changes go inside the engine (the alarm rules), if anywhere.
    changes: Option<mpsc::UnboundedSender<Transition>>,
    /// When this engine saw each entity's state change last, ms since the Unix epoch.
    changed_at: Mutex<HashMap<EntityKey, i64>>,
}

impl Leases {
    pub fn new(
        store: Arc<dyn StateStore>,
        scan_interval: Duration,
        announce: HashMap<EntityKey, Announce>,
        uplink: Uplink,
        changes: Option<mpsc::UnboundedSender<Transition>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            queue: Mutex::default(),
            wake: Notify::new(),
            scan_interval,
            announce: RwLock::new(announce),
            retired: Mutex::default(),
            serial: Mutex::default(),
            uplink,
            changes,
            changed_at: Mutex::default(),
        })
    }

    /// Since when `row` has been in the state it reads as at `now`, as far as this
    /// engine knows: a lease that ran out changed when it ran out, before the
    /// scanner came or after; any other change when this engine made it. `None`
    /// when it has seen no change since it started (engines that share a
    /// database each know the changes they made).
    pub fn state_since(&self, row: &StateRow, now: i64) -> Option<i64> {
        if row.effective_state(now) != row.state {
            return Some(row.expire_time);
        }
        lock(&self.changed_at).get(&row.key()).copied()
    }

    pub fn store(&self) -> &Arc<dyn StateStore> {
        &self.store
    }

    /// Announces the state changes of a (new) entity on these topics.
    /// Topics that change (a device given another identity) are left saying
    /// `offline`, so nobody keeps reading a stale `online` there.
    pub fn announce(&self, entity: EntityKey, announce: Announce) {
        lock(&self.retired).remove(&entity);
        let before = write(&self.announce).insert(entity, announce.clone());
        if let Some(before) = before
            && before != announce
        {
            self.uplink.status(
                before.topic(&self.uplink, DeviceTopic::StatusPost),
                EntityState::Offline,
                now_ms(),
            );
        }
    }

    /// Says again, naming this collector, the state of each of `entities`
    /// that has a row (STATE-7 of `docs/state.md`): at a start, before the
    /// first report, and when this engine takes a device over from another.
    pub fn restate(&self, entities: &[EntityKey]) {
        let now = now_ms();
        for entity in entities {
            let Some(announce) = read(&self.announce).get(entity).cloned() else {
                continue;
            };
            match self.store.get(entity) {
                Ok(Some(row)) => self.uplink.status(
                    announce.topic(&self.uplink, DeviceTopic::StatusPost),
                    row.effective_state(now),
                    now,
                ),
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(%error, id = %entity.entity_id, "cannot read a state to say it again");
                }
            }
        }
    }

    /// [`Leases::restate`] for every entity announced.
    pub fn restate_all(&self) {
        let entities: Vec<EntityKey> = read(&self.announce).keys().cloned().collect();
        self.restate(&entities);
    }

    /// An entity that is no longer configured: its state is set (and announced)
    /// once more, then it is no longer announced and late heartbeats are dropped.
    ///
    /// # Errors
    /// A storage failure.
    pub fn retire(&self, entity: &EntityKey, state: EntityState) -> Result<(), StoreError> {
        let _serial = lock(&self.serial);
        lock(&self.retired).insert(entity.clone());
        let result = self.set_state(entity, state);
        lock(&self.queue).forget(entity);
        write(&self.announce).remove(entity);
        lock(&self.changed_at).remove(entity);
        result.map(|_| ())
    }

    /// Queues a heartbeat: written within 100 ms when it changes the entity's
    /// state, within a second (or a quarter of its lease) when it only extends
    /// it (`queue.rs`). Never blocks a round.
    pub fn renew(&self, renewal: Renewal) {
        let sooner = lock(&self.queue).push(renewal, tokio::time::Instant::now());
        if sooner {
            self.wake.notify_one();
        }
    }

    /// [`Leases::renew`] for a source that sends the same heartbeat round after
    /// round: it is built and queued only when the same one does not already
    /// wait ([`RenewalQueue::push_plain`]).
    pub fn renew_plain(&self, heartbeat: PlainRenewal<'_>) {
        let sooner = lock(&self.queue).push_plain(heartbeat, tokio::time::Instant::now());
        if sooner {
            self.wake.notify_one();
        }
    }

    /// An operator's change of state (maintain, back online), announced at once.
    ///
    /// # Errors
    /// A storage failure.
    pub fn set_state(
        &self,
        entity: &EntityKey,
        state: EntityState,
    ) -> Result<Option<StateRow>, StoreError> {
        let transition = self.store.set_state(entity, state, now_ms())?;
        Ok(transition.map(|t| {
            let row = t.row.clone();
            self.publish(&[t]);
            row
        }))
    }

    /// Applies heartbeats and scans for expired leases until `shutdown`.
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut scan = tokio::time::interval(self.scan_interval);
        scan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let due = lock(&self.queue).due();
            tokio::select! {
                // The queue's due time moved: look again.
                () = self.wake.notified() => {}
                () = crate::clock::sleep_until_some(due) => self.apply_renewals().await,
                _ = scan.tick() => self.scan().await,
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        self.apply_renewals().await;
                        return;
                    }
                }
            }
        }
    }

    async fn apply_renewals(self: &Arc<Self>) {
        let mut batch = lock(&self.queue).take();
        if batch.is_empty() {
            return;
        }
        let this = Arc::clone(self);
        let applied = tokio::task::spawn_blocking(move || {
            // Retiring waits for this write, and this write skips whoever was
            // retired before it: a removed device never comes back online.
            let _serial = lock(&this.serial);
            {
                let retired = lock(&this.retired);
                if !retired.is_empty() {
                    batch.retain(|r| !retired.contains(&r.key()));
                }
            }
            let renewed = this.store.renew(&batch, now_ms());
            (batch, renewed)
        });
        match applied.await {
            Ok((batch, Ok(transitions))) => {
                {
                    let mut queue = lock(&self.queue);
                    for renewal in &batch {
                        queue.saw(
                            renewal.tenant_id,
                            renewal.entity_type,
                            &renewal.entity_id,
                            renewal.state,
                        );
                    }
                }
                // Then the changes the write made, which say what the store decided.
                self.publish(&transitions);
            }
            Ok((_, Err(error))) => tracing::error!(%error, "lease renewals failed"),
            Err(error) => tracing::error!(%error, "lease renewals failed"),
        }
    }

    /// Claims expired leases in batches until none is left.
    async fn scan(self: &Arc<Self>) {
        loop {
            let store = Arc::clone(&self.store);
            let claimed =
                tokio::task::spawn_blocking(move || store.expire(now_ms(), EXPIRE_BATCH)).await;
            match claimed {
                Ok(Ok(Claimed { transitions, more })) => {
                    self.publish(&transitions);
                    if !more {
                        return;
                    }
                }
                Ok(Err(error)) => {
                    tracing::error!(%error, "lease scan failed");
                    return;
                }
                Err(error) => {
                    tracing::error!(%error, "lease scan failed");
                    return;
                }
            }
        }
    }

    /// Announces state changes: retained status and an event for the rules.
    fn publish(&self, transitions: &[Transition]) {
        let now = now_ms();
        for transition in transitions {
            let row = &transition.row;
            lock(&self.queue).saw(row.tenant_id, row.entity_type, &row.entity_id, row.state);
            tracing::info!(
                entity = row.entity_type.as_str(),
                id = %row.entity_id,
                tenant = row.tenant_id,
                from = transition.from.as_str(),
                to = row.state.as_str(),
                "state change"
            );
            let at = if !row.state.is_live() && row.expire_time <= now {
                row.expire_time
            } else {
                now
            };
            let key = row.key();
            lock(&self.changed_at).insert(key.clone(), at);
            if let Some(changes) = &self.changes {
                // The receiver lives as long as the engine.
                let _ = changes.send(transition.clone());
            }
            let announce = read(&self.announce)
                .get(&key)
                .cloned()
                .or_else(|| Announce::of_reported(row));
            let Some(announce) = announce else {
                continue;
            };
            if row.entity_type == EntityType::Device {
                self.uplink
                    .device_state(&row.entity_id, !row.state.is_live());
            }
            self.uplink.status(
                announce.topic(&self.uplink, DeviceTopic::StatusPost),
                row.state,
                now,
            );
            let event = transition.event();
            // Events go through the outbox: durable, like reports.
            self.uplink.report(Message {
                device: String::new(),
                seq: 0,
                topic: announce.topic(&self.uplink, DeviceTopic::EventPost(&event)),
                payload: entity_event(transition, now).into(),
                retain: false,
            });
        }
    }
}

#[cfg(test)]
mod tests;
