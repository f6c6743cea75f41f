//! The report payload published on `property/post` for one device and round:
//! `{deviceNum, productId, seq, timestamp, values: [{key, quality, ts, value}]}`.
//! A BAD value is published as `null` with its quality.
//!
//! The payload is written straight from the samples: no JSON tree is built
//! on the way (a round's report is the engine's hottest allocation).

use serde::Serialize;
use serde::ser::{SerializeSeq, Serializer};

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

/// The payload's fields, in the order they are written.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report<'a> {
    device_num: &'a str,
    product_id: &'a str,
    seq: u64,
    timestamp: i64,
    values: Entries<'a>,
}

/// The samples whose tag is known, each as an [`Entry`].
struct Entries<'a> {
    samples: &'a [Sample],
    tags: &'a [TagSpec],
}

impl Serialize for Entries<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(None)?;
        for sample in self.samples {
            if let Some(tag) = self.tags.get(sample.tag as usize) {
                seq.serialize_element(&Entry {
                    key: &tag.key,
                    quality: sample.quality.as_str(),
                    ts: sample.ts_ms,
                    value: Reported(sample),
                })?;
            }
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct Entry<'a> {
    key: &'a str,
    quality: &'a str,
    ts: i64,
    value: Reported<'a>,
}

/// A sample's value as the report shows it: `null` when BAD or without one.
struct Reported<'a>(&'a Sample);

impl Serialize for Reported<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.0.quality == Quality::Bad {
            return serializer.serialize_unit();
        }
        match &self.0.value {
            Value::None | Value::Raw(_) => serializer.serialize_unit(),
            Value::Bool(v) => serializer.serialize_bool(*v),
            Value::Int(v) => serializer.serialize_i64(*v),
            Value::Uint(v) => serializer.serialize_u64(*v),
            // A non-finite float is written as null, which matches "no value".
            Value::Float(v) => serializer.serialize_f64(*v),
            Value::Text(v) => serializer.serialize_str(v),
        }
    }
}

/// The JSON payload's bytes; samples name their tag by index into `tags`.
pub fn payload(header: ReportHeader<'_>, samples: &[Sample], tags: &[TagSpec]) -> Vec<u8> {
    let report = Report {
        device_num: header.device_num,
        product_id: header.product_id,
        seq: header.seq,
        timestamp: header.timestamp_ms,
        values: Entries { samples, tags },
    };
    // Writing these types into a Vec has no way to fail: every field is a
    // string, a number or a sequence, and a Vec takes every byte.
    serde_json::to_vec(&report).expect("a report serialises into a Vec")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::DataType;

    fn tag(key: &str) -> TagSpec {
        TagSpec::plain(key, DataType::Uint16)
    }

    fn sample(tag: u32, value: Value, quality: Quality) -> Sample {
        Sample {
            tag,
            value,
            quality,
            ts_ms: 1_700_000_000_123,
        }
    }

    #[test]
    fn a_report_is_the_documented_json_with_bad_and_unknown_values_as_null() {
        let tags = [tag("a"), tag("b"), tag("c"), tag("d"), tag("e")];
        let samples = [
            sample(0, Value::Uint(7), Quality::Good),
            sample(1, Value::Float(f64::NAN), Quality::Good),
            sample(2, Value::Int(-3), Quality::Bad),
            sample(3, Value::Text("on \"x\"".into()), Quality::Uncertain),
            sample(4, Value::Float(1.5), Quality::Good),
            sample(9, Value::Bool(true), Quality::Good),
        ];
        let header = ReportHeader {
            product_id: "P",
            device_num: "D1",
            timestamp_ms: 1_700_000_000_200,
            seq: 42,
        };
        let bytes = payload(header, &samples, &tags);
        let parsed: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
        let entry = |key: &str, value: serde_json::Value, quality: &str| json!({"key": key, "value": value, "quality": quality, "ts": 1_700_000_000_123_i64});
        assert_eq!(
            parsed,
            json!({
                "productId": "P",
                "deviceNum": "D1",
                "timestamp": 1_700_000_000_200_i64,
                "seq": 42,
                "values": [
                    entry("a", json!(7), "GOOD"),
                    entry("b", json!(null), "GOOD"),
                    entry("c", json!(null), "BAD"),
                    entry("d", json!("on \"x\""), "UNCERTAIN"),
                    entry("e", json!(1.5), "GOOD"),
                ],
            })
        );
        assert!(
            bytes.starts_with(br#"{"deviceNum":"D1","productId":"P","seq":42,"#),
            "fields in the order of the JSON tree the payload was built as before"
        );
    }
}
