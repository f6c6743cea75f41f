//! Heartbeats waiting for the renewer, and when it should write them.
//!
//! Every write of heartbeats is one durable transaction (STATE-1 of
//! docs/state.md), whatever its size: at ten a second it was a tenth of a small
//! gateway's CPU. A heartbeat that would change its entity's state as this engine
//! last saw it (a device coming back, a fault) is written after [`GATHER`]; one
//! that only extends a running lease may wait up to [`EXTEND_AT_MOST`], or a
//! quarter of its lease if that is shorter, so the lease never comes near its end
//! while it waits (the lease is counted from the write).

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::model::{EntityKey, EntityState, EntityType, PlainRenewal, Renewal};

/// Heartbeats gathered into one write at least this long (a state change waits no longer).
pub(super) const GATHER: Duration = Duration::from_millis(100);
/// The longest a heartbeat that changes no state waits for its write.
pub(super) const EXTEND_AT_MOST: Duration = Duration::from_secs(1);

/// Queued heartbeats and the state each entity was last seen in.
#[derive(Debug, Default)]
pub(super) struct RenewalQueue {
    /// One per entity: a later heartbeat of an entity takes the place of the
    /// one queued, as the write would keep only the last of them anyway
    /// (`store::leases::coalesced`); a device reporting twenty times a second
    /// queues one heartbeat, not twenty.
    renewals: Vec<Renewal>,
    /// When the first of `renewals` came.
    since: Option<Instant>,
    /// How long the queued heartbeats may wait, counted from `since`.
    wait: Duration,
    /// What is known of each entity, by tenant and type, then id (looked up
    /// without allocating a key).
    seen: HashMap<(u32, EntityType), HashMap<String, Known>>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Known {
    /// The state the last writes and announced changes left the entity in.
    state: Option<EntityState>,
    /// Where its heartbeat waits in `renewals`.
    queued: Option<usize>,
}

impl RenewalQueue {
    /// Queues `renewal`; true when the renewer must look again at when to write
    /// (the queue was empty, or the write must now come sooner).
    pub(super) fn push(&mut self, renewal: Renewal, now: Instant) -> bool {
        let known = known(
            &mut self.seen,
            renewal.tenant_id,
            renewal.entity_type,
            &renewal.entity_id,
        );
        let wait = if known.state == Some(renewal.state) {
            let quarter = Duration::from_secs(renewal.timeout_seconds) / 4;
            EXTEND_AT_MOST.min(quarter).max(GATHER)
        } else {
            GATHER
        };
        match known.queued {
            Some(at) => self.renewals[at] = renewal,
            None => {
                known.queued = Some(self.renewals.len());
                self.renewals.push(renewal);
            }
        }
        match self.since {
            None => {
                self.since = Some(now);
                self.wait = wait;
                true
            }
            Some(since) => {
                // Counted from the first heartbeat: this one's own limit, from now.
                let wait = (now + wait).saturating_duration_since(since);
                let sooner = wait < self.wait;
                self.wait = self.wait.min(wait);
                sooner
            }
        }
    }

    /// Queues `heartbeat`, unless the same one waits already: the queue keeps
    /// one heartbeat an entity and the write counts the lease from its own
    /// time, so the same one again would change nothing, and a device
    /// reporting twenty times a second builds one heartbeat a write, not
    /// twenty. Returns what [`RenewalQueue::push`] does (false when nothing
    /// was queued).
    pub(super) fn push_plain(&mut self, heartbeat: PlainRenewal<'_>, now: Instant) -> bool {
        let waiting = self
            .seen
            .get(&(heartbeat.tenant_id, heartbeat.entity_type))
            .and_then(|of_type| of_type.get(heartbeat.entity_id))
            .and_then(|known| known.queued)
            .is_some_and(|at| heartbeat.is(&self.renewals[at]));
        if waiting {
            return false;
        }
        self.push(heartbeat.to_renewal(), now)
    }

    /// When the queued heartbeats are to be written; `None` with none queued.
    pub(super) fn due(&self) -> Option<Instant> {
        self.since.map(|since| since + self.wait)
    }

