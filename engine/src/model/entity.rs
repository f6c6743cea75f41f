//! Entity state rows: what the lease table holds for each driver and device, and
//! the heartbeats that renew them.

use serde::{Deserialize, Serialize};

/// What kind of entity a row is about.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum EntityType {
    Driver,
    Device,
}

impl EntityType {
    pub fn as_str(self) -> &'static str {
        match self {
            EntityType::Driver => "driver",
            EntityType::Device => "device",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "driver" => Some(EntityType::Driver),
            "device" => Some(EntityType::Device),
            _ => None,
        }
    }

    /// The number the seed gives the entity type (in stored keys).
    pub fn code(self) -> u8 {
        match self {
            EntityType::Driver => 3,
            EntityType::Device => 6,
        }
    }
}

/// The state of a driver or device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum EntityState {
    Online,
    Offline,
    /// Put aside by an operator; still expected to heartbeat.
    Maintain,
    /// Reporting a problem (for example a failing codec health check).
    Fault,
    /// Not heard from, and not taken for gone (seed 000's "to be confirmed"):
    /// where a lease of a device with `stateWhenExpired: unknown` ends.
    Unknown,
}

impl EntityState {
    pub fn as_str(self) -> &'static str {
        match self {
            EntityState::Online => "online",
            EntityState::Offline => "offline",
            EntityState::Maintain => "maintain",
            EntityState::Fault => "fault",
            EntityState::Unknown => "unknown",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "online" => Some(EntityState::Online),
            "offline" => Some(EntityState::Offline),
            "maintain" => Some(EntityState::Maintain),
            "fault" => Some(EntityState::Fault),
            "unknown" => Some(EntityState::Unknown),
            _ => None,
        }
    }

    /// Live states are held by a lease: when it expires they end offline (or
    /// unknown).
    pub fn is_live(self) -> bool {
        !matches!(self, EntityState::Offline | EntityState::Unknown)
    }

    /// This state as readers see it at `now` under a lease ending at
    /// `expire_time`: a live state whose lease ran out reads `expired` (offline,
    /// or unknown).
    pub fn as_of(self, expire_time: i64, now_ms: i64, expired: EntityState) -> EntityState {
        if self.is_live() && expire_time <= now_ms {
            expired
        } else {
            self
        }
    }
}

/// Where a lease length came from, in priority order (device config first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TimeoutSource {
    System,
    Driver,
    Device,
    Profile,
}

/// One row of the entity state table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StateRow {
    #[serde(rename = "type")]
    pub entity_type: EntityType,
    #[serde(rename = "id")]
    pub entity_id: String,
    #[serde(rename = "parent")]
    pub parent_id: String,
    pub state: EntityState,
    pub last_state: EntityState,
    /// Last renewal, ms since the Unix epoch.
    pub last_heartbeat: i64,
    /// When the lease runs out, ms since the Unix epoch.
    pub expire_time: i64,
    /// Bumped by every renewal and every expiry; a change this row did not see is
    /// a reason to leave it alone.
    pub lease_version: u64,
    pub timeout_seconds: u64,
    pub timeout_source: TimeoutSource,
    /// Free-form details (last error, protocol, node).
    pub extension: serde_json::Value,
    pub tenant_id: u32,
    /// Where its lease ends: offline, or unknown (`stateWhenExpired`); rows
    /// of engines before it end offline.
    #[serde(default = "offline")]
    pub expired_state: EntityState,
}

fn offline() -> EntityState {
    EntityState::Offline
}

/// Which row of the lease table an entity has: seed 000's unique key. A
/// driver's id is its codec's name, shared by every tenant that speaks it, so
/// the tenant tells two tenants' drivers apart; a device's id is unique on its
/// own, and its key carries the tenant it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntityKey {
    pub tenant_id: u32,
    pub entity_type: EntityType,
    pub entity_id: String,
}

impl EntityKey {
    pub fn device(tenant_id: u32, device_id: &str) -> Self {
        Self {
            tenant_id,
            entity_type: EntityType::Device,
            entity_id: device_id.to_owned(),
        }
    }

