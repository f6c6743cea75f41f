//! Tags and settings as components see them: data types, byte orders, access.

use compact_str::CompactString;
use std::fmt;

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
/// big-endian value `A B C D` appear on the wire (64-bit values: per 32-bit
/// half, `CDAB` swapping the halves as seed 003's decoder does; `GHEFCDAB`
/// reverses the four registers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ByteOrder {
    #[default]
    Abcd,
    Badc,
    Cdab,
    Dcba,
    Ghefcdab,
}

impl ByteOrder {
    /// Whether a value of `data_type` in this order read differently in
    /// engines before the seed's 64-bit rule: `CDAB` reversed the four
    /// registers of a 64-bit value, as `GHEFCDAB` does now.
    pub fn changed_for(self, data_type: DataType) -> bool {
        self == ByteOrder::Cdab
            && matches!(
                data_type,
                DataType::Int64 | DataType::Uint64 | DataType::Float64
            )
    }
}

impl ByteOrder {
    pub const NAMES: &'static [(&'static str, ByteOrder)] = &[
        ("ABCD", ByteOrder::Abcd),
        ("BADC", ByteOrder::Badc),
        ("CDAB", ByteOrder::Cdab),
        ("DCBA", ByteOrder::Dcba),
        ("GHEFCDAB", ByteOrder::Ghefcdab),
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
    /// Inline up to 24 bytes (keys and addresses nearly always are): a large fleet
    /// keeps two of these a tag, in its configuration and in the running device.
    pub key: CompactString,
    pub address: CompactString,
    pub data_type: DataType,
    /// Characters of a STRING tag; for another type, the elements of an array
    /// tag (2 or more), or 0 for a tag of one value.
    pub length: u32,
    pub byte_order: ByteOrder,
    pub factor: f64,
    pub offset: f64,
    pub deadband: f64,
    pub access: Access,
    pub settings: Vec<Setting>,
}

impl super::ListKey for TagSpec {
    fn key(&self, hasher: &mut impl std::hash::Hasher) {
        hasher.write(self.key.as_bytes());
        hasher.write(self.address.as_bytes());
    }
}

impl TagSpec {
    /// The elements of an array tag; `None` for a tag of one value.
    pub fn array_len(&self) -> Option<u32> {
        (self.data_type != DataType::String && self.length >= 2).then_some(self.length)
    }
}

#[cfg(test)]
impl TagSpec {
    /// A read-only `data_type` tag at holding register 0, unscaled, in the
    /// default byte order, without settings.
    pub fn plain(key: &str, data_type: DataType) -> Self {
        Self {
            key: key.into(),
            address: "40001".into(),
            data_type,
            length: 0,
            byte_order: ByteOrder::default(),
            factor: 1.0,
            offset: 0.0,
            deadband: 0.0,
            access: Access::Read,
            settings: Vec::new(),
        }
    }
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
