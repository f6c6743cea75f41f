//! The built-in stage components through the runtime: byte order, decoding,
//! deadband and range quality, with wire bytes written out by hand.

use std::sync::Arc;

use crate::common::{TS, builtin, runtime, tag};
use sluice::model::{
    Batch, ByteOrder, DataType, Quality, Sample, Setting, SettingValue, Span, TagSpec, Value,
};
use sluice::runtime::{ComponentKind, Limits, Processor, Runtime, StagePool};

fn pool(runtime: &Runtime, name: &str) -> Arc<StagePool> {
    let component = runtime
        .load(ComponentKind::Stage, name, &builtin(name))
        .expect("loads");
    runtime
        .stage_pool(&component, Limits::default())
        .expect("pool")
}

fn processor(runtime: &Runtime, name: &str, tags: &[TagSpec]) -> Processor {
    pool(runtime, name)
        .processor(&[], Arc::from(tags))
        .expect("processor")
}

/// A batch of raw samples, one per wire value, with the bytes laid end to end.
fn raw_batch(wires: &[&[u8]]) -> Batch {
    let mut batch = Batch::default();
    for (i, wire) in wires.iter().enumerate() {
        let span = Span {
            start: batch.bytes.len() as u32,
            len: wire.len() as u32,
        };
        batch.bytes.extend_from_slice(wire);
        batch.samples.push(Sample {
            tag: i as u32,
            value: Value::Raw(span),
            quality: Quality::Good,
            ts_ms: TS,
        });
    }
    batch
}

fn typed(data_type: DataType, order: ByteOrder) -> TagSpec {
    TagSpec {
        byte_order: order,
        length: if data_type == DataType::String { 5 } else { 0 },
        ..tag("t", "40001", data_type)
    }
}

/// (type, order, wire bytes, expected value)
fn cases() -> Vec<(DataType, ByteOrder, Vec<u8>, Value)> {
    use ByteOrder::*;
    use DataType::*;
    vec![
        (
            Float32,
            Abcd,
            vec![0x3F, 0xC0, 0x00, 0x00],
            Value::Float(1.5),
        ),
        (
            Float32,
            Badc,
            vec![0xC0, 0x3F, 0x00, 0x00],
            Value::Float(1.5),
        ),
        (
            Float32,
            Cdab,
            vec![0x00, 0x00, 0x3F, 0xC0],
            Value::Float(1.5),
        ),
        (
            Float32,
            Dcba,
            vec![0x00, 0x00, 0xC0, 0x3F],
            Value::Float(1.5),
        ),
        (
            Uint32,
            Abcd,
            vec![0x12, 0x34, 0x56, 0x78],
            Value::Int(0x1234_5678),
        ),
        (
            Uint32,
            Badc,
            vec![0x34, 0x12, 0x78, 0x56],
            Value::Int(0x1234_5678),
        ),
        (
            Uint32,
            Cdab,
            vec![0x56, 0x78, 0x12, 0x34],
            Value::Int(0x1234_5678),
        ),
        (
            Uint32,
            Dcba,
            vec![0x78, 0x56, 0x34, 0x12],
            Value::Int(0x1234_5678),
        ),
        (Int32, Cdab, vec![0xFF, 0xFE, 0xFF, 0xFF], Value::Int(-2)),
        (Int16, Abcd, vec![0xFE, 0xD4], Value::Int(-300)),
        (Int16, Badc, vec![0xD4, 0xFE], Value::Int(-300)),
        (Int16, Cdab, vec![0xFE, 0xD4], Value::Int(-300)),
        (Uint16, Dcba, vec![0x34, 0x12], Value::Int(0x1234)),
        (
            Float64,
            Abcd,
            vec![0x3F, 0xF8, 0, 0, 0, 0, 0, 0],
            Value::Float(1.5),
        ),
        (
            Float64,
            Cdab,
            vec![0, 0, 0, 0, 0x3F, 0xF8, 0, 0],
            Value::Float(1.5),
        ),
        (
            Float64,
            Ghefcdab,
            vec![0, 0, 0, 0, 0, 0, 0x3F, 0xF8],
            Value::Float(1.5),
        ),
        (
            Float64,
            Dcba,
            vec![0, 0, 0, 0, 0, 0, 0xF8, 0x3F],
            Value::Float(1.5),
        ),
        (
            Float64,
            Badc,
            vec![0xF8, 0x3F, 0, 0, 0, 0, 0, 0],
            Value::Float(1.5),
        ),
        (
            Uint64,
            Cdab,
            vec![5, 6, 7, 8, 1, 2, 3, 4],
            Value::Uint(0x0102_0304_0506_0708),
        ),
        (
            Uint64,
            Ghefcdab,
            vec![7, 8, 5, 6, 3, 4, 1, 2],
            Value::Uint(0x0102_0304_0506_0708),
        ),
        (Int64, Abcd, vec![0xFF; 8], Value::Int(-1)),
        (Bcd16, Abcd, vec![0x12, 0x34], Value::Int(1234)),
        (
            Bcd32,
            Cdab,
            vec![0x56, 0x78, 0x12, 0x34],
            Value::Int(12_345_678),
        ),
        (Bool, Abcd, vec![0x00, 0x01], Value::Bool(true)),
        (
            String,
            Abcd,
            b"HELLO\0".to_vec(),
            Value::Text("HELLO".into()),
        ),
        (
            String,
            Badc,
            b"EHLL\0O".to_vec(),
            Value::Text("HELLO".into()),
        ),
    ]
}