    pub fn driver(tenant_id: u32, driver: &str) -> Self {
        Self {
            tenant_id,
            entity_type: EntityType::Driver,
            entity_id: driver.to_owned(),
        }
    }
}

impl StateRow {
    /// The row's key.
    pub fn key(&self) -> EntityKey {
        EntityKey {
            tenant_id: self.tenant_id,
            entity_type: self.entity_type,
            entity_id: self.entity_id.clone(),
        }
    }

    /// The state as a reader should see it at `now`: a live row whose lease ran out
    /// reads as it will end (offline, or unknown) even before the scanner reached it.
    pub fn effective_state(&self, now_ms: i64) -> EntityState {
        self.state
            .as_of(self.expire_time, now_ms, self.expired_state)
    }

    /// How a collector outside the engine reported it (`http`, `mqtt`), for
    /// a row kept by heartbeats from outside; `None` for the engine's own.
    pub fn reported_by(&self) -> Option<&str> {
        self.extension
            .get("reportedBy")
            .and_then(serde_json::Value::as_str)
    }
}

/// A change of state the engine must announce (status topic, event for the rules).
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub row: StateRow,
    pub from: EntityState,
}

impl Transition {
    /// The event name for the rules: `device-offline`, `driver-online`, ...
    pub fn event(&self) -> String {
        format!(
            "{}-{}",
            self.row.entity_type.as_str(),
            self.row.state.as_str()
        )
    }
}

/// A heartbeat: the entity is alive (or reports a fault) for `timeout_seconds`.
#[derive(Debug, Clone)]
pub struct Renewal {
    pub entity_type: EntityType,
    pub entity_id: String,
    pub parent_id: String,
    pub tenant_id: u32,
    /// Online or Fault; an operator's Maintain is kept while heartbeats go on.
    pub state: EntityState,
    pub timeout_seconds: u64,
    pub timeout_source: TimeoutSource,
    pub extension: serde_json::Value,
    /// Where the lease ends when no heartbeat renews it: offline, or unknown.
    pub expired_state: EntityState,
}

impl Renewal {
    /// The key of the row it renews.
    pub fn key(&self) -> EntityKey {
        EntityKey {
            tenant_id: self.tenant_id,
            entity_type: self.entity_type,
            entity_id: self.entity_id.clone(),
        }
    }
}

/// A heartbeat with no extension, borrowed from its source: a device that
/// sends the same one round after round describes it, and it is built only
/// when the same one does not already wait to be written
/// (`Leases::renew_plain`).
#[derive(Debug, Clone, Copy)]
pub struct PlainRenewal<'a> {
    pub entity_type: EntityType,
    pub entity_id: &'a str,
    pub parent_id: &'a str,
    pub tenant_id: u32,
    pub state: EntityState,
    pub timeout_seconds: u64,
    pub timeout_source: TimeoutSource,
    pub expired_state: EntityState,
}

impl PlainRenewal<'_> {
    /// Whether `renewal` is this heartbeat, field by field.
    pub fn is(&self, renewal: &Renewal) -> bool {
        renewal.entity_type == self.entity_type
            && renewal.entity_id == self.entity_id
            && renewal.parent_id == self.parent_id
            && renewal.tenant_id == self.tenant_id
            && renewal.state == self.state
            && renewal.timeout_seconds == self.timeout_seconds
            && renewal.timeout_source == self.timeout_source
            && renewal.expired_state == self.expired_state
            && renewal.extension.as_object().is_some_and(|o| o.is_empty())
    }

    /// The heartbeat, built.
    pub fn to_renewal(&self) -> Renewal {
        Renewal {
            entity_type: self.entity_type,
            entity_id: self.entity_id.to_owned(),
            parent_id: self.parent_id.to_owned(),
            tenant_id: self.tenant_id,
            state: self.state,
            timeout_seconds: self.timeout_seconds,
            timeout_source: self.timeout_source,
            extension: serde_json::json!({}),
            expired_state: self.expired_state,
        }
    }
}

/// Which rows a list wants (by state: callers filter on the effective state).
#[derive(Debug, Clone, Default)]
pub struct StateFilter {
    pub tenant: Option<u32>,
    pub entity_type: Option<EntityType>,
    pub parent: Option<String>,
}
