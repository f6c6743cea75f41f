//! Leases kept for collectors outside the engine, as seed 000's drivers keep
//! theirs: a driver or device state reported in a heartbeat (`POST /heartbeats`,
//! or the MQTT topic `{prefix}/heartbeat/post`), checked here into renewals
//! that the lease service applies like its own (STATE-8 of `docs/state.md`).
//! The expiry scan, the alarm rules and `GET /states` then treat the rows as
//! any other; each row says who reported it (`extension.reportedBy`).

use serde::Deserialize;
use serde_json::json;

use super::lengths::{DRIVER_LEASE_SECONDS, REPORTED_DEVICE_LEASE_SECONDS};
use crate::model::{EntityState, EntityType, Renewal, Scope, TimeoutSource};
use crate::mqtt::limits::MAX_NAME;

/// Heartbeats one request or message may carry.
pub const MAX_HEARTBEATS: usize = 1000;
/// The longest lease a heartbeat may ask for: a week.
const MAX_TIMEOUT_SECONDS: u64 = 7 * 24 * 3600;

/// A batch of heartbeats: the body of `POST /heartbeats`, and of a message on
/// `heartbeat/post` (which also carries the `requestId` and `ts` of its signature).
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HeartbeatBatch {
    /// 1 to 1000 heartbeats, applied together or not at all.
    pub heartbeats: Vec<Heartbeat>,
    /// On MQTT: the signature's request id.
    #[serde(default)]
    pub request_id: Option<String>,
    /// On MQTT: when the message was signed, ms since the Unix epoch.
    #[serde(default)]
    pub ts: Option<i64>,
}

/// One entity's state, as an outside collector reports it.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Heartbeat {
    /// `driver` or `device`.
    #[serde(rename = "type")]
    pub entity_type: String,
    /// The driver's or device's id (at most 128 bytes).
    pub id: String,
    /// A device's driver (required for a device, refused for a driver).
    #[serde(default)]
    pub parent: Option<String>,
    /// Whose entity it is: by default the tenant of the token, or the one the
    /// MQTT topic names (`heartbeat/post/{tenantId}`), else 0. A tenant's token
    /// or key reports its own tenant's only.
    #[serde(default)]
    pub tenant_id: Option<u32>,
    /// `online`, `offline`, `maintain` or `fault`.
    pub state: String,
    /// How long the lease lasts from this heartbeat; without it a driver's
    /// lasts 45 s and a device's 900 s.
    #[serde(default)]
    pub timeout: Option<u64>,
    /// The unit of `timeout`: `ms`, `s` (the default), `min` or `h`.
    #[serde(default)]
    pub timeout_unit: Option<String>,
    /// With `deviceNum`: the device's MQTT identity, where its status and
    /// events are announced (`{prefix}/{productId}/{deviceNum}/status/post`).
    #[serde(default)]
    pub product_id: Option<String>,
    #[serde(default)]
    pub device_num: Option<String>,
}

/// What the engine itself collects, which no heartbeat from outside may touch.
pub trait Owners {
    /// The tenant of a device the engine collects itself.
    fn own_device(&self, id: &str) -> Option<u32>;
    /// Whether the engine runs driver (codec) `id` for `tenant`.
    fn own_driver(&self, tenant: u32, id: &str) -> bool;
    /// Whether a device of the engine's has this MQTT identity.
    fn own_identity(&self, product_id: &str, device_num: &str) -> bool;
    /// Whether `tenant` is configured (tenant 0, "no tenant", always is).
    fn knows_tenant(&self, tenant: u32) -> bool;
}

/// Why a batch was refused, as a status class and the reason (naming the
/// heartbeat at fault).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Not a heartbeat the engine can take (400).
    Invalid(String),
    /// Another tenant's entity (403).
    Forbidden(String),
    /// An entity the engine keeps the lease of itself (409).
    Conflict(String),
}

impl Refused {
    pub fn message(&self) -> &str {
        match self {
            Refused::Invalid(m) | Refused::Forbidden(m) | Refused::Conflict(m) => m,
        }
    }

