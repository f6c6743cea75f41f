//! Moves data between the engine's types and the generated WIT types. Batches cross
//! as columns of primitives (one copy each), built from and into the engine's rows.

use std::sync::Arc;

use super::bindings::wit;
use crate::model::{
    Access, Batch, ByteOrder, ConfigIssue, DataType, Quality, Sample, Setting, SettingValue, Span,
    TagSpec, Value,
};

/// Codes of the WIT batch's `qualities` column.
const GOOD: u8 = 0;
const UNCERTAIN: u8 = 1;
const BAD: u8 = 2;

/// Codes of its `kinds` column: the cases of the WIT `value` variant, in order.
const NONE: u8 = 0;
const RAW: u8 = 1;
const BOOLEAN: u8 = 2;
const INT: u8 = 3;
const UINT: u8 = 4;
const FLOAT: u8 = 5;
const TEXT: u8 = 6;

/// What a device's resource (codec session, stage processor, rules evaluator) is
/// created from. Kept so the resource can be made again after its instance is
/// rebuilt; the tags are the device's own list, shared, and converted to the WIT
/// types only when the resource is created.
#[derive(Debug)]
pub(super) struct Recipe {
    settings: Vec<Setting>,
    tags: Arc<[TagSpec]>,
}

impl Recipe {
    pub(super) fn new(settings: &[Setting], tags: Arc<[TagSpec]>) -> Self {
        Self {
            settings: settings.to_vec(),
            tags,
        }
    }

    /// The settings and tags as the component's constructor takes them.
    pub(super) fn to_wit(&self) -> (Vec<wit::Setting>, Vec<wit::TagSpec>) {
        (settings_to_wit(&self.settings), tags_to_wit(&self.tags))
    }
}

/// A batch a component returned whose columns do not fit together.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct MalformedBatch(String);

pub(super) fn batch_to_wit(batch: Batch) -> wit::Batch {
    let mut columns = samples_to_wit(&batch.samples);
    columns.bytes = batch.bytes;
    columns
}

/// The columns of `samples`, with no raw bytes.
pub(super) fn samples_to_wit<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> wit::Batch {
    let samples = samples.into_iter();
    let n = samples.size_hint().0;
    let mut batch = wit::Batch {
        tags: Vec::with_capacity(n),
        qualities: Vec::with_capacity(n),
        kinds: Vec::with_capacity(n),
        bits: Vec::with_capacity(n),
        ts_ms: Vec::with_capacity(n),
        bytes: Vec::new(),
        texts: Vec::new(),
    };
    for sample in samples {
        let (kind, bits) = match &sample.value {
            Value::None => (NONE, 0),
            Value::Raw(span) => (RAW, (u64::from(span.start) << 32) | u64::from(span.len)),
            Value::Bool(v) => (BOOLEAN, u64::from(*v)),
            Value::Int(v) => (INT, *v as u64),
            Value::Uint(v) => (UINT, *v),
            Value::Float(v) => (FLOAT, v.to_bits()),
            Value::Text(text) => {
                batch.texts.push(text.clone());
                (TEXT, batch.texts.len() as u64 - 1)
            }
        };
        batch.tags.push(sample.tag);
        batch.qualities.push(match sample.quality {
            Quality::Good => GOOD,
            Quality::Uncertain => UNCERTAIN,
            Quality::Bad => BAD,
        });
        batch.kinds.push(kind);
        batch.bits.push(bits);
        batch.ts_ms.push(sample.ts_ms);
    }
    batch
}

