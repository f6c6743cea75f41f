//! Metrics as the engine writes them: an alias per tag, a datatype from the tag's
//! type and scaling, values coerced to that datatype, and the quality as a
//! `Quality` property when it is not GOOD.

use super::proto::{Metric, MetricValue, PropertySet, PropertyValue, PropertyValueKind};
use crate::model::{DataType, Quality, Sample, TagSpec, Value};

/// The Sparkplug datatypes the engine publishes, with their codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    Int8 = 1,
    Int16 = 2,
    Int32 = 3,
    Int64 = 4,
    UInt8 = 5,
    UInt16 = 6,
    UInt32 = 7,
    UInt64 = 8,
    Float = 9,
    Double = 10,
    Boolean = 11,
    String = 12,
}

impl MetricType {
    /// The datatype a tag's values are published as: the tag's own type
    /// (`INT16` as Int32 with `int16_as_int32`), or Double when its factor and
    /// offset scale it (the `scale` stage makes a float of any scaled number).
    pub fn of(tag: &TagSpec, int16_as_int32: bool) -> Self {
        let identity = tag.factor == 1.0 && tag.offset == 0.0;
        if !identity && tag.data_type != DataType::Bool && tag.data_type != DataType::String {
            return Self::Double;
        }
        match tag.data_type {
            DataType::Bool => Self::Boolean,
            DataType::Int16 if int16_as_int32 => Self::Int32,
            DataType::Int16 => Self::Int16,
            DataType::Uint16 | DataType::Bcd16 => Self::UInt16,
            DataType::Int32 => Self::Int32,
            DataType::Uint32 | DataType::Bcd32 => Self::UInt32,
            DataType::Int64 => Self::Int64,
            DataType::Uint64 => Self::UInt64,
            DataType::Float32 => Self::Float,
            DataType::Float64 => Self::Double,
            DataType::String => Self::String,
        }
    }

    /// The datatype of a code; `None` for the types the engine does not take.
    pub fn from_code(code: u32) -> Option<Self> {
        const ALL: [MetricType; 12] = [
            MetricType::Int8,
            MetricType::Int16,
            MetricType::Int32,
            MetricType::Int64,
            MetricType::UInt8,
            MetricType::UInt16,
            MetricType::UInt32,
            MetricType::UInt64,
            MetricType::Float,
            MetricType::Double,
            MetricType::Boolean,
            MetricType::String,
        ];
        ALL.into_iter().find(|t| t.code() == code)
    }

    pub fn code(self) -> u32 {
        self as u32
    }

    /// `value` in this datatype's field; `None` when it has no value of that kind
    /// (not read, undecoded bytes, text for a number).
    pub fn encode(self, value: &Value) -> Option<MetricValue> {
        let integer = match value {
            Value::Bool(b) => Some(i128::from(*b)),
            Value::Int(v) => Some(i128::from(*v)),
            Value::Uint(v) => Some(i128::from(*v)),
            // Saturates; NaN gives 0, but a float tag is Float or Double anyway.
            Value::Float(v) => Some(*v as i128),
            Value::None | Value::Raw(_) | Value::Text(_) | Value::Array(_) => None,
        };
        let float = match value {
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            Value::Int(v) => Some(*v as f64),
            Value::Uint(v) => Some(*v as f64),
            Value::Float(v) => Some(*v),
            Value::None | Value::Raw(_) | Value::Text(_) | Value::Array(_) => None,
        };
        // Wrapping casts below are the protobuf encodings: signed types are
        // written in two's complement in their unsigned field.
        Some(match self {
            Self::Boolean => MetricValue::Boolean(match value {
                Value::Bool(b) => *b,
                _ => integer? != 0,
            }),
            Self::Int8 | Self::Int16 | Self::Int32 => MetricValue::Int(integer? as i32 as u32),
            Self::UInt8 | Self::UInt16 => MetricValue::Int(integer? as u32),
            Self::Int64 | Self::UInt32 | Self::UInt64 => MetricValue::Long(integer? as u64),
            Self::Float => MetricValue::Float(float? as f32),
            Self::Double => MetricValue::Double(float?),
            Self::String => match value {
                Value::Text(text) => MetricValue::String(text.clone()),
                _ => return None,
            },
        })
    }
}

/// A metric's alias: a hash of the device and the tag key, the same on every
/// start and reload, so a record written to the WAL before a restart still
/// names its metric (SPB-2 of `docs/sparkplug.md`). 53 bits, so that a
/// JavaScript number holds it exactly.
pub fn alias(device_id: &str, key: &str) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let bytes = device_id.bytes().chain([0xff]).chain(key.bytes());
    let hash = bytes.fold(OFFSET, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(PRIME)
    });
    hash & ((1 << 53) - 1)
}

/// The alias and datatype of each of a device's tags, by tag index.
#[derive(Debug, Clone)]
pub struct MetricTable(Vec<(u64, MetricType)>);

impl MetricTable {
    /// The table of `device_id`'s `tags` (`int16_as_int32`: see
    /// [`MetricType::of`]).
    pub fn new(device_id: &str, tags: &[TagSpec], int16_as_int32: bool) -> Self {
        Self(
            tags.iter()
                .map(|tag| {
                    let datatype = MetricType::of(tag, int16_as_int32);
                    (alias(device_id, &tag.key), datatype)
                })
                .collect(),
        )
    }

    /// The alias and datatype of the tag of index `tag`.
    pub(super) fn get(&self, tag: usize) -> Option<(u64, MetricType)> {
        self.0.get(tag).copied()
    }

    /// The data metric of `sample` (alias only, no name), if its tag is known.
    pub(super) fn data(&self, sample: &Sample) -> Option<Metric> {
        let (alias, datatype) = *self.0.get(usize::try_from(sample.tag).ok()?)?;
        Some(metric(alias, datatype, sample, None))
    }
}

/// The metric of `sample`: BAD carries no value; a quality other than GOOD is
/// the `Quality` property (OPC codes: 0 bad, 64 uncertain).
pub(super) fn metric(
    alias: u64,
    datatype: MetricType,
    sample: &Sample,
    name: Option<&str>,
) -> Metric {
    let value = match sample.quality {
        Quality::Bad => None,
        Quality::Good | Quality::Uncertain => datatype.encode(&sample.value),
    };
    let quality = match sample.quality {
        Quality::Good => None,
        Quality::Uncertain => Some(64),
        Quality::Bad => Some(0),
    };
    Metric {
        name: name.map(str::to_owned),
        alias: Some(alias),
        timestamp: u64::try_from(sample.ts_ms).ok().filter(|ts| *ts > 0),
        datatype: Some(datatype.code()),
        is_historical: None,
        is_null: value.is_none().then_some(true),
        properties: quality.map(|code| PropertySet {
            keys: vec![QUALITY.to_owned()],
            values: vec![PropertyValue {
                r#type: Some(MetricType::Int32.code()),
                is_null: None,
                value: Some(PropertyValueKind::Int(code)),
            }],
        }),
        value,
    }
}

/// The property a metric's quality is in.
pub const QUALITY: &str = "Quality";
