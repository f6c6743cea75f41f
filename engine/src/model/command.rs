//! The words of the downlink command machine. Which action leads where is the
//! rules component's whitelist, read once per load into a [`super::Whitelist`].

use std::fmt;

use serde::{Deserialize, Serialize};

/// What a command asks of the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CommandKind {
    /// `property/set`: write `value` to the tag `key`.
    PropertySet,
    /// `function/invoke`: invoke the function `key`; on a register device, a
    /// function is a writable tag and its argument the value written.
    FunctionInvoke,
}

/// The seven states, stored and shown as their upper-case names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CommandStatus {
    /// Waiting to be claimed.
    Pending,
    /// A node took it under a lease.
    Claimed,
    /// The node reported the frame sent; a receipt is awaited.
    Sent,
    /// The device answered with result code 0: it says it executed the command.
    /// Whether the effect happened is for later readings to show.
    Acked,
    Failed,
    /// Retried too often, or past its expiry.
    Timeout,
    Cancelled,
}

impl CommandStatus {
    pub const ALL: [CommandStatus; 7] = [
        CommandStatus::Pending,
        CommandStatus::Claimed,
        CommandStatus::Sent,
        CommandStatus::Acked,
        CommandStatus::Failed,
        CommandStatus::Timeout,
        CommandStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CommandStatus::Pending => "PENDING",
            CommandStatus::Claimed => "CLAIMED",
            CommandStatus::Sent => "SENT",
            CommandStatus::Acked => "ACKED",
            CommandStatus::Failed => "FAILED",
            CommandStatus::Timeout => "TIMEOUT",
            CommandStatus::Cancelled => "CANCELLED",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// No transition leaves it.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            CommandStatus::Acked
                | CommandStatus::Failed
                | CommandStatus::Timeout
                | CommandStatus::Cancelled
        )
    }
}

impl fmt::Display for CommandStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What can happen to a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CommandAction {
    Claim,
    ReportSent,
    Ack,
    Fail,
    /// Back to the queue: the lease ran out, or a deferrable command failed.
    Requeue,
    /// Too many retries, or past its expiry.
    Expire,
    Cancel,
}

impl CommandAction {
    pub const ALL: [CommandAction; 7] = [
        CommandAction::Claim,
        CommandAction::ReportSent,
        CommandAction::Ack,
        CommandAction::Fail,
        CommandAction::Requeue,
        CommandAction::Expire,
        CommandAction::Cancel,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CommandAction::Claim => "claim",
            CommandAction::ReportSent => "report-sent",
            CommandAction::Ack => "ack",
            CommandAction::Fail => "fail",
            CommandAction::Requeue => "requeue",
            CommandAction::Expire => "expire",
            CommandAction::Cancel => "cancel",
        }
    }
}

impl fmt::Display for CommandAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `result` of a receipt (CMD-C2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReceiptResult {
    /// The device answered (a receipt frame arrived); `resultCode` says how.
    Acked,
    /// Sent to a device that gives no receipt.
    Sent,
    Timeout,
    DeviceOffline,
    Failed,
}

/// Standard result codes of a receipt; vendors' own codes go to `rawResultCode`.
pub mod result_code {
    pub const SUCCESS: u8 = 0;
    pub const UNSUPPORTED: u8 = 1;
    pub const INVALID_PARAMETER: u8 = 2;
    pub const EXECUTION_FAILED: u8 = 3;
    pub const BUSY: u8 = 4;
}