/// The samples of a batch a component returned.
///
/// # Errors
/// Columns of different lengths, or a quality, kind or text index that does not exist.
pub(super) fn batch_from_wit(batch: wit::Batch) -> Result<Batch, MalformedBatch> {
    let n = batch.tags.len();
    let lengths = [
        ("qualities", batch.qualities.len()),
        ("kinds", batch.kinds.len()),
        ("bits", batch.bits.len()),
        ("ts-ms", batch.ts_ms.len()),
    ];
    if let Some((column, len)) = lengths.iter().find(|(_, len)| *len != n) {
        return Err(MalformedBatch(format!(
            "a batch with {n} tags but {len} {column}"
        )));
    }
    let mut texts: Vec<Option<String>> = batch.texts.into_iter().map(Some).collect();
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        let bits = batch.bits[i];
        let value = match batch.kinds[i] {
            NONE => Value::None,
            RAW => Value::Raw(Span {
                start: (bits >> 32) as u32,
                len: bits as u32,
            }),
            BOOLEAN => Value::Bool(bits != 0),
            INT => Value::Int(bits as i64),
            UINT => Value::Uint(bits),
            FLOAT => Value::Float(f64::from_bits(bits)),
            TEXT => match texts.get_mut(bits as usize).and_then(Option::take) {
                Some(text) => Value::Text(text),
                None => {
                    return Err(MalformedBatch(format!(
                        "sample {i} names text {bits}, which is missing or already used"
                    )));
                }
            },
            other => {
                return Err(MalformedBatch(format!(
                    "sample {i} has value kind {other}, not 0 to 6"
                )));
            }
        };
        let quality = match batch.qualities[i] {
            GOOD => Quality::Good,
            UNCERTAIN => Quality::Uncertain,
            BAD => Quality::Bad,
            other => {
                return Err(MalformedBatch(format!(
                    "sample {i} has quality {other}, not 0 to 2"
                )));
            }
        };
        samples.push(Sample {
            tag: batch.tags[i],
            value,
            quality,
            ts_ms: batch.ts_ms[i],
        });
    }
    Ok(Batch {
        samples,
        bytes: batch.bytes,
    })
}

pub(super) fn value_to_wit(value: Value) -> wit::Value {
    match value {
        Value::None => wit::Value::None,
        Value::Raw(span) => wit::Value::Raw(wit::Span {
            start: span.start,
            len: span.len,
        }),
        Value::Bool(v) => wit::Value::Boolean(v),
        Value::Int(v) => wit::Value::Int(v),
        Value::Uint(v) => wit::Value::Uint(v),
        Value::Float(v) => wit::Value::Float(v),
        Value::Text(v) => wit::Value::Text(v),
    }
}

pub(super) fn settings_to_wit(settings: &[Setting]) -> Vec<wit::Setting> {
    settings
        .iter()
        .map(|setting| wit::Setting {
            key: setting.key.clone(),
            value: match &setting.value {
                SettingValue::Bool(v) => wit::SettingValue::Boolean(*v),
                SettingValue::Int(v) => wit::SettingValue::Int(*v),
                SettingValue::Float(v) => wit::SettingValue::Float(*v),
                SettingValue::Text(v) => wit::SettingValue::Text(v.clone()),
            },
        })
        .collect()
}

fn tags_to_wit(tags: &[TagSpec]) -> Vec<wit::TagSpec> {
    tags.iter()
        .map(|tag| wit::TagSpec {
            key: tag.key.to_string(),
            address: tag.address.to_string(),
            data_type: match tag.data_type {
                DataType::Bool => wit::DataType::Bool,
                DataType::Int16 => wit::DataType::Int16,
                DataType::Uint16 => wit::DataType::Uint16,
                DataType::Int32 => wit::DataType::Int32,
                DataType::Uint32 => wit::DataType::Uint32,
                DataType::Int64 => wit::DataType::Int64,
                DataType::Uint64 => wit::DataType::Uint64,
                DataType::Float32 => wit::DataType::Float32,
                DataType::Float64 => wit::DataType::Float64,
                DataType::Bcd16 => wit::DataType::Bcd16,
                DataType::Bcd32 => wit::DataType::Bcd32,
                DataType::String => wit::DataType::String,
            },
            length: tag.length,
            byte_order: match tag.byte_order {
                ByteOrder::Abcd => wit::ByteOrder::Abcd,
                ByteOrder::Badc => wit::ByteOrder::Badc,
                ByteOrder::Cdab => wit::ByteOrder::Cdab,
                ByteOrder::Dcba => wit::ByteOrder::Dcba,
            },
            factor: tag.factor,
            offset: tag.offset,
            deadband: tag.deadband,
            access: match tag.access {
                Access::Read => wit::Access::Read,
                Access::Write => wit::Access::Write,
                Access::ReadWrite => wit::Access::ReadWrite,
            },
            settings: settings_to_wit(&tag.settings),
        })
        .collect()
}

pub(super) fn issues_from_wit(errors: Vec<wit::ConfigError>) -> Vec<ConfigIssue> {
    errors
        .into_iter()
        .map(|error| ConfigIssue {
            tag: error.tag,
            key: error.key,
            message: error.message,
        })
        .collect()
}