#[test]
fn every_type_in_every_byte_order_decodes() {
    let runtime = runtime();
    let cases = cases();
    let tags: Vec<TagSpec> = cases.iter().map(|(t, o, _, _)| typed(*t, *o)).collect();
    let swap = processor(&runtime, "swap_bytes", &tags);
    let decode = processor(&runtime, "decode", &tags);
    let wires: Vec<&[u8]> = cases.iter().map(|(_, _, w, _)| w.as_slice()).collect();
    let out = decode
        .process(swap.process(raw_batch(&wires)).expect("swap"))
        .expect("decode");
    for ((data_type, order, _, expected), sample) in cases.iter().zip(&out.samples) {
        assert_eq!(&sample.value, expected, "{data_type:?} {order:?}");
        assert_eq!(sample.quality, Quality::Good);
    }
}

#[test]
fn undecodable_values_are_bad_not_a_crash() {
    let runtime = runtime();
    let tags = [
        typed(DataType::Bcd16, ByteOrder::Abcd),
        typed(DataType::Float32, ByteOrder::Abcd),
        typed(DataType::Float64, ByteOrder::Abcd),
        typed(DataType::Int32, ByteOrder::Abcd),
    ];
    let decode = processor(&runtime, "decode", &tags);
    let mut batch = raw_batch(&[
        &[0x1A, 0x00],
        &[0x7F, 0xC0, 0, 0],
        &[0x7F, 0xF0, 0, 0, 0, 0, 0, 0],
        &[1, 2],
    ]);
    // A span past the end of the buffer must not crash either.
    batch.samples[3].value = Value::Raw(Span {
        start: 1000,
        len: 4,
    });
    let out = decode.process(batch).expect("decode");
    for sample in &out.samples {
        assert_eq!(
            (sample.quality, &sample.value),
            (Quality::Bad, &Value::None),
            "tag {}",
            sample.tag
        );
    }
}

fn floats(values: &[f64]) -> Batch {
    crate::common::batch(&values.iter().map(|v| Value::Float(*v)).collect::<Vec<_>>())
}

#[test]
fn deadband_drops_small_moves_and_reset_forgets() {
    let runtime = runtime();
    let tags = [
        TagSpec {
            deadband: 0.5,
            ..tag("a", "40001", DataType::Float32)
        },
        tag("b", "40003", DataType::Float32),
    ];
    let deadband = processor(&runtime, "deadband", &tags);
    let keys = |batch: &Batch| batch.samples.iter().map(|s| s.tag).collect::<Vec<_>>();
    assert_eq!(
        keys(&deadband.process(floats(&[10.0, 1.0])).expect("1")),
        [0, 1]
    );
    assert_eq!(
        keys(&deadband.process(floats(&[10.4, 1.0])).expect("2")),
        [1],
        "0.4 < 0.5: dropped"
    );
    assert_eq!(
        keys(&deadband.process(floats(&[10.5, 1.0])).expect("3")),
        [0, 1],
        "0.5: published"
    );
    assert_eq!(
        keys(&deadband.process(floats(&[10.6, 1.0])).expect("4")),
        [1]
    );
    deadband.reset().expect("reset");
    assert_eq!(
        keys(&deadband.process(floats(&[10.6, 1.0])).expect("5")),
        [0, 1],
        "first after reset"
    );

    let mut bad = floats(&[0.0, 1.0]);
    bad.samples[0].quality = Quality::Bad;
    bad.samples[0].value = Value::None;
    assert_eq!(
        keys(&deadband.process(bad).expect("6")),
        [0, 1],
        "BAD always passes"
    );
    assert_eq!(
        keys(&deadband.process(floats(&[10.6, 1.0])).expect("7")),
        [0, 1],
        "good again after BAD"
    );
}

