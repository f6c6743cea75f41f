//! The register table of the Modbus tests: a value of every type in every byte
//! order (and scaled, ranged, bit and string tags) laid out in holding registers,
//! the tags that read them, and the check of a report against it. The TCP and the
//! RTU tests serve the same table and expect the same report.

use serde_json::{Value, json};

use super::config::Tag;
use super::mqtt::Message;

/// Registers of a big-endian value as they appear on the wire in `order`: a
/// 64-bit value in CDAB has its 32-bit halves swapped (seed 003's rule), in
/// GHEFCDAB (and DCBA, before the byte swap) its registers reversed.
pub fn wire(be: &[u8], order: &str) -> Vec<u16> {
    let mut words: Vec<[u8; 2]> = be.chunks(2).map(|c| [c[0], c[1]]).collect();
    match order {
        "CDAB" if words.len() == 4 => words.rotate_left(2),
        "CDAB" | "DCBA" | "GHEFCDAB" => words.reverse(),
        _ => {}
    }
    if matches!(order, "BADC" | "DCBA") {
        words.iter_mut().for_each(|w| w.swap(0, 1));
    }
    words.into_iter().map(u16::from_be_bytes).collect()
}

/// What a peer serves and what the engine must report of it.
pub struct RegisterTable {
    /// The peer's map (`hr`, `ir`, `co`, `di`).
    pub map: Value,
    /// The channel's tags.
    pub tags: Vec<Tag>,
    expected: Vec<(&'static str, Value)>,
}

impl RegisterTable {
    pub fn every_type_and_order() -> Self {
        let mut hr: Vec<u16> = Vec::new();
        let mut tags = Vec::new();
        let mut expected: Vec<(&str, Value)> = Vec::new();
        let mut add = |key: &'static str,
                       data_type: &str,
                       order: &str,
                       registers: Vec<u16>,
                       value: Value,
                       extra: &[(&str, Value)]| {
            let address = (40001 + hr.len()).to_string();
            let tag = Tag::new(key, &address, data_type, 200).set("byteOrder", order);
            tags.push(extra.iter().fold(tag, |tag, (k, v)| tag.set(k, v.clone())));
            hr.extend(registers);
            expected.push((key, value));
        };
        add(
            "i16",
            "INT16",
            "ABCD",
            wire(&(-300i16).to_be_bytes(), "ABCD"),
            json!(-300),
            &[],
        );
        add(
            "i16_swapped",
            "INT16",
            "BADC",
            wire(&(-300i16).to_be_bytes(), "BADC"),
            json!(-300),
            &[],
        );
        add("u16", "UINT16", "ABCD", vec![65000], json!(65000), &[]);
        for order in ["ABCD", "BADC", "CDAB", "DCBA"] {
            let key: &'static str = Box::leak(format!("f32_{order}").into_boxed_str());
            add(
                key,
                "FLOAT32",
                order,
                wire(&12.5f32.to_be_bytes(), order),
                json!(12.5),
                &[],
            );
            let key: &'static str = Box::leak(format!("i32_{order}").into_boxed_str());
            add(
                key,
                "INT32",
                order,
                wire(&(-123_456i32).to_be_bytes(), order),
                json!(-123_456),
                &[],
            );
            let key: &'static str = Box::leak(format!("f64_{order}").into_boxed_str());
            add(
                key,
                "FLOAT64",
                order,
                wire(&(-2.25f64).to_be_bytes(), order),
                json!(-2.25),
                &[],
            );
        }
        add(
            "f64_GHEFCDAB",
            "FLOAT64",
            "GHEFCDAB",
            wire(&(-2.25f64).to_be_bytes(), "GHEFCDAB"),
            json!(-2.25),
            &[],
        );
        add(
            "u32",
            "UINT32",
            "CDAB",
            wire(&4_000_000_000u32.to_be_bytes(), "CDAB"),
            json!(4_000_000_000u64),
            &[],
        );
        add(
            "u64",
            "UINT64",
            "ABCD",
            wire(&u64::MAX.to_be_bytes(), "ABCD"),
            json!(u64::MAX),
            &[],
        );
        add("bcd16", "BCD16", "ABCD", vec![0x1234], json!(1234), &[]);
        add(
            "bcd32",
            "BCD32",
            "ABCD",
            vec![0x0012, 0x3456],
            json!(123_456),
            &[],
        );
        add("bad_bcd", "BCD16", "ABCD", vec![0x12F4], Value::Null, &[]);
        add(
            "text",
            "STRING",
            "ABCD",
            vec![0x4142, 0x4344, 0x4500],
            json!("ABCDE"),
            &[("length", json!(5))],
        );
        add(
            "scaled",
            "INT16",
            "ABCD",
            vec![1234],
            json!(123.4),
            &[("factor", json!(0.1))],
        );
        add(
            "offset",
            "UINT16",
            "ABCD",
            vec![50],
            json!(-25.0),
            &[("factor", json!(0.5)), ("offset", json!(-50))],
        );
        add(
            "ranged",
            "UINT16",
            "ABCD",
            vec![150],
            json!(150),
            &[("min", json!(0)), ("max", json!(100))],
        );
        // The register the bit tags below read bits of.
        add("bits", "UINT16", "ABCD", vec![0b1000], json!(8), &[]);
        let bit_register = 40001 + hr.len() - 1;
        let map = json!({
            "hr": { "0": hr },
            "ir": { "0": [777] },
            "co": { "0": [1, 0, 1] },
            "di": { "0": [0, 1] },
        });

        tags.extend([
            Tag::new("bit3", &format!("{bit_register}.3"), "BOOL", 200),
            Tag::new("bit2", &format!("{bit_register}.2"), "BOOL", 200),
            Tag::new("input", "30001", "INT16", 200),
            Tag::new("coil0", "00001", "BOOL", 200),
            Tag::new("coil1", "00002", "BOOL", 200),
            Tag::new("discrete", "10002", "BOOL", 200),
            Tag::new("unmapped", "40500", "INT16", 200),
            Tag::new("write_only", "40001", "INT16", 0).set("access", "W"),
        ]);
        Self {
            map,
            tags,
            expected,
        }
    }

