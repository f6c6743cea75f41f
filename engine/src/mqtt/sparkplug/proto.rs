//! The Sparkplug B payload schema: the messages of Eclipse Tahu's
//! `sparkplug_b.proto` that the engine writes and reads, with their field numbers.
//! Fields it never writes (metadata, data sets, templates) are skipped on decode.

/// One Sparkplug message body: NBIRTH, NDEATH, DBIRTH, DDATA, DDEATH, NCMD, DCMD.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Payload {
    /// When the message was made, ms since the Unix epoch.
    #[prost(uint64, optional, tag = "1")]
    pub timestamp: Option<u64>,
    #[prost(message, repeated, tag = "2")]
    pub metrics: Vec<Metric>,
    /// 0..=255, one counter across the edge node's messages (not in NDEATH).
    #[prost(uint64, optional, tag = "3")]
    pub seq: Option<u64>,
}

/// One metric: named (births, commands) or aliased (data), typed, with a value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Metric {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(uint64, optional, tag = "2")]
    pub alias: Option<u64>,
    /// When the value was read, ms since the Unix epoch.
    #[prost(uint64, optional, tag = "3")]
    pub timestamp: Option<u64>,
    /// A [`super::MetricType`] code.
    #[prost(uint32, optional, tag = "4")]
    pub datatype: Option<u32>,
    #[prost(bool, optional, tag = "5")]
    pub is_historical: Option<bool>,
    #[prost(bool, optional, tag = "7")]
    pub is_null: Option<bool>,
    #[prost(message, optional, tag = "9")]
    pub properties: Option<PropertySet>,
    #[prost(oneof = "MetricValue", tags = "10, 11, 12, 13, 14, 15")]
    pub value: Option<MetricValue>,
}

/// A metric's value, by the protobuf field its datatype uses.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum MetricValue {
    /// Int8, Int16, Int32 (sign-extended to 32 bits), UInt8, UInt16.
    #[prost(uint32, tag = "10")]
    Int(u32),
    /// Int64 (two's complement), UInt32, UInt64, DateTime.
    #[prost(uint64, tag = "11")]
    Long(u64),
    #[prost(float, tag = "12")]
    Float(f32),
    #[prost(double, tag = "13")]
    Double(f64),
    #[prost(bool, tag = "14")]
    Boolean(bool),
    #[prost(string, tag = "15")]
    String(String),
}

/// Named properties of a metric (the engine writes `Quality`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct PropertySet {
    #[prost(string, repeated, tag = "1")]
    pub keys: Vec<String>,
    #[prost(message, repeated, tag = "2")]
    pub values: Vec<PropertyValue>,
}

/// One property's value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PropertyValue {
    #[prost(uint32, optional, tag = "1")]
    pub r#type: Option<u32>,
    #[prost(bool, optional, tag = "2")]
    pub is_null: Option<bool>,
    #[prost(oneof = "PropertyValueKind", tags = "3, 4")]
    pub value: Option<PropertyValueKind>,
}

/// A property's value, by the protobuf field its type uses.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum PropertyValueKind {
    #[prost(uint32, tag = "3")]
    Int(u32),
    #[prost(uint64, tag = "4")]
    Long(u64),
}
