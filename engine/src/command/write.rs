//! The write service: one safe write of one tag.
//!
//! - idempotent by request id: a repeated request gets the first result (kept in
//!   redb with the audit record), one still running is refused as in flight;
//! - checked before anything is sent: the tag exists and is writable (W or RW),
//!   the value has the tag's type, lies in its `min`..`max`, and fits its data
//!   type once scaled back to the device's raw value;
//! - serialised with polling on the device's connection (the link's lock);
//! - read back when the tag says `readback: true`, retried a bounded number of
//!   times on a mismatch or a lost connection, never on a device's refusal;
//! - audited: who, when, which tag, value before, value after, result.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

use crate::collector::{Fleet, TagIoError};
use crate::model::result_code;
use crate::model::{Access, DataType, Quality, Sample, SettingValue, TagSpec, Value};
use crate::store::{Keyed, Store, StoreError};
use crate::sync::lock;

/// (tenant, requestId) -> write record (JSON): the audit trail and the results
/// repeated requests get.
const WRITES: &str = "write_audit";
/// Pause before another attempt after a lost connection or a read-back mismatch.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// One write to make.
#[derive(Debug, Clone)]
pub struct WriteRequest {
    pub tenant_id: u32,
    pub request_id: String,
    pub device_id: String,
    pub key: String,
    /// The engineering value, as JSON (number, boolean or string).
    pub value: Json,
    /// Who asks: `node:<id>`, `admin`, ...
    pub actor: String,
}

/// How a write ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WriteStatus {
    /// Written (and read back equal when the tag asks for it).
    Written,
    /// Refused before anything was sent: unknown tag, read-only, bad value.
    Invalid,
    /// The device refused it (an exception): not retried.
    Refused,
    /// No connection (or a broken one) on every attempt.
    Unreachable,
    /// Written, but the value read back differed on every attempt.
    Mismatch,
    /// A component call failed.
    Failed,
    /// The same request id is being written right now.
    InFlight,
}

/// The outcome of a write, as stored and returned to repeated requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// The write service over the engine's devices.
#[derive(Debug)]
pub struct WriteService {
    fleet: Arc<Fleet>,
    records: Keyed<(u32, &'static str), WriteRecord>,
    in_flight: Mutex<HashSet<(u32, String)>>,
    attempts: u32,
}

impl WriteService {
    /// `attempts`: tries per write on a lost connection or a read-back mismatch.
    pub fn new(fleet: Arc<Fleet>, store: &Store, attempts: u32) -> Self {
        Self {
            fleet,
            records: Keyed::new(store, WRITES, "write record"),
            in_flight: Mutex::default(),
            attempts: attempts.max(1),
        }
    }

    /// The result an earlier write with this request id got, if any.
    ///
    /// # Errors
    /// A storage failure.
    pub fn recorded(
        &self,
        tenant_id: u32,
        request_id: &str,
    ) -> Result<Option<WriteRecord>, StoreError> {
        self.records.get((tenant_id, request_id))
    }

    fn record(&self, record: &WriteRecord) -> Result<(), StoreError> {
        self.records
            .put((record.tenant_id, record.request_id.as_str()), record)
    }

    /// Makes one write (or returns the result of the earlier one with its id).
    pub async fn write(&self, request: &WriteRequest) -> WriteRecord {
        match self.recorded(request.tenant_id, &request.request_id) {
            Ok(Some(earlier)) => return earlier,
            Ok(None) => {}
            Err(error) => {
                let mut record = blank(request);
                record.status = WriteStatus::Failed;
                record.result_code = result_code::EXECUTION_FAILED;
                record.message = format!("the write log cannot be read: {error}");
                return record;
            }
        }
        let key = (request.tenant_id, request.request_id.clone());
        if !lock(&self.in_flight).insert(key.clone()) {
            let mut record = blank(request);
            record.status = WriteStatus::InFlight;
            record.result_code = result_code::BUSY;
            record.message = format!("request {} is being written now", request.request_id);
            return record;
        }
        let mut record = self.perform(request).await;
        if let Err(error) = self.record(&record) {
            // The write happened (or not) all the same; say the audit failed.
            tracing::error!(request = %request.request_id, %error, "the write audit record failed");
            record.message = format!("{} (audit record not written: {error})", record.message);
        }
        lock(&self.in_flight).remove(&key);
        record
    }

