//! The payloads of the engine's other messages: statuses, state-change events,
//! alarm notices, command replies and the replies to configuration pushes.

use serde::Serialize;
use serde_json::{Value as Json, json};

use crate::model::{CommandStatus, EntityState, Transition};

/// The collector's own retained status on `collector/{clientId}/status/post`:
/// `{"status": "online", "ts": ...}` (`offline` in its Last Will and at a clean stop).
pub fn status(state: EntityState, ts_ms: i64) -> Vec<u8> {
    json!({ "status": state.as_str(), "ts": ts_ms })
        .to_string()
        .into_bytes()
}

/// A device's or driver's retained status on `status/post`: `{"status":
/// "online", "ts": ..., "collector": CLIENT_ID}`, naming the collector that
/// says it (its own status tells whether it still speaks: STATE-7 of
/// `docs/state.md`).
pub fn entity_status(state: EntityState, ts_ms: i64, collector: &str) -> Vec<u8> {
    json!({ "status": state.as_str(), "ts": ts_ms, "collector": collector })
        .to_string()
        .into_bytes()
}

/// A state change on `event/post/{event}`, for the platform's rules.
pub fn entity_event(transition: &Transition, ts_ms: i64) -> Vec<u8> {
    let row = &transition.row;
    json!({
        "event": transition.event(),
        "entityType": row.entity_type.as_str(),
        "id": row.entity_id,
        "state": row.state.as_str(),
        "lastState": transition.from.as_str(),
        "lastHeartbeat": row.last_heartbeat,
        "expireTime": row.expire_time,
        "ts": ts_ms,
    })
    .to_string()
    .into_bytes()
}

/// What an alarm notice announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Notice {
    /// A new alarm.
    Alarm,
    /// A confirmed alarm nobody handled in time.
    Escalation,
}

/// A notice on the alarm topic: `{"type": "alarm" | "escalation", "alarm": {...}}`.
pub fn alarm_notice(notice: Notice, alarm: &impl Serialize) -> Vec<u8> {
    json!({ "type": notice, "alarm": alarm })
        .to_string()
        .into_bytes()
}

/// The status a reply gives: the command's, or `REJECTED` for a message that did
/// not become a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyStatus {
    Command(CommandStatus),
    Rejected,
}

impl Serialize for ReplyStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(match self {
            ReplyStatus::Command(status) => status.as_str(),
            ReplyStatus::Rejected => "REJECTED",
        })
    }
}

/// A reply on `.../reply`: what became of a command (or of a message that could
/// not become one).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandReply<'a> {
    /// The caller's request id, as it sent it (null when it sent none usable).
    pub request_id: Json,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<&'a str>,
    pub status: ReplyStatus,
    pub result_code: Option<u8>,
    pub message: Option<&'a str>,
    pub ts: i64,
}

impl CommandReply<'_> {
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// What became of a configuration push.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PushStatus {
    /// In force: the device runs with it (or already did, unchanged).
    Applied,
    /// Refused with every problem; nothing changed.
    Rejected,
}

/// One problem of a pushed configuration: where in the JSON, and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct PushProblem {
    /// A JSON path into the pushed document: `$.channels[0].tags[1].address`.
    pub path: String,
    pub message: String,
}

impl PushProblem {
    pub fn new(path: &str, message: impl Into<String>) -> Self {
        Self {
            path: path.to_owned(),
            message: message.into(),
        }
    }
}

/// A reply on `config/push/reply`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushReply<'a> {
    pub request_id: Json,
    pub device_id: Option<&'a str>,
    pub status: PushStatus,
    /// Whether the device was rebuilt (false: it already ran with this).
    pub changed: bool,
    pub problems: &'a [PushProblem],
    pub message: &'a str,
    pub ts: i64,
}

impl PushReply<'_> {
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}
