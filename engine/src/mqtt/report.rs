//! The report payload published on `property/post` for one device and round:
//! `{productId, deviceNum, timestamp, seq, values: [{key, value, quality, ts}]}`.
//! A BAD value is published as `null` with its quality.

use serde_json::{Map, Value as Json, json};

use crate::model::{Quality, Sample, TagSpec, Value};

/// Identity of the device a report is about.
#[derive(Debug, Clone, Copy)]
pub struct ReportHeader<'a> {
    pub product_id: &'a str,
    pub device_num: &'a str,
    /// When the report was made, ms since the Unix epoch.
    pub timestamp_ms: i64,
    /// Per-device sequence number, strictly increasing.
    pub seq: u64,
}

/// Builds the JSON payload; samples name their tag by index into `tags`.
pub fn payload(header: ReportHeader<'_>, samples: &[Sample], tags: &[TagSpec]) -> Json {
    let values: Vec<Json> = samples
        .iter()
        .filter_map(|sample| {
            let tag = tags.get(sample.tag as usize)?;
            let mut entry = Map::with_capacity(4);
            entry.insert("key".into(), Json::from(tag.key.as_str()));
            entry.insert("value".into(), json_value(sample));
            entry.insert("quality".into(), Json::from(sample.quality.as_str()));
            entry.insert("ts".into(), Json::from(sample.ts_ms));
            Some(Json::Object(entry))
        })
        .collect();
    json!({
        "productId": header.product_id,
        "deviceNum": header.device_num,
        "timestamp": header.timestamp_ms,
        "seq": header.seq,
        "values": values,
    })
}

fn json_value(sample: &Sample) -> Json {
    if sample.quality == Quality::Bad {
        return Json::Null;
    }
    match &sample.value {
        Value::None | Value::Raw(_) => Json::Null,
        Value::Bool(v) => Json::from(*v),
        Value::Int(v) => Json::from(*v),
        Value::Uint(v) => Json::from(*v),
        // serde_json turns a non-finite float into null, which matches "no value".
        Value::Float(v) => Json::from(*v),
        Value::Text(v) => Json::from(v.as_str()),
    }
}
