//! The data that flows between the engine and its components, in the engine's own
//! types. The runtime converts these to and from the WIT types at the boundary.

use std::fmt;

/// How far a sample can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Quality {
    Good,
    Uncertain,
    Bad,
}

impl Quality {
    pub fn as_str(self) -> &'static str {
        match self {
            Quality::Good => "GOOD",
            Quality::Uncertain => "UNCERTAIN",
            Quality::Bad => "BAD",
        }
    }
}

/// A byte range inside the `bytes` buffer of a [`Batch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: u32,
    pub len: u32,
}

/// A value on its way from the device to the uplink.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// No value: not read, or not decodable.
    None,
    /// Device bytes not yet decoded.
    Raw(Span),
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Text(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Index of the tag in the device's tag list.
    pub tag: u32,
    pub value: Value,
    pub quality: Quality,
    /// When the response carrying the sample arrived, ms since the Unix epoch.
    pub ts_ms: i64,
}

/// One device's samples of one round, and the raw bytes their spans point into.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    pub samples: Vec<Sample>,
    pub bytes: Vec<u8>,
}

impl Batch {
    /// Moves `other`'s samples into this batch, renumbering their tags with
    /// `tag_of` and moving their raw bytes (spans follow).
    pub fn append(&mut self, other: Batch, tag_of: impl Fn(u32) -> u32) {
        let base = u32::try_from(self.bytes.len()).unwrap_or(u32::MAX);
        self.bytes.extend_from_slice(&other.bytes);
        self.samples
            .extend(other.samples.into_iter().map(|mut sample| {
                sample.tag = tag_of(sample.tag);
                if let Value::Raw(span) = &mut sample.value {
                    span.start = span.start.saturating_add(base);
                }
                sample
            }));
    }

    /// Adds a BAD sample (no value) for `tag`.
    pub fn push_bad(&mut self, tag: u32, ts_ms: i64) {
        self.samples.push(Sample {
            tag,
            value: Value::None,
            quality: Quality::Bad,
            ts_ms,
        });
    }

    /// The bytes a raw value points at, if the span is inside the buffer.
    pub fn raw(&self, span: Span) -> Option<&[u8]> {
        let start = span.start as usize;
        self.bytes.get(start..start.checked_add(span.len as usize)?)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    Bool,
    Int16,
    Uint16,
    Int32,
    Uint32,
    Int64,
    Uint64,
    Float32,
    Float64,
    Bcd16,
    Bcd32,
    String,
}

impl DataType {
    /// Names as the config writes them.
    pub const NAMES: &'static [(&'static str, DataType)] = &[
        ("BOOL", DataType::Bool),
        ("INT16", DataType::Int16),
        ("UINT16", DataType::Uint16),
        ("INT32", DataType::Int32),
        ("UINT32", DataType::Uint32),
        ("INT64", DataType::Int64),
        ("UINT64", DataType::Uint64),
        ("FLOAT32", DataType::Float32),
        ("FLOAT64", DataType::Float64),
        ("BCD16", DataType::Bcd16),
        ("BCD32", DataType::Bcd32),
        ("STRING", DataType::String),
    ];
}

/// Byte order of a multi-register value: the order in which the bytes of the
/// big-endian value `A B C D` appear on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ByteOrder {
    #[default]
    Abcd,
    Badc,
    Cdab,
    Dcba,
}

impl ByteOrder {
    pub const NAMES: &'static [(&'static str, ByteOrder)] = &[
        ("ABCD", ByteOrder::Abcd),
        ("BADC", ByteOrder::Badc),
        ("CDAB", ByteOrder::Cdab),
        ("DCBA", ByteOrder::Dcba),
    ];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

impl Access {
    pub const NAMES: &'static [(&'static str, Access)] = &[
        ("R", Access::Read),
        ("W", Access::Write),
        ("RW", Access::ReadWrite),
    ];
}

/// One scalar setting handed to a component.
#[derive(Debug, Clone, PartialEq)]
pub enum SettingValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
}

impl fmt::Display for SettingValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettingValue::Bool(v) => write!(f, "{v}"),
            SettingValue::Int(v) => write!(f, "{v}"),
            SettingValue::Float(v) => write!(f, "{v}"),
            SettingValue::Text(v) => write!(f, "{v}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    pub key: String,
    pub value: SettingValue,
}

/// A tag as components see it.
#[derive(Debug, Clone, PartialEq)]
pub struct TagSpec {
    pub key: String,
    pub address: String,
    pub data_type: DataType,
    /// Characters of a STRING tag; 0 otherwise.
    pub length: u32,
    pub byte_order: ByteOrder,
    pub factor: f64,
    pub offset: f64,
    pub deadband: f64,
    pub access: Access,
    pub settings: Vec<Setting>,
}

/// A configuration mistake a component reported.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigIssue {
    /// The tag it is about, if any.
    pub tag: Option<u32>,
    /// The setting or tag field it is about; empty for the whole configuration.
    pub key: String,
    pub message: String,
}

/// One read request of a round, as a codec planned it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedRead {
    pub id: u32,
    /// The tags it reads (indexes into the device's tags).
    pub tags: Vec<u32>,
}

/// Why a codec could not use a frame.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FrameError {
    /// Not a valid answer: the stream can no longer be trusted; reconnect.
    #[error("malformed frame: {0}")]
    Malformed(String),
    /// The device answered with an exception or end code; the connection is fine.
    #[error("device error {code}: {message}")]
    Device {
        code: u32,
        message: String,
        /// Smaller requests to try instead, when splitting may isolate the bad tags.
        retry: Vec<PlannedRead>,
    },
}