#[test]
fn values_outside_the_tag_range_are_uncertain() {
    let runtime = runtime();
    let ranged = |min: f64, max: f64| TagSpec {
        settings: vec![
            Setting {
                key: "min".into(),
                value: SettingValue::Float(min),
            },
            Setting {
                key: "max".into(),
                value: SettingValue::Int(max as i64),
            },
        ],
        ..tag("r", "40001", DataType::Float32)
    };
    let tags = [
        ranged(0.0, 100.0),
        ranged(0.0, 100.0),
        tag("free", "40003", DataType::Float32),
    ];
    let check = processor(&runtime, "check_range", &tags);
    let out = check.process(floats(&[50.0, 100.5, 1e9])).expect("check");
    let qualities: Vec<_> = out.samples.iter().map(|s| s.quality).collect();
    assert_eq!(
        qualities,
        [Quality::Good, Quality::Uncertain, Quality::Good]
    );
    assert_eq!(
        out.samples[1].value,
        Value::Float(100.5),
        "the value is kept"
    );

    let error = pool(&runtime, "check_range")
        .processor(&[], Arc::from([ranged(5.0, 1.0)]))
        .expect_err("min above max");
    assert!(
        error.to_string().contains("`min` is above `max`"),
        "{error}"
    );
}

fn text(key: &str, value: &str) -> Setting {
    Setting {
        key: key.into(),
        value: SettingValue::Text(value.into()),
    }
}

#[test]
fn the_chain_does_in_one_call_what_the_stages_do_in_five() {
    let runtime = runtime();
    let cases = cases();
    let mut tags: Vec<TagSpec> = cases.iter().map(|(t, o, _, _)| typed(*t, *o)).collect();
    for tag in &mut tags {
        tag.factor = 0.5;
        tag.settings.push(Setting {
            key: "max".into(),
            value: SettingValue::Float(10.0),
        });
    }
    let names = ["swap_bytes", "decode", "scale", "check_range", "deadband"];
    let mut settings: Vec<Setting> = names
        .iter()
        .enumerate()
        .map(|(i, name)| text(&format!("{i}.use"), name))
        .collect();
    settings.push(Setting {
        key: "2.decimals".into(),
        value: SettingValue::Int(6),
    });
    let chain = pool(&runtime, "chain")
        .processor(&settings, Arc::from(&tags[..]))
        .expect("chain");
    let stages: Vec<Processor> = names
        .iter()
        .map(|name| {
            let own: Vec<Setting> = match *name {
                "scale" => vec![Setting {
                    key: "decimals".into(),
                    value: SettingValue::Int(6),
                }],
                _ => Vec::new(),
            };
            pool(&runtime, name)
                .processor(&own, Arc::from(&tags[..]))
                .expect("stage")
        })
        .collect();
    let wires: Vec<&[u8]> = cases.iter().map(|(_, _, w, _)| w.as_slice()).collect();
    for round in 0..2 {
        let fused = chain.process(raw_batch(&wires)).expect("chain runs");
        let mut one_by_one = raw_batch(&wires);
        for stage in &stages {
            one_by_one = stage.process(one_by_one).expect("stage runs");
        }
        assert_eq!(fused, one_by_one, "round {round}");
        assert!(
            fused
                .samples
                .iter()
                .any(|s| s.quality == Quality::Uncertain)
        );
    }
}

#[test]
fn the_chain_refuses_what_its_stages_refuse_naming_the_position() {
    let runtime = runtime();
    let chain = pool(&runtime, "chain");
    let error = chain
        .processor(
            &[
                text("0.use", "scale"),
                Setting {
                    key: "0.decimals".into(),
                    value: SettingValue::Int(40),
                },
                text("1.use", "no_such_stage"),
            ],
            Arc::default(),
        )
        .expect_err("refused");
    let message = error.to_string();
    assert!(
        message.contains("`0.decimals`: setting `decimals` must be from 0 to 12")
            && message.contains("`1.use`: `no_such_stage` is not a built-in stage"),
        "{message}"
    );
}
