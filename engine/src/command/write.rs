//! The write service: one safe write of one tag, executing one command.
//!
//! - idempotent by request id: a repeated request gets the first outcome (kept
//!   with the command, see [`CommandStore::finish_write`]), one still running is
//!   refused as in flight;
//! - checked before anything is sent: the tag exists and is writable (W or RW),
//!   the value has the tag's type, lies in its `min`..`max`, and fits its data
//!   type once scaled back to the device's raw value;
//! - announced before it is sent: its intent is committed first (CMD-W1
//!   of `docs/commands.md`), and an intent found without an outcome is settled
//!   by reading the tag back, never by writing again (CMD-W2);
//! - serialised with polling on the device's connection (the link's lock);
//! - tried again only when nothing reached the device, or when the device
//!   confirmed it and holds another value (read back, `readback: true`); a write
//!   that may have reached the device unconfirmed is settled like an intent in
//!   doubt (CMD-W3); never retried on a device's refusal;
//! - audited: who, when, which tag, value before, value after, result.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value as Json;

use super::outcome::{WriteIntent, WriteRecord, WriteRequest, WriteStatus};
use super::store::CommandStore;
use super::values::{same, sample_json, to_raw};
use crate::collector::{Device, Fleet, TagIoError};
use crate::model::{Access, TagSpec, Value, result_code};
use crate::store::StoreError;
use crate::sync::lock;

/// Pause before another attempt after a connection failure, a read-back
/// mismatch, or a failed read-back.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// The requests being written now, by tenant and request id.
type Running = Arc<Mutex<HashSet<(u32, String)>>>;

/// The write service over the engine's devices.
#[derive(Debug)]
pub struct WriteService {
    fleet: Arc<Fleet>,
    store: Arc<CommandStore>,
    running: Running,
    attempts: u32,
}

/// A write's outcome. While it lives, the request counts as being written, so
/// hold it until the outcome is stored.
#[derive(Debug)]
pub struct Written {
    pub record: WriteRecord,
    _running: Option<RunningWrite>,
}

/// A request marked as being written, until dropped.
#[derive(Debug)]
struct RunningWrite {
    running: Running,
    key: (u32, String),
}

impl Drop for RunningWrite {
    fn drop(&mut self) {
        lock(&self.running).remove(&self.key);
    }
}

impl Written {
    fn alone(record: WriteRecord) -> Self {
        Self {
            record,
            _running: None,
        }
    }
}

/// Whether the value of tag `tag` can be read to check a write.
fn readable(device: &Device, tag: u32, spec: &TagSpec) -> bool {
    spec.access == Access::ReadWrite || device.reads_back(tag)
}

/// Runs a blocking store call off the async workers.
async fn blocking<T: Send + 'static>(
    store: &Arc<CommandStore>,
    call: impl FnOnce(&CommandStore) -> Result<T, StoreError> + Send + 'static,
) -> Result<T, String> {
    let store = Arc::clone(store);
    match tokio::task::spawn_blocking(move || call(&store)).await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(error) => Err(error.to_string()),
    }
}

impl WriteService {
    /// `attempts`: tries per write on a connection failure or a read-back
    /// mismatch, and reads per read-back.
    pub fn new(fleet: Arc<Fleet>, store: Arc<CommandStore>, attempts: u32) -> Self {
        Self {
            fleet,
            store,
            running: Running::default(),
            attempts: attempts.max(1),
        }
    }

    /// Makes one write, or returns the outcome of the earlier one with its id, or
    /// settles the one whose intent is in doubt (CMD-W2). The outcome is not stored
    /// here: [`CommandStore::finish_write`] stores it with the receipt.
    pub async fn write(&self, request: &WriteRequest) -> Written {
        let (tenant, id) = (request.tenant_id, request.request_id.clone());
        match blocking(&self.store, move |s| s.recorded(tenant, &id)).await {
            Ok(Some(earlier)) => return Written::alone(earlier),
            Ok(None) => {}
            Err(error) => {
                let message = format!("the write log cannot be read: {error}; nothing was sent");
                return Written::alone(failed(request, message));
            }
        }
        let key = (request.tenant_id, request.request_id.clone());
        if !lock(&self.running).insert(key.clone()) {
            let message = format!("request {} is being written now", request.request_id);
            let busy =
                WriteRecord::of(request).ended(WriteStatus::InFlight, result_code::BUSY, message);
            return Written::alone(busy);
        }
        let running = RunningWrite {
            running: Arc::clone(&self.running),
            key,
        };
        let (tenant, id) = (request.tenant_id, request.request_id.clone());
        let record = match blocking(&self.store, move |s| s.intent(tenant, &id)).await {
            Ok(Some(intent)) => self.settle_intent(request, &intent).await,
            Ok(None) => self.perform(request).await,
            Err(error) => failed(
                request,
                format!("the write intents cannot be read: {error}; nothing was sent"),
            ),
        };
        Written {
            record,
            _running: Some(running),
        }
    }