    /// The refusal of the batch's heartbeat `i`, its message naming it.
    fn at(mut self, i: usize) -> Self {
        let (Refused::Invalid(m) | Refused::Forbidden(m) | Refused::Conflict(m)) = &mut self;
        *m = format!("heartbeats[{i}]: {m}");
        self
    }
}

/// Who sent a batch, and how.
#[derive(Debug, Clone, Copy)]
pub struct Sender<'a> {
    /// Whose entities it may report.
    pub scope: Scope,
    /// The tenant of a heartbeat that names none: a tenant token's own, the
    /// tenant of the MQTT topic, else 0.
    pub tenant: u32,
    /// `http` or `mqtt`, kept in the row.
    pub via: &'a str,
}

/// The renewals a batch asks for; every heartbeat is checked before any is taken.
///
/// # Errors
/// The first heartbeat that cannot be taken, and why.
pub fn renewals(
    batch: &HeartbeatBatch,
    sender: Sender<'_>,
    owners: &dyn Owners,
) -> Result<Vec<Renewal>, Refused> {
    if batch.heartbeats.is_empty() || batch.heartbeats.len() > MAX_HEARTBEATS {
        return Err(Refused::Invalid(format!(
            "`heartbeats` holds {}; a batch takes 1 to {MAX_HEARTBEATS}",
            batch.heartbeats.len()
        )));
    }
    batch
        .heartbeats
        .iter()
        .enumerate()
        .map(|(i, heartbeat)| renewal(heartbeat, sender, owners).map_err(|refused| refused.at(i)))
        .collect()
}

fn renewal(
    heartbeat: &Heartbeat,
    sender: Sender<'_>,
    owners: &dyn Owners,
) -> Result<Renewal, Refused> {
    let invalid = |m: String| Refused::Invalid(m);
    let entity_type = match heartbeat.entity_type.as_str() {
        "driver" => EntityType::Driver,
        "device" => EntityType::Device,
        other => {
            return Err(invalid(format!(
                "`type` is `{other}`; it must be `driver` or `device`"
            )));
        }
    };
    let id = &heartbeat.id;
    name("id", id).map_err(invalid)?;
    let state = match EntityState::parse(&heartbeat.state) {
        Some(EntityState::Unknown) | None => {
            return Err(invalid(format!(
                "`state` is `{}`; it must be `online`, `offline`, `maintain` or `fault`",
                heartbeat.state
            )));
        }
        Some(state) => state,
    };
    let tenant_id = tenant(heartbeat.tenant_id, sender, owners)?;
    let what = format!("{} `{id}`", entity_type.as_str());
    let parent_id = match (entity_type, &heartbeat.parent) {
        (EntityType::Device, Some(parent)) => {
            name("parent", parent).map_err(invalid)?;
            parent.clone()
        }
        (EntityType::Device, None) => {
            return Err(invalid(format!("{what} needs its driver in `parent`")));
        }
        (EntityType::Driver, Some(_)) => {
            return Err(invalid(format!("{what}: a driver has no `parent`")));
        }
        (EntityType::Driver, None) => String::new(),
    };
    match entity_type {
        EntityType::Device => match owners.own_device(id) {
            Some(owner) if owner == tenant_id => {
                return Err(Refused::Conflict(format!(
                    "{what} is collected by this engine, whose rounds keep its lease"
                )));
            }
            Some(_) => {
                return Err(Refused::Forbidden(format!(
                    "{what} belongs to another tenant"
                )));
            }
            None => {}
        },
        EntityType::Driver if owners.own_driver(tenant_id, id) => {
            return Err(Refused::Conflict(format!(
                "{what} is a driver of this engine, which keeps its lease itself"
            )));
        }
        EntityType::Driver => {}
    }
    let (timeout_seconds, timeout_source) = lease(heartbeat, entity_type).map_err(invalid)?;
    let mut extension = json!({ "reportedBy": sender.via });
    match (entity_type, identity(heartbeat).map_err(invalid)?) {
        (EntityType::Device, Some((product_id, device_num))) => {
            if owners.own_identity(product_id, device_num) {
                return Err(Refused::Conflict(format!(
                    "{what}: `{product_id}/{device_num}` is the MQTT identity of a device of this engine"
                )));
            }
            extension["productId"] = json!(product_id);
            extension["deviceNum"] = json!(device_num);
        }
        (EntityType::Driver, Some(_)) => {
            return Err(invalid(format!(
                "{what}: a driver is announced under `driver/{tenant_id}/{id}`; it takes no `productId` or `deviceNum`"
            )));
        }
        (_, None) => {}
    }
    Ok(Renewal {
        entity_type,
        entity_id: id.clone(),
        parent_id,
        tenant_id,
        state,
        timeout_seconds,
        timeout_source,
        extension,
        expired_state: EntityState::Offline,
    })
}

