//! Alarm records and their action history, as stored and as the API shows them
//! (camelCase JSON).

use serde::{Deserialize, Serialize};

use crate::model::{AlarmAction, AlarmState};
use crate::store::Entry;

/// What raised an alarm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// A rule over sample values (thresholds).
    Rule,
    /// A lease event: `device-offline`, `driver-offline`.
    Lease,
    /// A device event posted to `POST /events`.
    Event,
    /// The engine itself, e.g. a tenant's rule component that failed.
    Engine,
}

impl Source {
    /// A source whose raises describe a lasting condition: while its alarm is open
    /// and not cleared, a repeated raise is the same condition, not a new one.
    pub fn is_level(self) -> bool {
        matches!(self, Source::Rule | Source::Engine)
    }
}

/// One alarm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Alarm {
    pub id: u64,
    pub tenant_id: u32,
    pub device_id: String,
    pub rule_key: String,
    pub state: AlarmState,
    pub source: Source,
    pub message: String,
    /// `deviceId:ruleKey` while the alarm is the open one of its key; none once it
    /// ended or a newer alarm took the key.
    pub active_key: Option<String>,
    /// The alarm that replaced this one while nobody attended it.
    pub superseded_by: Option<u64>,
    /// The device event behind the raise, if any.
    pub event_id: Option<String>,
    /// When the condition happened (the signal's time), ms since the Unix epoch.
    pub raised_at: i64,
    pub created_at: i64,
    pub updated_at: i64,
    /// Set by a paired clear event; the state does not change.
    pub cleared_at: Option<i64>,
    pub clear_event_id: Option<String>,
    pub pushed_at: Option<i64>,
    pub confirmed_at: Option<i64>,
    pub confirmed_by: Option<String>,
    pub escalated_at: Option<i64>,
    pub handled_at: Option<i64>,
    pub handled_by: Option<String>,
    pub closed_at: Option<i64>,
    pub closed_by: Option<String>,
}

impl Alarm {
    /// The key that holds at most one open alarm: `deviceId:ruleKey`.
    pub fn active_key_of(device_id: &str, rule_key: &str) -> String {
        format!("{device_id}:{rule_key}")
    }

    /// Records who did `action` and when, in the fields it concerns.
    pub(super) fn stamp(&mut self, action: AlarmAction, actor: &str, at: i64) {
        let by = Some(actor.to_owned());
        match action {
            AlarmAction::Push => self.pushed_at = Some(at),
            AlarmAction::Confirm => (self.confirmed_at, self.confirmed_by) = (Some(at), by),
            AlarmAction::Escalate => self.escalated_at = Some(at),
            AlarmAction::Handle => (self.handled_at, self.handled_by) = (Some(at), by),
            AlarmAction::Close | AlarmAction::False => {
                (self.closed_at, self.closed_by) = (Some(at), by);
            }
            AlarmAction::Delay | AlarmAction::Wake | AlarmAction::Supersede => {}
        }
        self.updated_at = at;
    }
}

impl Entry for Alarm {
    const KIND: &'static str = "alarm";

    fn id(&self) -> u64 {
        self.id
    }

    fn state(&self) -> &'static str {
        self.state.as_str()
    }
}

/// What an audit record is about: a transition, or an event that changed no state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// The alarm was opened.
    Raise,
    /// A transition of the whitelist.
    Transition,
    /// A paired clear event was recorded on it.
    Clear,
    /// A newer alarm took its active key; its state stays.
    Release,
}

/// One line of an alarm's history, written in the transaction of the change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActionRecord {
    pub alarm_id: u64,
    /// Order within the alarm's history, from 0.
    pub seq: u32,
    pub change: Change,
    /// The action, for transitions.
    pub action: Option<AlarmAction>,
    pub from: Option<AlarmState>,
    pub to: AlarmState,
    /// Who: `admin`, `tenant:<id>` (with the name a person gave), or `engine`.
    pub actor: String,
    pub at: i64,
    pub note: Option<String>,
}