    async fn perform(&self, request: &WriteRequest) -> WriteRecord {
        let record = WriteRecord::of(request);
        let Some(device) = self.fleet.roster().get(&request.device_id).cloned() else {
            let message = format!("no device `{}`", request.device_id);
            return record.ended(
                WriteStatus::Invalid,
                result_code::INVALID_PARAMETER,
                message,
            );
        };
        let Some(tag) = device.tag_index(&request.key) else {
            let message = format!(
                "device `{}` has no tag `{}`",
                request.device_id, request.key
            );
            return record.ended(
                WriteStatus::Invalid,
                result_code::INVALID_PARAMETER,
                message,
            );
        };
        let spec = &device.tags[tag as usize];
        if spec.access == Access::Read {
            let message = format!("tag `{}` is read-only (access R)", spec.key);
            return record.ended(WriteStatus::Invalid, result_code::UNSUPPORTED, message);
        }
        let raw = match to_raw(spec, &request.value) {
            Ok(raw) => raw,
            Err(message) => {
                return record.ended(
                    WriteStatus::Invalid,
                    result_code::INVALID_PARAMETER,
                    message,
                );
            }
        };
        let mut record = record;
        record.raw = Some(raw.to_json());
        if spec.access == Access::ReadWrite {
            record.before = device
                .value_before_write(tag)
                .await
                .ok()
                .and_then(|s| sample_json(&s));
        }
        let intent = intent_of(request, &record);
        if let Err(error) = blocking(&self.store, move |s| s.intend(&intent)).await {
            let message = format!("the write intent cannot be stored: {error}; nothing was sent");
            return record.ended(WriteStatus::Failed, result_code::EXECUTION_FAILED, message);
        }
        self.send(&device, tag, spec, raw, record, &request.value)
            .await
    }

