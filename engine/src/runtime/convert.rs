//! Moves data between the engine's types and the generated WIT types, which never
//! leave the runtime (ARCH-1). Batches cross as columns of primitives (one copy
//! each), built from and into the engine's rows.

use std::sync::Arc;

use super::bindings::wit;
use crate::model::{
    Access, Batch, ByteOrder, ConfigIssue, DataType, Quality, Sample, Setting, SettingValue,
    TagSpec, Value,
};

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
        element_kinds: Vec::new(),
        element_bits: Vec::new(),
    };
    for sample in samples {
        // The columns are the model's compact form; a text's bits index
        // `texts`, an array's span the element columns.
        let (kind, mut bits) = sample.value.to_bits();
        match &sample.value {
            Value::Text(text) => {
                bits = batch.texts.len() as u64;
                batch.texts.push(text.clone());
            }
            Value::Array(elements) => {
                let start = batch.element_kinds.len() as u64;
                for element in elements {
                    let (kind, bits) = element.to_bits();
                    batch.element_kinds.push(kind);
                    batch.element_bits.push(bits);
                }
                bits = (start << 32) | elements.len() as u64;
            }
            _ => {}
        }
        batch.tags.push(sample.tag);
        batch.qualities.push(sample.quality.code());
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
    let elements = (batch.element_kinds, batch.element_bits);
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        let (kind, bits) = (batch.kinds[i], batch.bits[i]);
        // Scalars (nearly every sample) come straight from their bits.
        let value = match kind {
            Value::TEXT_KIND => {
                let text = texts.get_mut(bits as usize).and_then(Option::take);
                Value::Text(text.ok_or_else(|| {
                    MalformedBatch(format!(
                        "sample {i} names text {bits}, which is missing or already used"
                    ))
                })?)
            }
            Value::ARRAY_KIND => array_from_wit(&elements, i, bits)?,
            _ => Value::from_bits(kind, bits, None).ok_or_else(|| {
                MalformedBatch(format!("sample {i} has value kind {kind}, not 0 to 7"))
            })?,
        };
        let quality = Quality::from_code(batch.qualities[i]).ok_or_else(|| {
            MalformedBatch(format!(
                "sample {i} has quality {}, not 0 to 2",
                batch.qualities[i]
            ))
        })?;
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

/// The array of sample `i`, whose `bits` give its span of the element columns.
fn array_from_wit(
    (element_kinds, element_bits): &(Vec<u8>, Vec<u64>),
    i: usize,
    bits: u64,
) -> Result<Value, MalformedBatch> {
    let (start, len) = ((bits >> 32) as usize, (bits & u64::from(u32::MAX)) as usize);
    let outside = || {
        MalformedBatch(format!(
            "sample {i} names elements {start}..{} of {}",
            start + len,
            element_kinds.len().min(element_bits.len())
        ))
    };
    let end = start.checked_add(len).ok_or_else(outside)?;
    let kinds = element_kinds.get(start..end).ok_or_else(outside)?;
    let bits = element_bits.get(start..end).ok_or_else(outside)?;
    let elements = kinds.iter().zip(bits).map(|(&kind, &bits)| match kind {
        2..=5 => Value::from_bits(kind, bits, None).ok_or(kind),
        _ => Err(kind),
    });
    let elements: Result<Vec<Value>, u8> = elements.collect();
    let elements = elements.map_err(|kind| {
        MalformedBatch(format!(
            "sample {i} has an array element of kind {kind}, not 2 to 5"
        ))
    })?;
    Ok(Value::Array(elements.into()))
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
        Value::Array(elements) => wit::Value::Array(
            elements
                .into_iter()
                .filter_map(|element| match element {
                    Value::Bool(v) => Some(wit::Element::Boolean(v)),
                    Value::Int(v) => Some(wit::Element::Int(v)),
                    Value::Uint(v) => Some(wit::Element::Uint(v)),
                    Value::Float(v) => Some(wit::Element::Float(v)),
                    // Not an element: the model's arrays never hold one.
                    _ => None,
                })
                .collect(),
        ),
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
                ByteOrder::Ghefcdab => wit::ByteOrder::Ghefcdab,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Span;

    fn sample(tag: u32, value: Value, quality: Quality) -> Sample {
        Sample {
            tag,
            value,
            quality,
            ts_ms: 1_700_000_000_000 + i64::from(tag),
        }
    }

    #[test]
    fn a_batch_crosses_as_columns_and_comes_back_the_same() {
        let samples = vec![
            sample(0, Value::None, Quality::Bad),
            sample(1, Value::Raw(Span { start: 2, len: 4 }), Quality::Good),
            sample(2, Value::Bool(true), Quality::Good),
            sample(3, Value::Int(-7), Quality::Uncertain),
            sample(4, Value::Uint(u64::MAX), Quality::Good),
            sample(5, Value::Float(2.5), Quality::Good),
            sample(6, Value::Text("a".into()), Quality::Good),
            sample(7, Value::Text("b".into()), Quality::Uncertain),
            sample(
                8,
                Value::Array(Box::new([Value::Int(1), Value::Float(0.5)])),
                Quality::Good,
            ),
            sample(
                9,
                Value::Array(Box::new([Value::Bool(true)])),
                Quality::Good,
            ),
        ];
        let batch = Batch {
            samples: samples.clone(),
            bytes: vec![0, 0, 1, 2, 3, 4],
        };
        let columns = batch_to_wit(batch.clone());
        assert_eq!(columns.texts, ["a", "b"]);
        assert_eq!(columns.bits[7], 1, "a text's bits index the texts");
        assert_eq!(
            columns.bits[9],
            2 << 32 | 1,
            "an array's bits span its elements"
        );
        assert_eq!(columns.element_kinds, [3, 5, 2]);
        let back = batch_from_wit(columns).expect("well formed");
        assert_eq!(back, batch);
    }

    #[test]
    fn columns_that_do_not_fit_together_are_refused_by_name() {
        let good = || samples_to_wit(&[sample(0, Value::Text("t".into()), Quality::Good)]);
        let refused = |batch: wit::Batch| batch_from_wit(batch).expect_err("malformed").to_string();
        let mut short = good();
        short.ts_ms.clear();
        assert_eq!(refused(short), "a batch with 1 tags but 0 ts-ms");
        let mut kind = good();
        kind.kinds[0] = 9;
        assert_eq!(refused(kind), "sample 0 has value kind 9, not 0 to 7");
        let mut quality = good();
        quality.qualities[0] = 7;
        assert_eq!(refused(quality), "sample 0 has quality 7, not 0 to 2");
        let mut text = good();
        text.bits[0] = 3;
        assert_eq!(
            refused(text),
            "sample 0 names text 3, which is missing or already used"
        );
        let mut twice = samples_to_wit(&[
            sample(0, Value::Text("t".into()), Quality::Good),
            sample(1, Value::Text("u".into()), Quality::Good),
        ]);
        twice.bits[1] = 0;
        assert_eq!(
            refused(twice),
            "sample 1 names text 0, which is missing or already used"
        );
        let array = || {
            samples_to_wit(&[sample(
                0,
                Value::Array(Box::new([Value::Int(1)])),
                Quality::Good,
            )])
        };
        let mut outside = array();
        outside.bits[0] = 1 << 32 | 1;
        assert_eq!(refused(outside), "sample 0 names elements 1..2 of 1");
        let mut element = array();
        element.element_kinds[0] = 6;
        assert_eq!(
            refused(element),
            "sample 0 has an array element of kind 6, not 2 to 5"
        );
    }
}
