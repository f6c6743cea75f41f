//! Moves data between the engine's types and the generated WIT types. Batches move
//! by value so the per-sample path copies nothing it does not have to.

use super::bindings::wit;
use crate::model::{
    Access, Batch, ByteOrder, ConfigIssue, DataType, Quality, Sample, Setting, SettingValue, Span,
    TagSpec, Value,
};

pub(super) fn batch_to_wit(batch: Batch) -> wit::Batch {
    wit::Batch {
        samples: batch.samples.into_iter().map(sample_to_wit).collect(),
        bytes: batch.bytes,
    }
}

pub(super) fn batch_from_wit(batch: wit::Batch) -> Batch {
    Batch {
        samples: batch.samples.into_iter().map(sample_from_wit).collect(),
        bytes: batch.bytes,
    }
}

pub(super) fn sample_to_wit(sample: Sample) -> wit::Sample {
    wit::Sample {
        tag: sample.tag,
        value: value_to_wit(sample.value),
        quality: match sample.quality {
            Quality::Good => wit::Quality::Good,
            Quality::Uncertain => wit::Quality::Uncertain,
            Quality::Bad => wit::Quality::Bad,
        },
        ts_ms: sample.ts_ms,
    }
}

fn sample_from_wit(sample: wit::Sample) -> Sample {
    Sample {
        tag: sample.tag,
        value: value_from_wit(sample.value),
        quality: match sample.quality {
            wit::Quality::Good => Quality::Good,
            wit::Quality::Uncertain => Quality::Uncertain,
            wit::Quality::Bad => Quality::Bad,
        },
        ts_ms: sample.ts_ms,
    }
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

fn value_from_wit(value: wit::Value) -> Value {
    match value {
        wit::Value::None => Value::None,
        wit::Value::Raw(span) => Value::Raw(Span {
            start: span.start,
            len: span.len,
        }),
        wit::Value::Boolean(v) => Value::Bool(v),
        wit::Value::Int(v) => Value::Int(v),
        wit::Value::Uint(v) => Value::Uint(v),
        wit::Value::Float(v) => Value::Float(v),
        wit::Value::Text(v) => Value::Text(v),
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

pub(super) fn tags_to_wit(tags: &[TagSpec]) -> Vec<wit::TagSpec> {
    tags.iter()
        .map(|tag| wit::TagSpec {
            key: tag.key.clone(),
            address: tag.address.clone(),
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
