//! The report payload published on `property/post` for one device and round:
//! `{deviceNum, productId, seq, timestamp, values: [{key, quality, ts, value}]}`,
//! and `skipped: {from, to}` after `seq` in the first report after a crash;
//! with `collector.rawValue`, each value with a raw value adds `rawValue`.
//! A BAD value is published as `null` with its quality.
//!
//! The payload is written straight from the samples into its bytes: no JSON
//! tree, no serializer per field (a round's report is the engine's hottest
//! allocation and its hottest formatting).

use crate::model::{Quality, RawValues, Sample, TagSpec, Value};

/// Identity of the device a report is about.
#[derive(Debug, Clone, Copy)]
pub struct ReportHeader<'a> {
    pub product_id: &'a str,
    pub device_num: &'a str,
    /// When the report was made, ms since the Unix epoch.
    pub timestamp_ms: i64,
    /// Per-device sequence number, strictly increasing.
    pub seq: u64,
    /// With the first report after a crash: the numbers before `seq` that
    /// may never have been used (first, last; WAL-10 of `docs/wal.md`).
    pub skipped: Option<(u64, u64)>,
}

/// The JSON payload's bytes; samples name their tag by index into `tags`
/// (a sample whose tag is unknown is left out). Fields are written in a fixed
/// order: `deviceNum, productId, seq, timestamp, values`, and in each value
/// `key, quality, ts, value` and, when `raw` has one for its tag, `rawValue`.
pub fn payload(
    header: ReportHeader<'_>,
    samples: &[Sample],
    tags: &[TagSpec],
    raw: Option<&RawValues>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + samples.len() * 80);
    out.extend_from_slice(b"{\"deviceNum\":");
    string(&mut out, header.device_num);
    out.extend_from_slice(b",\"productId\":");
    string(&mut out, header.product_id);
    out.extend_from_slice(b",\"seq\":");
    out.extend_from_slice(itoa::Buffer::new().format(header.seq).as_bytes());
    if let Some((first, last)) = header.skipped {
        out.extend_from_slice(b",\"skipped\":{\"from\":");
        out.extend_from_slice(itoa::Buffer::new().format(first).as_bytes());
        out.extend_from_slice(b",\"to\":");
        out.extend_from_slice(itoa::Buffer::new().format(last).as_bytes());
        out.push(b'}');
    }
    out.extend_from_slice(b",\"timestamp\":");
    out.extend_from_slice(itoa::Buffer::new().format(header.timestamp_ms).as_bytes());
    out.extend_from_slice(b",\"values\":[");
    let mut first = true;
    let mut number = itoa::Buffer::new();
    // A round's samples mostly share one timestamp: formatted once.
    let mut ts = Timestamp::default();
    for sample in samples {
        let Some(tag) = tags.get(sample.tag as usize) else {
            continue;
        };
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(b"{\"key\":");
        string(&mut out, &tag.key);
        out.extend_from_slice(b",\"quality\":\"");
        out.extend_from_slice(sample.quality.as_str().as_bytes());
        out.extend_from_slice(b"\",\"ts\":");
        out.extend_from_slice(ts.text(sample.ts_ms));
        out.extend_from_slice(b",\"value\":");
        value(&mut out, &sample.value, sample.quality, &mut number);
        if let Some(raw) = raw.and_then(|raw| raw.get(sample.tag)) {
            out.extend_from_slice(b",\"rawValue\":");
            value(&mut out, raw, Quality::Good, &mut number);
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"]}");
    out
}

/// The text of the last timestamp formatted (an i64 takes at most 20 bytes).
#[derive(Default)]
struct Timestamp {
    ms: Option<i64>,
    text: [u8; 20],
    len: usize,
}

impl Timestamp {
    fn text(&mut self, ms: i64) -> &[u8] {
        if self.ms != Some(ms) {
            let mut buffer = itoa::Buffer::new();
            let text = buffer.format(ms).as_bytes();
            self.text[..text.len()].copy_from_slice(text);
            self.len = text.len();
            self.ms = Some(ms);
        }
        &self.text[..self.len]
    }
}