    async fn perform(&self, request: &WriteRequest) -> WriteRecord {
        let mut record = blank(request);
        let invalid = |mut record: WriteRecord, code: u8, message: String| {
            record.status = WriteStatus::Invalid;
            record.result_code = code;
            record.message = message;
            record
        };
        let Some(device) = self.fleet.roster().get(&request.device_id).cloned() else {
            let message = format!("no device `{}`", request.device_id);
            return invalid(record, result_code::INVALID_PARAMETER, message);
        };
        let Some(tag) = device.tag_index(&request.key) else {
            let message = format!(
                "device `{}` has no tag `{}`",
                request.device_id, request.key
            );
            return invalid(record, result_code::INVALID_PARAMETER, message);
        };
        let spec = &device.tags[tag as usize];
        if spec.access == Access::Read {
            let message = format!("tag `{}` is read-only (access R)", spec.key);
            return invalid(record, result_code::UNSUPPORTED, message);
        }
        let raw = match to_raw(spec, &request.value) {
            Ok(raw) => raw,
            Err(message) => return invalid(record, result_code::INVALID_PARAMETER, message),
        };
        record.raw = Some(value_json(&raw));
        if spec.access == Access::ReadWrite {
            record.before = device
                .read_tag(tag)
                .await
                .ok()
                .and_then(|s| sample_json(&s));
        }
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
                    record.status = WriteStatus::Refused;
                    record.result_code = result_code::EXECUTION_FAILED;
                    record.raw_code = Some(code);
                    record.message = message;
                    return record;
                }
                Err(TagIoError::Unreachable(message)) => {
                    record.message = message;
                    last = WriteStatus::Unreachable;
                    continue;
                }
                Err(TagIoError::Component(message)) => {
                    record.status = WriteStatus::Failed;
                    record.result_code = result_code::EXECUTION_FAILED;
                    record.message = message;
                    return record;
                }
            }
            if !readback {
                record.status = WriteStatus::Written;
                record.result_code = result_code::SUCCESS;
                record.message = "written".into();
                return record;
            }
            match device.read_tag(tag).await {
                Ok(sample) => {
                    record.after = sample_json(&sample);
                    if same(spec, &sample, &request.value) {
                        record.status = WriteStatus::Written;
                        record.result_code = result_code::SUCCESS;
                        record.message = "written and read back".into();
                        return record;
                    }
                    record.message = format!(
                        "read back {} instead of {}",
                        record.after.clone().unwrap_or(Json::Null),
                        request.value
                    );
                    last = WriteStatus::Mismatch;
                }
                Err(error) => {
                    record.message = format!("read-back failed: {error}");
                    last = WriteStatus::Unreachable;
                }
            }
        }
        record.status = last;
        record.result_code = result_code::EXECUTION_FAILED;
        record.message = format!("{} ({} attempts)", record.message, record.attempts);
        record
    }
}