    /// Sends the write, with the retries that cannot execute it twice.
    async fn send(
        &self,
        device: &Device,
        tag: u32,
        spec: &TagSpec,
        raw: Value,
        mut record: WriteRecord,
        wanted: &Json,
    ) -> WriteRecord {
        let readback = device.reads_back(tag);
        let mut last = WriteStatus::Unreachable;
        for attempt in 1..=self.attempts {
            record.attempts = attempt;
            if attempt > 1 {
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            match device.write_tag(tag, raw.clone()).await {
                Ok(()) => {}
                Err(TagIoError::Refused { code, message }) => {
                    record.raw_code = Some(code);
                    return record.ended(
                        WriteStatus::Refused,
                        result_code::EXECUTION_FAILED,
                        message,
                    );
                }
                Err(TagIoError::Unreachable(message)) => {
                    // Nothing was sent: another attempt cannot execute it twice.
                    record.message = message;
                    last = WriteStatus::Unreachable;
                    continue;
                }
                Err(TagIoError::Lost(message)) => {
                    // CMD-W3: it may have been carried out; read, do not write again.
                    let why = format!("the write was sent but {message}");
                    return self.settle(device, tag, spec, record, wanted, &why).await;
                }
                Err(TagIoError::Component(message)) => {
                    return record.ended(
                        WriteStatus::Failed,
                        result_code::EXECUTION_FAILED,
                        message,
                    );
                }
            }
            if !readback {
                return record.ended(WriteStatus::Written, result_code::SUCCESS, "written".into());
            }
            match self.read_back(device, tag).await {
                Ok(sample) => {
                    record.after = sample_json(&sample);
                    if same(spec, &sample, wanted) {
                        let message = "written and read back".to_owned();
                        return record.ended(WriteStatus::Written, result_code::SUCCESS, message);
                    }
                    // The device confirmed the write and holds another value:
                    // writing again is what read-back is for (the seed's rule).
                    record.message = format!(
                        "read back {} instead of {wanted}",
                        record.after.clone().unwrap_or(Json::Null)
                    );
                    last = WriteStatus::Mismatch;
                }
                Err(error) => {
                    let message = format!(
                        "the device confirmed the write, but it could not be read back to check it ({error}): not written again"
                    );
                    return record.ended(
                        WriteStatus::Unknown,
                        result_code::EXECUTION_FAILED,
                        message,
                    );
                }
            }
        }
        let message = format!("{} ({} attempts)", record.message, record.attempts);
        record.ended(last, result_code::EXECUTION_FAILED, message)
    }

    /// Reads tag `tag`, trying a bounded number of times.
    async fn read_back(
        &self,
        device: &Device,
        tag: u32,
    ) -> Result<crate::model::Sample, TagIoError> {
        let mut last = None;
        for attempt in 1..=self.attempts {
            if attempt > 1 {
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            match device.read_tag(tag).await {
                Ok(sample) => return Ok(sample),
                Err(error) => last = Some(error),
            }
        }
        Err(last.unwrap_or_else(|| TagIoError::Unreachable("not read".into())))
    }

    /// Settles an intent found without an outcome: the engine stopped between
    /// committing it and storing how the write ended (CMD-W2).
    async fn settle_intent(&self, request: &WriteRequest, intent: &WriteIntent) -> WriteRecord {
        let mut record = WriteRecord::of(request);
        record.raw = Some(intent.raw.clone());
        record.before.clone_from(&intent.before);
        let why = format!(
            "in doubt: the engine stopped after it committed the intent to write {} (claim generation {}) and before it stored how the write ended",
            intent.request.value, intent.request.claim_generation
        );
        let Some(device) = self.fleet.roster().get(&request.device_id).cloned() else {
            let message = format!("{why}; the device is no longer configured: outcome unknown");
            return record.ended(WriteStatus::Unknown, result_code::EXECUTION_FAILED, message);
        };
        let Some(tag) = device.tag_index(&request.key) else {
            let message = format!(
                "{why}; the device has no tag `{}` any more: outcome unknown",
                request.key
            );
            return record.ended(WriteStatus::Unknown, result_code::EXECUTION_FAILED, message);
        };
        let spec = device.tags[tag as usize].clone();
        self.settle(&device, tag, &spec, record, &request.value, &why)
            .await
    }

    /// Tells from the tag's value whether a write that may have reached the device
    /// did: done when the device holds the value, otherwise unknown. Never writes.
    async fn settle(
        &self,
        device: &Device,
        tag: u32,
        spec: &TagSpec,
        mut record: WriteRecord,
        wanted: &Json,
        why: &str,
    ) -> WriteRecord {
        if !readable(device, tag, spec) {
            let message = format!(
                "{why}; tag `{}` cannot be read to tell whether the device holds {wanted}: outcome unknown, not written again",
                spec.key
            );
            return record.ended(WriteStatus::Unknown, result_code::EXECUTION_FAILED, message);
        }
        match self.read_back(device, tag).await {
            Ok(sample) => {
                record.after = sample_json(&sample);
                let held = record.after.clone().unwrap_or(Json::Null);
                if same(spec, &sample, wanted) {
                    let message = format!("{why}; read back {held}: the device holds the value");
                    record.ended(WriteStatus::Written, result_code::SUCCESS, message)
                } else {
                    let message = format!(
                        "{why}; the device holds {held}, not {wanted}: outcome unknown, not written again"
                    );
                    record.ended(WriteStatus::Unknown, result_code::EXECUTION_FAILED, message)
                }
            }
            Err(error) => {
                let message = format!(
                    "{why}; tag `{}` could not be read back ({error}): outcome unknown, not written again",
                    spec.key
                );
                record.ended(WriteStatus::Unknown, result_code::EXECUTION_FAILED, message)
            }
        }
    }
}

/// A failure before anything was sent.
fn failed(request: &WriteRequest, message: String) -> WriteRecord {
    WriteRecord::of(request).ended(WriteStatus::Failed, result_code::EXECUTION_FAILED, message)
}

fn intent_of(request: &WriteRequest, record: &WriteRecord) -> WriteIntent {
    WriteIntent {
        request: request.clone(),
        raw: record.raw.clone().unwrap_or(Json::Null),
        before: record.before.clone(),
        at: record.at,
    }
}