/// A value of `quality` as the report shows it: `null` when BAD, without one,
/// or not a finite number.
fn value(out: &mut Vec<u8>, value: &Value, quality: Quality, number: &mut itoa::Buffer) {
    if quality == Quality::Bad {
        out.extend_from_slice(b"null");
        return;
    }
    match value {
        Value::None | Value::Raw(_) => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Int(v) => out.extend_from_slice(number.format(*v).as_bytes()),
        Value::Uint(v) => out.extend_from_slice(number.format(*v).as_bytes()),
        Value::Float(v) if v.is_finite() => {
            // serde_json's shortest round-trip form, as a JSON tree writes it.
            match serde_json::to_writer(&mut *out, v) {
                Ok(()) => {}
                Err(_) => out.extend_from_slice(b"null"),
            }
        }
        Value::Float(_) => out.extend_from_slice(b"null"),
        Value::Text(v) => string(out, v),
        Value::Array(elements) => {
            out.push(b'[');
            for (i, element) in elements.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                self::value(out, element, quality, number);
            }
            out.push(b']');
        }
    }
}

/// `text` as a JSON string: copied as it is when nothing in it needs an
/// escape (tag keys and identifiers nearly always), escaped by serde_json
/// otherwise.
fn string(out: &mut Vec<u8>, text: &str) {
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else if serde_json::to_writer(&mut *out, text).is_err() {
        // A Vec takes every byte; only an impossible failure lands here.
        out.extend_from_slice(b"null");
    }
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
        let tags = [
            tag("a"),
            tag("b"),
            tag("c"),
            tag("d"),
            tag("e"),
            tag("f\"\n"),
            tag("g"),
        ];
        let samples = [
            sample(0, Value::Uint(7), Quality::Good),
            sample(1, Value::Float(f64::NAN), Quality::Good),
            sample(2, Value::Int(-3), Quality::Bad),
            sample(3, Value::Text("on \"x\"".into()), Quality::Uncertain),
            sample(4, Value::Float(1.5), Quality::Good),
            sample(9, Value::Bool(true), Quality::Good),
            sample(5, Value::Bool(false), Quality::Good),
            sample(6, Value::Uint(u64::MAX), Quality::Good),
        ];
        let header = ReportHeader {
            product_id: "P",
            device_num: "D1",
            timestamp_ms: 1_700_000_000_200,
            seq: 42,
            skipped: None,
        };
        let bytes = payload(header, &samples, &tags, None);
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
                    entry("f\"\n", json!(false), "GOOD"),
                    entry("g", json!(u64::MAX), "GOOD"),
                ],
            })
        );
        assert!(
            bytes.starts_with(br#"{"deviceNum":"D1","productId":"P","seq":42,"#),
            "fields in the order of the JSON tree the payload was built as before"
        );
    }

    #[test]
    fn each_value_keeps_its_own_timestamp() {
        let tags = [tag("a"), tag("b"), tag("c"), tag("d")];
        let stamps = [5, 5, i64::MIN, 7];
        let samples: Vec<Sample> = stamps
            .iter()
            .enumerate()
            .map(|(i, &ts_ms)| Sample {
                ts_ms,
                ..sample(i as u32, Value::Uint(1), Quality::Good)
            })
            .collect();
        let header = ReportHeader {
            product_id: "P",
            device_num: "D1",
            timestamp_ms: 9,
            seq: 1,
            skipped: Some((2, 1000)),
        };
        let parsed: serde_json::Value =
            serde_json::from_slice(&payload(header, &samples, &tags, None)).expect("json");
        let read: Vec<i64> = parsed["values"]
            .as_array()
            .expect("values")
            .iter()
            .map(|v| v["ts"].as_i64().expect("ts"))
            .collect();
        assert_eq!(read, stamps);
        assert_eq!(parsed["skipped"], json!({"from": 2, "to": 1000}));
    }

    #[test]
    fn raw_values_go_beside_the_values_that_have_one() {
        let tags = [tag("a"), tag("b"), tag("c")];
        let samples = [
            sample(0, Value::Float(12.34), Quality::Good),
            sample(1, Value::Int(1), Quality::Good),
            sample(2, Value::None, Quality::Bad),
        ];
        let raw = RawValues(vec![Some(Value::Int(1234)), None, Some(Value::Int(-9))]);
        let header = ReportHeader {
            product_id: "P",
            device_num: "D1",
            timestamp_ms: 9,
            seq: 1,
            skipped: None,
        };
        let bytes = payload(header, &samples, &tags, Some(&raw));
        let parsed: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
        let values = &parsed["values"];
        assert_eq!(values[0]["rawValue"], 1234);
        assert!(values[1].get("rawValue").is_none(), "{parsed}");
        // A value the pipeline set BAD keeps the raw value that explains it.
        assert_eq!(
            (&values[2]["value"], &values[2]["rawValue"]),
            (&json!(null), &json!(-9))
        );
        let text = String::from_utf8(bytes).expect("utf-8");
        assert!(text.contains(r#""value":12.34,"rawValue":1234}"#), "{text}");
    }
}
