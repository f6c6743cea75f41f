//! Which devices this engine polls. Alone on its redb file it owns them all;
//! sharing PostgreSQL with other engines, it owns the devices whose ownership
//! lease it holds (docs/state.md, STATE-S7). Rounds, heartbeats and command claims
//! ask [`Ownership::owns`] before they touch a device.
//!
//! The engine counts a lease from before it asked for it and stops a round's
//! length short of its end, so it has stopped polling a device before the
//! database lets another engine take it, even when it cannot reach the
//! database to renew.

use std::collections::HashSet;
use std::sync::RwLock;
use std::time::Duration;

use tokio::time::Instant;

use crate::store::{DeviceOwner, Postgres};
use crate::sync::{read, write};

/// The devices this engine may poll.
#[derive(Debug)]
pub struct Ownership {
    node_id: String,
    shared: Option<Shared>,
}

#[derive(Debug)]
struct Shared {
    db: Postgres,
    lease: Duration,
    /// Cut from the end of each lease: a round started before the cut ends
    /// before the lease does.
    margin: Duration,
    held: RwLock<Held>,
}

#[derive(Debug)]
struct Held {
    devices: HashSet<String>,
    until: Instant,
}

impl Ownership {
    /// An engine alone: it owns every device.
    pub fn alone(node_id: &str) -> Self {
        Self {
            node_id: node_id.to_owned(),
            shared: None,
        }
    }

    /// An engine sharing `db`: it owns nothing until its first renewal.
    /// `round` is the longest a round may take.
    pub fn shared(node_id: &str, db: Postgres, lease: Duration, round: Duration) -> Self {
        Self {
            node_id: node_id.to_owned(),
            shared: Some(Shared {
                db,
                lease,
                margin: round.min(lease / 2),
                held: RwLock::new(Held {
                    devices: HashSet::new(),
                    until: Instant::now(),
                }),
            }),
        }
    }

    /// This engine's node id.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// Whether this engine may poll `device` now.
    pub fn owns(&self, device: &str) -> bool {
        match &self.shared {
            None => true,
            Some(shared) => {
                let held = read(&shared.held);
                Instant::now() < held.until && held.devices.contains(device)
            }
        }
    }

    /// Who owns each device the database knows, or `None` when the engine is
    /// alone (it owns them all).
    ///
    /// # Errors
    /// A database failure.
    pub fn owners(&self) -> Result<Option<Vec<DeviceOwner>>, crate::store::StoreError> {
        match &self.shared {
            None => Ok(None),
            Some(shared) => shared.db.device_owners().map(Some),
        }
    }

    /// How often the leases are renewed (three times per lease), or `None`
    /// when the engine is alone.
    pub(super) fn renewal_period(&self) -> Option<Duration> {
        self.shared.as_ref().map(|shared| shared.lease / 3)
    }

    /// How long a round begun now may still run.
    pub(super) fn round_margin(&self) -> Duration {
        self.shared
            .as_ref()
            .map_or(Duration::ZERO, |shared| shared.margin)
    }

    /// Stops polling every device at once (the engine stops).
    pub(super) fn stop(&self) {
        if let Some(shared) = &self.shared {
            write(&shared.held).devices.clear();
        }
    }

    /// Gives up every lease, so other engines take the devices at once; call
    /// [`Ownership::stop`] a round's length before.
    pub(super) fn release(&self) {
        if let Some(shared) = &self.shared
            && let Err(error) = shared.db.release_devices(&self.node_id)
        {
            tracing::warn!(%error, "cannot give up device ownership; it lapses on its own");
        }
    }

    /// One renewal of the ownership leases for `devices`; returns the devices
    /// gained (their report numbers start from a new block).
    pub(super) fn renew(&self, devices: Vec<String>) -> Vec<String> {
        let Some(shared) = &self.shared else {
            return Vec::new();
        };
        let asked = Instant::now();
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        match shared
            .db
            .own_devices(&self.node_id, ms(shared.lease), ms(shared.margin), devices)
        {
            Ok(owned) => {
                let mut held = write(&shared.held);
                let devices: HashSet<String> = owned.devices.into_iter().collect();
                let gained = devices
                    .iter()
                    .filter(|d| Instant::now() >= held.until || !held.devices.contains(*d))
                    .cloned()
                    .collect();
                let lost = held.devices.difference(&devices).count();
                if lost > 0 {
                    tracing::info!(lost, nodes = owned.nodes, "devices handed to other engines");
                }
                held.devices = devices;
                held.until = asked + shared.lease.saturating_sub(shared.margin);
                gained
            }
            Err(error) => {
                tracing::warn!(%error, "cannot renew device ownership; polling stops when it lapses");
                Vec::new()
            }
        }
    }
}
