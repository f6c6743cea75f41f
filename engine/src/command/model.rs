//! Command records, receipts and their outcomes, as stored and as the API shows
//! them (camelCase JSON).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{CommandAction, CommandKind, CommandStatus, ReceiptResult};
use crate::store::Entry;

/// What a failure does to a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Delivery {
    /// Someone waits for the answer: any failure fails the command at once.
    Realtime,
    /// May wait: a failure puts it back in the queue with backoff.
    Deferrable,
}

/// A command to create.
#[derive(Debug, Clone)]
pub struct NewCommand {
    pub tenant_id: u32,
    pub device_id: String,
    pub kind: CommandKind,
    pub key: String,
    pub value: Value,
    /// The caller's idempotency key; one is made up when none is given.
    pub request_id: Option<String>,
    pub delivery: Delivery,
    /// Where it came from: `http`, `mqtt`.
    pub origin: String,
}

/// One downlink command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Command {
    pub id: u64,
    pub tenant_id: u32,
    pub device_id: String,
    pub kind: CommandKind,
    pub key: String,
    pub value: Value,
    pub request_id: String,
    pub delivery: Delivery,
    pub origin: String,
    pub status: CommandStatus,
    /// Failures on the device side that put it back in the queue.
    pub retry_count: u32,
    /// Claims whose lease ran out without a receipt.
    pub reclaim_count: u32,
    /// Bumped by every claim; a receipt must carry the current one.
    pub claim_generation: u64,
    /// The node that holds (or last held) the claim.
    pub claimed_node_id: Option<String>,
    pub claimed_at: Option<i64>,
    pub lease_expire_at: Option<i64>,
    /// Not claimed before this time (backoff after a failure).
    pub next_attempt_at: i64,
    pub sent_at: Option<i64>,
    /// A SENT command without a receipt by then fails.
    pub timeout_at: Option<i64>,
    /// Not done by then: TIMEOUT.
    pub expire_at: i64,
    pub created_at: i64,
    pub updated_at: i64,
    pub finished_at: Option<i64>,
    /// The last receipt's standard fields.
    pub result: Option<ReceiptResult>,
    pub result_code: Option<u8>,
    /// The vendor's code and the receipt bytes, exactly as reported.
    pub raw_result_code: Option<Value>,
    pub raw_ack: Option<Value>,
    pub message: Option<String>,
}

impl Entry for Command {
    const KIND: &'static str = "command";

    fn id(&self) -> u64 {
        self.id
    }

    fn state(&self) -> &'static str {
        self.status.as_str()
    }
}

/// A receipt (CMD-C2) as a node reports it.
#[derive(Debug, Clone, PartialEq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Receipt {
    pub node_id: String,
    pub claim_generation: Option<u64>,
    pub result: ReceiptResult,
    pub result_code: Option<u8>,
    pub raw_result_code: Option<Value>,
    pub raw_ack: Option<Value>,
    pub message: Option<String>,
}

/// Why a receipt was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Rejection {
    /// The receipt carries no `claimGeneration`.
    ClaimGenerationRequired,
    /// Another node holds the claim.
    NodeMismatch,
    /// No node is recorded for the claim: nothing to check the receipt against.
    NodeUnknown,
    /// `result` ACKED needs a `resultCode`.
    ResultCodeRequired,
}

/// What a receipt did.
#[derive(Debug, Clone, PartialEq)]
pub enum ReceiptOutcome {
    /// The guards held; the command as it is now.
    Accepted(Box<Command>),
    /// A stale receipt of the claiming node (an older generation, or a command that
    /// already moved on): counted, nothing changed.
    Duplicated,
    Rejected(Rejection),
}

/// One line of a command's history, written in the transaction of the change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandRecord {
    pub command_id: u64,
    pub seq: u32,
    /// None for the creation.
    pub action: Option<CommandAction>,
    pub from: Option<CommandStatus>,
    pub to: CommandStatus,
    /// `engine`, `node:<id>`, `admin`, `tenant:<id>`.
    pub actor: String,
    pub at: i64,
    pub note: Option<String>,
}
