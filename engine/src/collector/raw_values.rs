//! `rawValue` (seed 003's `TagValue`): with `collector.rawValue`, each reported
//! value goes out beside the value as the device holds it, decoded by the tag's
//! type and byte order before the pipeline's stages scale, clamp or drop it.
//! The decoding is the built-in `swap_bytes` and `decode` stages' own code.

use sluice_guest::numeric::{self, Number};

use crate::model::{Batch, ByteOrder, DataType, Quality, RawValues, TagSpec, Value};

/// The raw values of the samples of `batch` (a round before its pipeline),
/// for the device's `tags`.
pub fn raw_values(batch: &Batch, tags: &[TagSpec]) -> RawValues {
    let mut raw = vec![None; tags.len()];
    for sample in &batch.samples {
        let (Some(slot), Some(tag)) = (
            raw.get_mut(sample.tag as usize),
            tags.get(sample.tag as usize),
        ) else {
            continue;
        };
        if sample.quality == Quality::Bad {
            continue;
        }
        *slot = match &sample.value {
            Value::Raw(span) => {
                let start = span.start as usize;
                let bytes = batch.bytes.get(start..start + span.len as usize);
                bytes.and_then(|bytes| decoded(tag, bytes))
            }
            Value::None => None,
            typed => Some(typed.clone()),
        };
    }
    RawValues(raw)
}

/// `bytes` of `tag` as the `decode` stage reads them after `swap_bytes`.
fn decoded(tag: &TagSpec, bytes: &[u8]) -> Option<Value> {
    let data_type = match tag.data_type {
        DataType::Bool => numeric::DataType::Bool,
        DataType::Int16 => numeric::DataType::Int16,
        DataType::Uint16 => numeric::DataType::Uint16,
        DataType::Int32 => numeric::DataType::Int32,
        DataType::Uint32 => numeric::DataType::Uint32,
        DataType::Int64 => numeric::DataType::Int64,
        DataType::Uint64 => numeric::DataType::Uint64,
        DataType::Float32 => numeric::DataType::Float32,
        DataType::Float64 => numeric::DataType::Float64,
        DataType::Bcd16 => numeric::DataType::Bcd16,
        DataType::Bcd32 => numeric::DataType::Bcd32,
        DataType::String => numeric::DataType::String(tag.length),
    };
    let order = match tag.byte_order {
        ByteOrder::Abcd => numeric::ByteOrder::Abcd,
        ByteOrder::Badc => numeric::ByteOrder::Badc,
        ByteOrder::Cdab => numeric::ByteOrder::Cdab,
        ByteOrder::Dcba => numeric::ByteOrder::Dcba,
        ByteOrder::Ghefcdab => numeric::ByteOrder::Ghefcdab,
    };
    match numeric::array_len(data_type, tag.length) {
        Some(count) => {
            let numbers = numeric::decode_wire_each(data_type, order, bytes, count).ok()?;
            Some(Value::Array(numbers.into_iter().map(value_of).collect()))
        }
        None => Some(value_of(
            numeric::decode_wire(data_type, order, bytes).ok()?,
        )),
    }
}

fn value_of(number: Number) -> Value {
    match number {
        Number::Bool(b) => Value::Bool(b),
        Number::Int(v) => Value::Int(v),
        Number::Uint(v) => Value::Uint(v),
        Number::Float(v) => Value::Float(v),
        Number::Text(v) => Value::Text(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Access, Sample, Span};

    fn tag(data_type: DataType, byte_order: ByteOrder, length: u32) -> TagSpec {
        TagSpec {
            key: "t".into(),
            address: "40001".into(),
            data_type,
            length,
            byte_order,
            factor: 0.1,
            offset: 5.0,
            deadband: 0.0,
            access: Access::Read,
            settings: Vec::new(),
        }
    }

    fn sample(tag: u32, value: Value, quality: Quality) -> Sample {
        Sample {
            tag,
            value,
            quality,
            ts_ms: 1,
        }
    }

    #[test]
    fn raw_bytes_are_decoded_by_type_and_order_and_typed_values_kept() {
        let tags = [
            tag(DataType::Int16, ByteOrder::Abcd, 0),
            tag(DataType::Float32, ByteOrder::Cdab, 0),
            tag(DataType::Bool, ByteOrder::Abcd, 0),
            tag(DataType::String, ByteOrder::Abcd, 3),
            tag(DataType::Uint16, ByteOrder::Abcd, 0),
            tag(DataType::Bcd16, ByteOrder::Abcd, 0),
        ];
        let mut bytes = (-1000i16).to_be_bytes().to_vec();
        let float = 12.5f32.to_be_bytes();
        bytes.extend_from_slice(&[float[2], float[3], float[0], float[1]]);
        bytes.extend_from_slice(b"AB\0\0");
        bytes.extend_from_slice(&[0x12, 0x3A]);
        let span = |start, len| Value::Raw(Span { start, len });
        let batch = Batch {
            samples: vec![
                sample(0, span(0, 2), Quality::Good),
                sample(1, span(2, 4), Quality::Good),
                sample(2, Value::Bool(true), Quality::Good),
                sample(3, span(6, 4), Quality::Good),
                sample(4, Value::None, Quality::Bad),
                sample(5, span(10, 2), Quality::Good),
                sample(9, span(0, 2), Quality::Good),
            ],
            bytes,
        };
        let raw = raw_values(&batch, &tags);
        assert_eq!(
            raw.get(0),
            Some(&Value::Int(-1000)),
            "before factor and offset"
        );
        assert_eq!(raw.get(1), Some(&Value::Float(12.5)));
        assert_eq!(raw.get(2), Some(&Value::Bool(true)));
        assert_eq!(raw.get(3), Some(&Value::Text("AB".into())));
        assert_eq!(raw.get(4), None, "a BAD sample has none");
        assert_eq!(raw.get(5), None, "an invalid BCD digit does not decode");
        assert_eq!(raw.get(9), None);
    }

    #[test]
    fn an_array_is_decoded_element_by_element() {
        let tags = [tag(DataType::Int16, ByteOrder::Badc, 3)];
        let batch = Batch {
            samples: vec![sample(
                0,
                Value::Raw(Span { start: 0, len: 6 }),
                Quality::Good,
            )],
            bytes: vec![0x01, 0x00, 0xFF, 0xFF, 0x18, 0xFC],
        };
        let raw = raw_values(&batch, &tags);
        let expected = Value::Array(Box::new([Value::Int(1), Value::Int(-1), Value::Int(-1000)]));
        assert_eq!(raw.get(0), Some(&expected));
    }
}