    /// The queued heartbeats, leaving the queue empty.
    pub(super) fn take(&mut self) -> Vec<Renewal> {
        self.since = None;
        let renewals = std::mem::take(&mut self.renewals);
        for renewal in &renewals {
            let Some(of_type) = self.seen.get_mut(&(renewal.tenant_id, renewal.entity_type)) else {
                continue;
            };
            match of_type.get_mut(renewal.entity_id.as_str()) {
                // Nothing more known of it (never seen, or forgotten).
                Some(Known { state: None, .. }) => {
                    of_type.remove(renewal.entity_id.as_str());
                }
                Some(known) => known.queued = None,
                None => {}
            }
        }
        renewals
    }

    /// Records the state an entity is in now (a write asked for it, or a change
    /// was announced).
    pub(super) fn saw(
        &mut self,
        tenant_id: u32,
        entity_type: EntityType,
        id: &str,
        state: EntityState,
    ) {
        known(&mut self.seen, tenant_id, entity_type, id).state = Some(state);
    }

    /// An entity no longer configured: its state is forgotten (a heartbeat
    /// of it still queued stays, and is written).
    pub(super) fn forget(&mut self, entity: &EntityKey) {
        let Some(of_type) = self.seen.get_mut(&(entity.tenant_id, entity.entity_type)) else {
            return;
        };
        match of_type.get_mut(entity.entity_id.as_str()) {
            Some(known) if known.queued.is_some() => known.state = None,
            Some(_) => {
                of_type.remove(entity.entity_id.as_str());
            }
            None => {}
        }
    }
}

/// What `seen` knows of an entity, made empty at its first mention.
fn known<'s>(
    seen: &'s mut HashMap<(u32, EntityType), HashMap<String, Known>>,
    tenant_id: u32,
    entity_type: EntityType,
    id: &str,
) -> &'s mut Known {
    let of_type = seen.entry((tenant_id, entity_type)).or_default();
    if !of_type.contains_key(id) {
        of_type.insert(id.to_owned(), Known::default());
    }
    of_type.get_mut(id).expect("inserted above")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TimeoutSource;

    fn heartbeat(id: &str, state: EntityState, timeout_seconds: u64) -> Renewal {
        Renewal {
            expired_state: EntityState::Offline,
            entity_type: EntityType::Device,
            entity_id: id.to_owned(),
            parent_id: "modbus-tcp".to_owned(),
            tenant_id: 0,
            state,
            timeout_seconds,
            timeout_source: TimeoutSource::Device,
            extension: serde_json::json!({}),
        }
    }

    /// A queue that saw these devices in these states.
    fn seen(devices: &[(&str, EntityState)]) -> RenewalQueue {
        let mut queue = RenewalQueue::default();
        for (id, state) in devices {
            queue.saw(0, EntityType::Device, id, *state);
        }
        queue
    }

    #[test]
    fn heartbeats_that_change_nothing_wait_up_to_a_second_or_a_quarter_of_their_lease() {
        let mut queue = seen(&[("d1", EntityState::Online), ("d2", EntityState::Online)]);
        let t0 = Instant::now();
        assert!(queue.push(heartbeat("d1", EntityState::Online, 30), t0));
        assert_eq!(queue.due(), Some(t0 + EXTEND_AT_MOST));
        // A 2 s lease waits 500 ms, counted from its own arrival.
        let t1 = t0 + Duration::from_millis(200);
        assert!(queue.push(heartbeat("d2", EntityState::Online, 2), t1));
        assert_eq!(queue.due(), Some(t1 + Duration::from_millis(500)));
        // A later one with a longer allowance changes nothing.
        assert!(!queue.push(heartbeat("d1", EntityState::Online, 30), t1));
        assert_eq!(queue.due(), Some(t1 + Duration::from_millis(500)));
        assert_eq!(queue.take().len(), 2);
        assert_eq!(queue.due(), None);
    }

    fn plain(state: EntityState, timeout_seconds: u64) -> PlainRenewal<'static> {
        PlainRenewal {
            entity_type: EntityType::Device,
            entity_id: "d1",
            parent_id: "modbus-tcp",
            tenant_id: 0,
            state,
            timeout_seconds,
            timeout_source: TimeoutSource::Device,
            expired_state: EntityState::Offline,
        }
    }

    #[test]
    fn a_plain_heartbeat_already_queued_is_not_queued_again_until_it_is_taken() {
        let mut queue = seen(&[("d1", EntityState::Online)]);
        let t0 = Instant::now();
        let online = plain(EntityState::Online, 30);
        assert!(online.is(&online.to_renewal()));
        assert!(queue.push_plain(online, t0));
        assert!(!queue.push_plain(online, t0), "the same heartbeat waits");
        assert_eq!(queue.renewals.len(), 1);
        // Another state, another lease (a device rebuilt with a new
        // `stateTimeout`), or one with an extension takes the queued one's place.
        queue.push_plain(plain(EntityState::Fault, 30), t0);
        assert_eq!(queue.renewals[0].state, EntityState::Fault);
        queue.push_plain(plain(EntityState::Fault, 9), t0);
        assert_eq!(queue.renewals[0].timeout_seconds, 9);
        let mut with_error = plain(EntityState::Fault, 9).to_renewal();
        with_error.extension = serde_json::json!({ "lastError": "refused" });
        queue.push(with_error, t0);
        queue.push_plain(plain(EntityState::Fault, 9), t0);
        assert_eq!(queue.renewals.len(), 1);
        assert_eq!(queue.renewals[0].extension, serde_json::json!({}));
        let taken = queue.take();
        assert_eq!(taken.len(), 1);
        assert!(plain(EntityState::Fault, 9).is(&taken[0]));
        // Written: the same heartbeat is queued again.
        assert!(queue.push_plain(plain(EntityState::Fault, 9), t0));
        assert_eq!(queue.take().len(), 1);
    }

    #[test]
    fn a_later_heartbeat_of_an_entity_takes_the_place_of_the_one_queued() {
        let mut queue = seen(&[("d1", EntityState::Online), ("d2", EntityState::Online)]);
        let t0 = Instant::now();
        queue.push(heartbeat("d1", EntityState::Online, 30), t0);
        queue.push(heartbeat("d2", EntityState::Online, 30), t0);
        let mut last = heartbeat("d1", EntityState::Fault, 30);
        last.extension = serde_json::json!({ "lastError": "refused" });
        queue.push(last, t0);
        // The last of d1's, where its first was, as the write keeps it.
        let taken = queue.take();
        let kept: Vec<(&str, EntityState)> = taken
            .iter()
            .map(|r| (r.entity_id.as_str(), r.state))
            .collect();
        assert_eq!(
            kept,
            [("d1", EntityState::Fault), ("d2", EntityState::Online)]
        );
        assert_eq!(taken[0].extension["lastError"], "refused");
        // The next batch starts afresh; a forgotten entity's queued heartbeat stays.
        queue.push(heartbeat("d1", EntityState::Online, 30), t0);
        queue.forget(&EntityKey::device(0, "d1"));
        queue.push(heartbeat("d1", EntityState::Online, 30), t0);
        assert_eq!(queue.take().len(), 1);
        assert_eq!(
            queue.seen.get(&(0, EntityType::Device)).map(HashMap::len),
            Some(1)
        );
    }

    #[test]
    fn a_change_of_state_brings_the_write_forward() {
        let mut queue = seen(&[("d1", EntityState::Online), ("d2", EntityState::Offline)]);
        let t0 = Instant::now();
        assert!(queue.push(heartbeat("d1", EntityState::Online, 30), t0));
        // d2 comes back: written GATHER after it arrived, not a second after d1.
        let t1 = t0 + Duration::from_millis(300);
        assert!(queue.push(heartbeat("d2", EntityState::Online, 30), t1));
        assert_eq!(queue.due(), Some(t1 + GATHER));
        // A fault of a device seen online is a change too.
        queue.take();
        assert!(queue.push(heartbeat("d1", EntityState::Fault, 30), t1));
        assert_eq!(queue.due(), Some(t1 + GATHER));
    }

    #[test]
    fn an_entity_never_seen_or_forgotten_is_written_after_the_gathering_time() {
        let mut queue = seen(&[("d1", EntityState::Online)]);
        assert_eq!(queue.due(), None);
        queue.forget(&EntityKey::device(0, "d1"));
        let t0 = Instant::now();
        assert!(queue.push(heartbeat("d1", EntityState::Online, 30), t0));
        assert_eq!(queue.due(), Some(t0 + GATHER));
        queue.take();
        assert!(queue.push(heartbeat("d2", EntityState::Online, 30), t0));
        assert_eq!(queue.due(), Some(t0 + GATHER));
    }
}
