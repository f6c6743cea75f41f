//! The words of the alarm state machine: states, actions and the signals rules
//! emit. Which action leads where is not here: the rules component owns the
//! whitelist, read once per load into a [`super::Whitelist`].

use std::fmt;

use serde::{Deserialize, Serialize};

/// The nine states, stored and shown as their upper-case names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AlarmState {
    New,
    Pushed,
    Delayed,
    Confirmed,
    Escalated,
    Handled,
    Closed,
    False,
    Superseded,
}

impl AlarmState {
    pub const ALL: [AlarmState; 9] = [
        AlarmState::New,
        AlarmState::Pushed,
        AlarmState::Delayed,
        AlarmState::Confirmed,
        AlarmState::Escalated,
        AlarmState::Handled,
        AlarmState::Closed,
        AlarmState::False,
        AlarmState::Superseded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AlarmState::New => "NEW",
            AlarmState::Pushed => "PUSHED",
            AlarmState::Delayed => "DELAYED",
            AlarmState::Confirmed => "CONFIRMED",
            AlarmState::Escalated => "ESCALATED",
            AlarmState::Handled => "HANDLED",
            AlarmState::Closed => "CLOSED",
            AlarmState::False => "FALSE",
            AlarmState::Superseded => "SUPERSEDED",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Still waiting for a person: counted as pending in the statistics.
    pub fn is_pending(self) -> bool {
        matches!(
            self,
            AlarmState::New
                | AlarmState::Pushed
                | AlarmState::Delayed
                | AlarmState::Confirmed
                | AlarmState::Escalated
        )
    }

    /// Counts as handled in today's handling rate: HANDLED and what follows it.
    pub fn counts_as_handled(self) -> bool {
        matches!(self, AlarmState::Handled | AlarmState::Closed)
    }
}

impl fmt::Display for AlarmState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What can happen to an alarm. People request four of them over HTTP
/// ([`AlarmAction::BY_PEOPLE`]); the engine takes the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AlarmAction {
    /// The broker acknowledged the alarm's delivery.
    Push,
    /// Every recipient is in quiet hours.
    Delay,
    /// Quiet hours ended.
    Wake,
    Confirm,
    /// Confirmed but not handled in time.
    Escalate,
    Handle,
    Close,
    /// A person judged it a false alarm.
    False,
    /// A newer alarm of the same device and rule replaced it.
    Supersede,
}

impl AlarmAction {
    pub const ALL: [AlarmAction; 9] = [
        AlarmAction::Push,
        AlarmAction::Delay,
        AlarmAction::Wake,
        AlarmAction::Confirm,
        AlarmAction::Escalate,
        AlarmAction::Handle,
        AlarmAction::Close,
        AlarmAction::False,
        AlarmAction::Supersede,
    ];

    /// The actions of `POST /alarms/{id}/{action}`.
    pub const BY_PEOPLE: [AlarmAction; 4] = [
        AlarmAction::Confirm,
        AlarmAction::Handle,
        AlarmAction::Close,
        AlarmAction::False,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AlarmAction::Push => "push",
            AlarmAction::Delay => "delay",
            AlarmAction::Wake => "wake",
            AlarmAction::Confirm => "confirm",
            AlarmAction::Escalate => "escalate",
            AlarmAction::Handle => "handle",
            AlarmAction::Close => "close",
            AlarmAction::False => "false",
            AlarmAction::Supersede => "supersede",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == text)
    }

    pub fn by_people(self) -> bool {
        Self::BY_PEOPLE.contains(&self)
    }
}

impl fmt::Display for AlarmAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Raise opens an alarm; clear marks the open one as cleared (never closes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalKind {
    Raise,
    Clear,
}

/// What a rule decided about one rule key of one device.
#[derive(Debug, Clone, PartialEq)]
pub struct Signal {
    pub kind: SignalKind,
    pub rule_key: String,
    pub ts_ms: i64,
    pub message: String,
    /// The device event behind it, if any.
    pub event_id: Option<String>,
}