fn blank(request: &WriteRequest) -> WriteRecord {
    WriteRecord {
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

/// The tag's `min`/`max` (engineering units), if set.
fn bound(spec: &TagSpec, key: &str) -> Option<f64> {
    spec.settings
        .iter()
        .find(|s| s.key == key)
        .and_then(|s| match s.value {
            SettingValue::Float(v) => Some(v),
            SettingValue::Int(v) => Some(v as f64),
            _ => None,
        })
}

/// The engineering value as the raw value the device stores: checked against the
/// tag's type and range, scaled back by `factor` and `offset`.
///
/// # Errors
/// A value of the wrong type, out of `min`..`max`, not on the tag's scale, or not
/// fitting its data type.
pub fn to_raw(spec: &TagSpec, value: &Json) -> Result<Value, String> {
    match spec.data_type {
        DataType::Bool => match value {
            Json::Bool(b) => Ok(Value::Bool(*b)),
            Json::Number(n) if n.as_u64() == Some(0) => Ok(Value::Bool(false)),
            Json::Number(n) if n.as_u64() == Some(1) => Ok(Value::Bool(true)),
            other => Err(format!(
                "tag `{}` is BOOL: write true/false or 0/1, not {other}",
                spec.key
            )),
        },
        DataType::String => match value {
            Json::String(text)
                if spec.length == 0 || text.chars().count() <= spec.length as usize =>
            {
                Ok(Value::Text(text.clone()))
            }
            Json::String(_) => Err(format!(
                "tag `{}` holds at most {} characters",
                spec.key, spec.length
            )),
            other => Err(format!(
                "tag `{}` is STRING: write a string, not {other}",
                spec.key
            )),
        },
        data_type => {
            let Some(v) = value.as_f64().filter(|v| v.is_finite()) else {
                return Err(format!(
                    "tag `{}` is {data_type:?}: write a number, not {value}",
                    spec.key
                ));
            };
            if let Some(min) = bound(spec, "min").filter(|min| v < *min) {
                return Err(format!(
                    "{v} is below the minimum {min} of tag `{}`",
                    spec.key
                ));
            }
            if let Some(max) = bound(spec, "max").filter(|max| v > *max) {
                return Err(format!(
                    "{v} is above the maximum {max} of tag `{}`",
                    spec.key
                ));
            }
            if spec.factor == 0.0 {
                return Err(format!(
                    "tag `{}` has factor 0: no raw value gives {v}",
                    spec.key
                ));
            }
            let raw = (v - spec.offset) / spec.factor;
            raw_number(spec, data_type, raw, v)
        }
    }
}

fn raw_number(spec: &TagSpec, data_type: DataType, raw: f64, v: f64) -> Result<Value, String> {
    let (low, high): (f64, f64) = match data_type {
        DataType::Int16 => (i16::MIN.into(), i16::MAX.into()),
        DataType::Uint16 => (0.0, u16::MAX.into()),
        DataType::Int32 => (i32::MIN.into(), i32::MAX.into()),
        DataType::Uint32 => (0.0, u32::MAX.into()),
        DataType::Int64 => (i64::MIN as f64, i64::MAX as f64),
        DataType::Uint64 => (0.0, u64::MAX as f64),
        DataType::Bcd16 => (0.0, 9_999.0),
        DataType::Bcd32 => (0.0, 99_999_999.0),
        DataType::Float32 => {
            let max = f64::from(f32::MAX);
            return if raw.abs() <= max {
                Ok(Value::Float(raw))
            } else {
                Err(format!("{v} does not fit tag `{}` (FLOAT32)", spec.key))
            };
        }
        DataType::Float64 | DataType::Bool | DataType::String => return Ok(Value::Float(raw)),
    };
    let whole = raw.round();
    if (raw - whole).abs() > 1e-6 * raw.abs().max(1.0) {
        return Err(format!(
            "{v} is not on the scale of tag `{}` (factor {}, offset {}): the nearest values are {} and {}",
            spec.key,
            spec.factor,
            spec.offset,
            raw.floor() * spec.factor + spec.offset,
            raw.ceil() * spec.factor + spec.offset
        ));
    }
    if whole < low || whole > high {
        return Err(format!(
            "{v} does not fit tag `{}`: its raw value {whole} is outside {low}..{high} ({data_type:?})",
            spec.key
        ));
    }
    Ok(if low < 0.0 {
        Value::Int(whole as i64)
    } else {
        Value::Uint(whole as u64)
    })
}

fn value_json(value: &Value) -> Json {
    match value {
        Value::Bool(b) => json!(b),
        Value::Int(v) => json!(v),
        Value::Uint(v) => json!(v),
        Value::Float(v) => json!(v),
        Value::Text(t) => json!(t),
        Value::None | Value::Raw(_) => Json::Null,
    }
}

fn sample_json(sample: &Sample) -> Option<Json> {
    (sample.quality != Quality::Bad).then(|| value_json(&sample.value))
}

/// The value read back equals the one asked for, within the tag's resolution.
fn same(spec: &TagSpec, sample: &Sample, wanted: &Json) -> bool {
    if sample.quality == Quality::Bad {
        return false;
    }
    match (&sample.value, wanted) {
        (Value::Bool(got), Json::Bool(want)) => got == want,
        (Value::Bool(got), Json::Number(n)) => n.as_u64() == Some(u64::from(*got)),
        (Value::Text(got), Json::String(want)) => got.trim_end_matches('\0') == want,
        (value, want) => {
            let got = match value {
                Value::Int(v) => *v as f64,
                Value::Uint(v) => *v as f64,
                Value::Float(v) => *v,
                _ => return false,
            };
            let Some(want) = want.as_f64() else {
                return false;
            };
            let step = match spec.data_type {
                DataType::Float32 => want.abs() * 1e-6,
                DataType::Float64 => want.abs() * 1e-12,
                _ => spec.factor.abs() / 2.0,
            };
            (got - want).abs() <= step.max(1e-9)
        }
    }
}