/// The heartbeat's tenant, if the sender may speak for it.
fn tenant(asked: Option<u32>, sender: Sender<'_>, owners: &dyn Owners) -> Result<u32, Refused> {
    let tenant = asked.unwrap_or(sender.tenant);
    if !sender.scope.sees(tenant) {
        return Err(Refused::Forbidden(format!(
            "tenant {tenant} is not the tenant of this token or key"
        )));
    }
    if !owners.knows_tenant(tenant) {
        return Err(Refused::Invalid(format!(
            "no tenant {tenant} is configured"
        )));
    }
    Ok(tenant)
}

/// The lease a heartbeat asks for, and where its length came from: the
/// collector's `timeout` (seed 000's driver-reported timeout), else the default.
fn lease(heartbeat: &Heartbeat, entity_type: EntityType) -> Result<(u64, TimeoutSource), String> {
    let Some(timeout) = heartbeat.timeout else {
        if heartbeat.timeout_unit.is_some() {
            return Err("`timeoutUnit` without `timeout`".into());
        }
        let seconds = match entity_type {
            EntityType::Driver => DRIVER_LEASE_SECONDS,
            EntityType::Device => REPORTED_DEVICE_LEASE_SECONDS,
        };
        return Ok((seconds, TimeoutSource::System));
    };
    let unit_ms: u64 = match heartbeat.timeout_unit.as_deref().unwrap_or("s") {
        "ms" => 1,
        "s" => 1000,
        "min" => 60_000,
        "h" => 3_600_000,
        other => {
            return Err(format!(
                "`timeoutUnit` is `{other}`; it must be `ms`, `s`, `min` or `h`"
            ));
        }
    };
    let seconds = timeout.saturating_mul(unit_ms).div_ceil(1000);
    if !(1..=MAX_TIMEOUT_SECONDS).contains(&seconds) {
        return Err(format!(
            "`timeout` is {seconds} s; a lease lasts 1 s to {MAX_TIMEOUT_SECONDS} s (a week)"
        ));
    }
    Ok((seconds, TimeoutSource::Driver))
}

/// The MQTT identity a heartbeat gives, if any: both parts or neither.
fn identity(heartbeat: &Heartbeat) -> Result<Option<(&str, &str)>, String> {
    match (&heartbeat.product_id, &heartbeat.device_num) {
        (Some(product_id), Some(device_num)) => {
            name("productId", product_id)?;
            name("deviceNum", device_num)?;
            Ok(Some((product_id, device_num)))
        }
        (None, None) => Ok(None),
        _ => Err("`productId` and `deviceNum` go together".into()),
    }
}

/// An id that can stand in a topic level: 1 to 128 bytes, no `/`, `+`, `#`
/// or control character.
fn name(key: &str, text: &str) -> Result<(), String> {
    if text.is_empty() || text.len() > MAX_NAME {
        return Err(format!(
            "`{key}` must be 1 to {MAX_NAME} bytes (it has {})",
            text.len()
        ));
    }
    if text
        .chars()
        .any(|c| matches!(c, '/' | '+' | '#') || c.is_control())
    {
        return Err(format!(
            "`{key}` `{text}` may not hold `/`, `+`, `#` or a control character"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