    /// Checks every value and quality of `report` against the table.
    pub fn check(&self, report: &Value) {
        let expected = &self.expected;
        let values = values_by_key(report);
        for (key, value) in expected {
            let (got, quality) = values
                .get(*key)
                .unwrap_or_else(|| panic!("no value for {key} in {report}"));
            assert_eq!(got, value, "{key}: {report}");
            let want = match *key {
                "bad_bcd" => "BAD",
                "ranged" => "UNCERTAIN",
                _ => "GOOD",
            };
            assert_eq!(quality, want, "{key}");
        }
        for (key, value) in [
            ("bit3", json!(true)),
            ("bit2", json!(false)),
            ("input", json!(777)),
            ("coil0", json!(true)),
            ("coil1", json!(false)),
            ("discrete", json!(true)),
        ] {
            assert_eq!(values[key], (value, "GOOD".to_owned()), "{key}");
        }
        assert_eq!(
            values["unmapped"],
            (Value::Null, "BAD".to_owned()),
            "exception 2 makes only that tag BAD"
        );
        assert!(
            !values.contains_key("write_only"),
            "a periodMs 0 tag is never polled"
        );
    }
}

/// The last report on `topic` that carries every key in `keys`.
pub fn last_report(messages: &[Message], topic: &str) -> Option<Value> {
    messages
        .iter()
        .rev()
        .find(|m| m.topic == topic)
        .map(Message::json)
}

pub fn values_by_key(report: &Value) -> std::collections::HashMap<String, (Value, String)> {
    report["values"]
        .as_array()
        .expect("values")
        .iter()
        .map(|v| {
            (
                v["key"].as_str().expect("key").to_owned(),
                (
                    v["value"].clone(),
                    v["quality"].as_str().expect("quality").to_owned(),
                ),
            )
        })
        .collect()
}
