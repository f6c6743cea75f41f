//! Writes as stored: what is to be written (the request), what was about to be
//! written (the intent, committed before the device sees anything), and how it
//! ended (the record), with the receipt the engine's node reports for it.

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::model::Receipt;
use crate::model::{ReceiptResult, result_code};

/// One write to make: the command it executes, under which claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WriteRequest {
    pub command_id: u64,
    pub claim_generation: u64,
    pub tenant_id: u32,
    pub request_id: String,
    pub device_id: String,
    pub key: String,
    /// The engineering value, as JSON (number, boolean or string).
    pub value: Json,
    /// Who asks: `node:<id>`, ...
    pub actor: String,
}

/// How a write ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WriteStatus {
    /// Written (and read back equal when the tag asks for it), or found done
    /// when an intent in doubt was settled.
    Written,
    /// Refused before anything was sent: unknown tag, read-only, bad value.
    Invalid,
    /// The device refused it (an exception): not retried.
    Refused,
    /// No connection on every attempt: nothing was sent.
    Unreachable,
    /// Written, but the value read back differed on every attempt.
    Mismatch,
    /// A component call failed, or the intent could not be stored: nothing was
    /// sent.
    Failed,
    /// The write may have reached the device and whether it did cannot be told:
    /// never sent again (CMD-W2, CMD-W3 of `docs/commands.md`).
    Unknown,
    /// The same request id is being written right now.
    InFlight,
}

/// What the engine was about to write, committed before the device sees it
/// (CMD-W1). One without a record is in doubt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WriteIntent {
    #[serde(flatten)]
    pub request: WriteRequest,
    /// The raw value to be sent.
    pub raw: Json,
    /// The tag's value before the write, when it can be read.
    pub before: Option<Json>,
    pub at: i64,
}

/// The outcome of a write, as stored and returned to repeated requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WriteRecord {
    pub tenant_id: u32,
    pub request_id: String,
    pub actor: String,
    pub at: i64,
    pub device_id: String,
    pub key: String,
    pub value: Json,
    /// The raw value sent to the device, when it got that far.
    pub raw: Option<Json>,
    /// The tag's value before the write, when it can be read.
    pub before: Option<Json>,
    /// The value read back after the write, when the tag is read back.
    pub after: Option<Json>,
    pub status: WriteStatus,
    /// The standard code: 0 success, 1 not supported, 2 invalid parameter,
    /// 3 execution failed, 4 busy.
    pub result_code: u8,
    /// The device's own code (a Modbus exception code, ...), as it gave it.
    pub raw_code: Option<u32>,
    pub message: String,
    pub attempts: u32,
}

impl WriteRecord {
    /// A record of `request` yet to be filled in.
    pub(super) fn of(request: &WriteRequest) -> Self {
        Self {
            tenant_id: request.tenant_id,
            request_id: request.request_id.clone(),
            actor: request.actor.clone(),
            at: crate::clock::now_ms(),
            device_id: request.device_id.clone(),
            key: request.key.clone(),
            value: request.value.clone(),
            raw: None,
            before: None,
            after: None,
            status: WriteStatus::Failed,
            result_code: result_code::EXECUTION_FAILED,
            raw_code: None,
            message: String::new(),
            attempts: 0,
        }
    }

    /// Ends the record as `status` with `code` and `message`.
    pub(super) fn ended(mut self, status: WriteStatus, code: u8, message: String) -> Self {
        self.status = status;
        self.result_code = code;
        self.message = message;
        self
    }

    /// Whether the command it executed is done with, whatever its delivery: an
    /// outcome another attempt could make worse (CMD-W2, CMD-W3).
    pub fn is_settled_failure(&self) -> bool {
        self.status == WriteStatus::Unknown
    }

    /// The receipt the engine's node reports for this outcome.
    pub fn receipt(&self, node_id: &str, generation: u64) -> Receipt {
        let (result, code) = match self.status {
            WriteStatus::Written => (ReceiptResult::Acked, result_code::SUCCESS),
            // The device answered, and said no (or kept the old value).
            WriteStatus::Refused | WriteStatus::Mismatch => {
                (ReceiptResult::Acked, result_code::EXECUTION_FAILED)
            }
            WriteStatus::Unreachable => (ReceiptResult::DeviceOffline, self.result_code),
            WriteStatus::Invalid
            | WriteStatus::Failed
            | WriteStatus::Unknown
            | WriteStatus::InFlight => (ReceiptResult::Failed, self.result_code),
        };
        Receipt {
            node_id: node_id.to_owned(),
            claim_generation: Some(generation),
            result,
            result_code: Some(code),
            raw_result_code: self.raw_code.map(Json::from),
            raw_ack: None,
            message: Some(self.message.clone()),
        }
    }
}
