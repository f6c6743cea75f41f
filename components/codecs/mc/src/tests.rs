//! Session-level tests: settings, byte-exact frames, parsing, errors, robustness.

use super::*;
use sluice::dataflow::types::{
    ByteOrder as WireOrder, DataType as WireType, Quality, Sample, SettingValue as Sv,
};
use sluice_guest::fuzz::{self, Peer, Rng};
use sluice_guest::numeric::{ByteOrder, Number, decode, reorder};

sluice_guest::codec_test_kit!(McSession);

fn text(key: &str, value: &str) -> Setting {
    setting(key, Sv::Text(value.into()))
}

fn int(key: &str, value: i64) -> Setting {
    setting(key, Sv::Int(value))
}

fn session(settings: &[Setting], tags: Vec<TagSpec>) -> McSession {
    match McSession::create(settings, tags) {
        Ok(session) => session,
        Err(errors) => panic!("{errors:?}"),
    }
}

fn q_l(tags: Vec<TagSpec>) -> McSession {
    session(&[], tags)
}

fn iq_r(tags: Vec<TagSpec>) -> McSession {
    session(&[text("series", "IQ_R")], tags)
}

fn errors(settings: &[Setting], tags: Vec<TagSpec>) -> Vec<ConfigError> {
    match McSession::create(settings, tags) {
        Ok(_) => panic!("expected config errors"),
        Err(errors) => errors,
    }
}

/// A 3E response with `end_code` and `data`.
fn answer(end_code: u16, data: &[u8]) -> Vec<u8> {
    let mut out = alloc::vec![0xD0, 0x00, 0x00, 0xFF, 0xFF, 0x03, 0x00];
    out.extend_from_slice(&((data.len() + 2) as u16).to_le_bytes());
    out.extend_from_slice(&end_code.to_le_bytes());
    out.extend_from_slice(data);
    out
}

/// The response to the request `sent`, 3E or 4E (echoing its serial number).
fn reply(sent: &[u8], end_code: u16, data: &[u8]) -> Vec<u8> {
    let mut out = if sent[0] == 0x54 {
        alloc::vec![0xD4, 0x00, sent[2], sent[3], 0, 0]
    } else {
        alloc::vec![0xD0, 0x00]
    };
    out.extend_from_slice(&answer(end_code, data)[2..]);
    out
}

/// A PLC answering every request in full.
struct Plc;

impl Peer for Plc {
    fn read(&self, sent: &[u8], rng: &mut Rng) -> Vec<u8> {
        let base = if sent[0] == 0x54 { 4 } else { 0 };
        let sub = sent[base + 13];
        let at = base + 15 + if sub & 2 != 0 { 6 } else { 4 };
        let points = usize::from(u16::from_le_bytes([sent[at], sent[at + 1]]));
        let len = if sub & 1 != 0 {
            points.div_ceil(2)
        } else {
            points * 2
        };
        reply(sent, 0, &rng.bytes(len))
    }

    fn write(&self, sent: &[u8]) -> Vec<u8> {
        reply(sent, 0, &[])
    }
}

fn read_one(session: &McSession) -> (u32, Vec<u8>) {
    let reads = session.plan((0..session.tags.len() as u32).collect());
    assert_eq!(reads.len(), 1, "one request expected");
    let id = reads[0].id;
    (id, session.encode_read(id).expect("encodes"))
}

/// The sample of tag `tag`.
fn sample_of(batch: &Batch, tag: u32) -> &Sample {
    match batch.samples.iter().find(|s| s.tag == tag) {
        Some(sample) => sample,
        None => panic!("no sample for tag {tag}"),
    }
}

fn raw(batch: &Batch, tag: u32) -> &[u8] {
    match sample_of(batch, tag).value {
        Value::Raw(span) => &batch.bytes[span.start as usize..(span.start + span.len) as usize],
        ref other => panic!("raw value expected, got {other:?}"),
    }
}

fn boolean(batch: &Batch, tag: u32) -> bool {
    match sample_of(batch, tag).value {
        Value::Boolean(b) => b,
        ref other => panic!("boolean expected, got {other:?}"),
    }
}

/// What the engine's pipeline does with a raw sample: swap_bytes, then decode.
fn pipeline(bytes: &[u8], data_type: DataType, order: ByteOrder) -> Number {
    let mut bytes = bytes.to_vec();
    sluice_guest::numeric::reorder_for(&mut bytes, data_type, order);
    decode(data_type, &bytes).expect("decodes")
}

#[test]
fn settings_defaults_and_errors() {
    let s = q_l(alloc::vec![spec("D100", WireType::Int16)]);
    assert_eq!(s.config.frame, FrameType::E3);
    assert!(!s.config.wide);
    assert_eq!(s.config.timer, 4);
    assert_eq!(s.header_len(), 9);
    assert!(s.handshake(0).is_none());
    let s = session(
        &[
            text("series", "QnA"),
            text("frameType", "FRAME_4E"),
            int("monitorTimer", 10),
            text("byteOrder", "CDAB"),
        ],
        Vec::new(),
    );
    assert_eq!((s.config.frame, s.config.timer), (FrameType::E4, 10));
    assert_eq!(s.header_len(), 13);

    let errs = errors(
        &[
            text("frameType", "FRAME_1E"),
            text("series", "A"),
            int("monitorTimer", 0),
            int("unitId", 1),
            int("series", 3),
        ],
        Vec::new(),
    );
    let keys: Vec<&str> = errs.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        keys,
        ["frameType", "series", "monitorTimer", "unitId", "series"]
    );
    assert!(
        errs[0].message.contains("not supported"),
        "{}",
        errs[0].message
    );
    assert!(errs.iter().all(|e| e.tag.is_none()));
    assert_eq!(errors(&[int("monitorTimer", 65536)], Vec::new()).len(), 1);
}

#[test]
fn every_bad_tag_is_reported() {
    let empty = string("D0", 0);
    let long = string("D0", u32::MAX);
    let errs = errors(
        &[],
        alloc::vec![
            spec("D100", WireType::Int16),
            spec("Q1", WireType::Int16),
            spec("X1G", WireType::Bool),
            spec("M10", WireType::Int16),
            spec("D100.3", WireType::Int16),
            spec("D16777215", WireType::Int32),
            empty,
            long,
            spec("D16777216", WireType::Int16),
        ],
    );
    let got: Vec<(Option<u32>, &str)> = errs.iter().map(|e| (e.tag, e.key.as_str())).collect();
    assert_eq!(
        got,
        [
            (Some(1), "address"),
            (Some(2), "address"),
            (Some(3), "dataType"),
            (Some(4), "dataType"),
            (Some(5), "address"),
            (Some(6), "length"),
            (Some(7), "length"),
            (Some(8), "address"),
        ]
    );
    // iQ-R takes 4-byte device numbers.
    iq_r(alloc::vec![spec("D16777216", WireType::Int32)]);
}

#[test]
fn read_frames_are_byte_exact() {
    let (_, frame) = read_one(&q_l(alloc::vec![spec("D100", WireType::Int16)]));
    assert_eq!(
        frame,
        [
            0x50, 0x00, 0x00, 0xFF, 0xFF, 0x03, 0x00, 0x0C, 0x00, 0x04, 0x00, 0x01, 0x04, 0x00,
            0x00, 0x64, 0x00, 0x00, 0xA8, 0x01, 0x00
        ]
    );
    let (_, frame) = read_one(&q_l(specs("X1F BOOL, X20 BOOL")));
    assert_eq!(
        frame[9..],
        [
            0x04, 0x00, 0x01, 0x04, 0x01, 0x00, 0x1F, 0x00, 0x00, 0x9C, 0x02, 0x00
        ]
    );
    let (_, frame) = read_one(&iq_r(alloc::vec![spec("D100", WireType::Float32)]));
    assert_eq!(
        frame,
        [
            0x50, 0x00, 0x00, 0xFF, 0xFF, 0x03, 0x00, 0x0E, 0x00, 0x04, 0x00, 0x01, 0x04, 0x02,
            0x00, 0x64, 0x00, 0x00, 0x00, 0xA8, 0x00, 0x02, 0x00
        ]
    );
    let (_, frame) = read_one(&iq_r(alloc::vec![spec("M10", WireType::Bool)]));
    assert_eq!(frame[11..15], [0x01, 0x04, 0x03, 0x00]);
    assert_eq!(frame[15..], [0x0A, 0, 0, 0, 0x90, 0x00, 0x01, 0x00]);
    let s = session(
        &[text("frameType", "FRAME_4E"), int("monitorTimer", 10)],
        alloc::vec![spec("ZR1000", WireType::Int16)],
    );
    let (_, frame) = read_one(&s);
    assert_eq!(
        frame,
        [
            0x54, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0x03, 0x00, 0x0C, 0x00, 0x0A,
            0x00, 0x01, 0x04, 0x00, 0x00, 0xE8, 0x03, 0x00, 0xB0, 0x01, 0x00
        ]
    );
    assert!(s.encode_read(99).is_err());
}

#[test]
fn write_frames_are_byte_exact() {
    let s = q_l(specs(
        "D100 INT16, D300 INT32, M10 BOOL, D5.1 BOOL, Y20 BOOL",
    ));
    assert_eq!(
        s.encode_write(0, Value::Int(0x1234)).expect("word"),
        [
            0x50, 0x00, 0x00, 0xFF, 0xFF, 0x03, 0x00, 0x0E, 0x00, 0x04, 0x00, 0x01, 0x14, 0x00,
            0x00, 0x64, 0x00, 0x00, 0xA8, 0x01, 0x00, 0x34, 0x12
        ]
    );
    assert_eq!(
        s.encode_write(1, Value::Int(0x1234_5678)).expect("dword")[7..],
        [
            0x10, 0x00, 0x04, 0x00, 0x01, 0x14, 0x00, 0x00, 0x2C, 0x01, 0x00, 0xA8, 0x02, 0x00,
            0x78, 0x56, 0x34, 0x12
        ]
    );
    assert_eq!(
        s.encode_write(2, Value::Boolean(true)).expect("bit")[7..],
        [
            0x0D, 0x00, 0x04, 0x00, 0x01, 0x14, 0x01, 0x00, 0x0A, 0x00, 0x00, 0x90, 0x01, 0x00,
            0x10
        ]
    );
    assert_eq!(
        s.encode_write(2, Value::Int(0)).expect("bit").last(),
        Some(&0x00)
    );
    assert!(s.encode_write(2, Value::Int(2)).is_err());
    assert!(
        s.encode_write(3, Value::Boolean(true)).is_err(),
        "bit of a word"
    );
    assert!(
        s.encode_write(0, Value::Int(70000)).is_err(),
        "out of range"
    );
    assert!(s.encode_write(0, Value::None).is_err());
    assert!(s.encode_write(9, Value::Int(0)).is_err());

    let r = iq_r(specs("Y20 BOOL, D100 UINT16"));
    assert_eq!(
        r.encode_write(0, Value::Boolean(true)).expect("bit")[7..],
        [
            0x0F, 0x00, 0x04, 0x00, 0x01, 0x14, 0x03, 0x00, 0x20, 0x00, 0x00, 0x00, 0x9D, 0x00,
            0x01, 0x00, 0x10
        ]
    );
    assert_eq!(
        r.encode_write(1, Value::Int(0xBEEF)).expect("word")[11..],
        [
            0x01, 0x14, 0x02, 0x00, 0x64, 0x00, 0x00, 0x00, 0xA8, 0x00, 0x01, 0x00, 0xEF, 0xBE
        ]
    );
}

#[test]
fn word_responses_become_big_endian_samples() {
    let name = string("D104", 3);
    let s = q_l(alloc::vec![
        spec("D100", WireType::Int16),
        spec("D101", WireType::Uint16),
        spec("D102.3", WireType::Bool),
        name,
        spec("D103", WireType::Bool),
    ]);
    let (id, frame) = read_one(&s);
    assert_eq!(frame[15..], [100, 0, 0, 0xA8, 6, 0]);
    let data = [
        0x18, 0xFC, // D100 = -1000
        0x34, 0x12, // D101 = 0x1234
        0x08, 0x00, // D102 bit 3 set
        0x00, 0x00, // D103 = 0
        b'A', b'B', b'C', 0x00, // D104..D105 "ABC"
    ];
    let batch = s.parse_read(id, answer(0, &data), 42).expect("parses");
    assert_eq!(batch.samples.len(), 5);
    assert!(
        batch
            .samples
            .iter()
            .all(|x| x.ts_ms == 42 && x.quality == Quality::Good)
    );
    assert_eq!(raw(&batch, 0), [0xFC, 0x18]);
    assert_eq!(
        pipeline(raw(&batch, 0), DataType::Int16, ByteOrder::Abcd),
        Number::Int(-1000)
    );
    assert_eq!(raw(&batch, 1), [0x12, 0x34]);
    assert!(boolean(&batch, 2));
    assert_eq!(raw(&batch, 3), b"ABC\0");
    assert_eq!(
        pipeline(raw(&batch, 3), DataType::String(3), ByteOrder::Abcd),
        Number::Text("ABC".into())
    );
    assert_eq!(raw(&batch, 4), [0, 0]);
}

#[test]
fn a_32_bit_value_at_d300_arrives_low_word_first() {
    let s = q_l(specs("D300 INT32, D302 FLOAT64"));
    let (id, _) = read_one(&s);
    let mut data = alloc::vec![0x78, 0x56, 0x34, 0x12];
    data.extend_from_slice(&(-2.5f64).to_le_bytes());
    let batch = s.parse_read(id, answer(0, &data), 0).expect("parses");
    assert_eq!(raw(&batch, 0), [0x12, 0x34, 0x56, 0x78]);
    assert_eq!(
        pipeline(raw(&batch, 0), DataType::Int32, ByteOrder::Abcd),
        Number::Int(0x1234_5678)
    );
    assert_eq!(raw(&batch, 1), (-2.5f64).to_be_bytes());
    assert_eq!(
        pipeline(raw(&batch, 1), DataType::Float64, ByteOrder::Abcd),
        Number::Float(-2.5)
    );
}

#[test]
fn writes_invert_the_read_normalisation_for_every_byte_order() {
    for order in [
        WireOrder::Abcd,
        WireOrder::Badc,
        WireOrder::Cdab,
        WireOrder::Dcba,
    ] {
        let mut t = spec("D300", WireType::Int32);
        t.byte_order = order;
        let mut f = spec("D310", WireType::Float64);
        f.byte_order = order;
        let mut name = string("D320", 4);
        name.byte_order = order;
        let s = q_l(alloc::vec![t, f, name]);
        let engine_order = tag_byte_order(&s.tags[0].spec);
        let cases: [(u32, Value, DataType, Number); 3] = [
            (
                0,
                Value::Int(-123_456),
                DataType::Int32,
                Number::Int(-123_456),
            ),
            (
                1,
                Value::Float(1.25e10),
                DataType::Float64,
                Number::Float(1.25e10),
            ),
            (
                2,
                Value::Text("AbC".into()),
                DataType::String(4),
                Number::Text("AbC".into()),
            ),
        ];
        for (index, value, data_type, expected) in cases {
            let frame = s.encode_write(index, value).expect("encodes");
            let words = u16::from_le_bytes([frame[19], frame[20]]) as usize;
            let wire = &frame[21..];
            assert_eq!(wire.len(), words * 2);
            // Read the same words back through the codec and the pipeline.
            let reads = s.plan(alloc::vec![index]);
            let id = reads[0].id;
            s.encode_read(id).expect("encodes");
            let batch = s.parse_read(id, answer(0, wire), 0).expect("parses");
            assert_eq!(
                pipeline(raw(&batch, index), data_type, engine_order),
                expected,
                "{order:?}"
            );
        }
    }
    // ABCD (the PLC's own order) writes a 32-bit value low word first, low byte first.
    let s = q_l(alloc::vec![spec("D0", WireType::Uint32)]);
    let frame = s.encode_write(0, Value::Int(0x0102_0304)).expect("encodes");
    assert_eq!(frame[21..], [0x04, 0x03, 0x02, 0x01]);
    let mut check = [0x0A, 0x0B, 0x0C, 0x0D];
    reorder(&mut check, ByteOrder::Abcd);
    assert_eq!(check, [0x0A, 0x0B, 0x0C, 0x0D]);
}

#[test]
fn bit_responses_are_nibbles_high_first() {
    let s = q_l(specs("M10 BOOL, M11 BOOL, M13 BOOL, M14 BOOL"));
    let (id, frame) = read_one(&s);
    assert_eq!(frame[15..], [10, 0, 0, 0x90, 5, 0]);
    let batch = s
        .parse_read(id, answer(0, &[0x10, 0x01, 0x10]), 0)
        .expect("parses");
    assert_eq!(
        (0..4).map(|i| boolean(&batch, i)).collect::<Vec<_>>(),
        [true, false, true, true]
    );
    assert!(batch.bytes.is_empty());
    s.encode_read(id).expect("encodes");
    let short = s.parse_read(id, answer(0, &[0x10, 0x01]), 0);
    assert!(matches!(short, Err(FrameError::Malformed(_))), "{short:?}");
}

#[test]
fn end_codes_are_device_errors_and_split_merged_reads() {
    let s = q_l(specs("D100 INT16, D101 INT16, D110 INT32"));
    let (id, _) = read_one(&s);
    let error = s.parse_read(id, answer(0xC05C, &[0; 9]), 0);
    let Err(FrameError::Device(error)) = error else {
        panic!("device error expected, got {error:?}");
    };
    assert_eq!(error.code, 0xC05C);
    assert!(error.message.contains("0xC05C"), "{}", error.message);
    assert!(error.message.contains("D100..D111"), "{}", error.message);
    let retried: Vec<Vec<u32>> = error.retry.iter().map(|r| r.tags.clone()).collect();
    assert_eq!(retried, [alloc::vec![0], alloc::vec![1, 2]]);
    // The split is kept for later rounds.
    let again = s.plan(alloc::vec![0, 1, 2]);
    assert_eq!(again.len(), 2);
    // A retry that fails again on a single tag is final.
    let single = error.retry[0].id;
    s.encode_read(single).expect("encodes");
    let Err(FrameError::Device(last)) = s.parse_read(single, answer(0xC056, &[]), 0) else {
        panic!("device error expected");
    };
    assert!(last.retry.is_empty());
    // A code that does not blame the devices is not retried.
    let (id, _) = (again[1].id, s.encode_read(again[1].id).expect("encodes"));
    let Err(FrameError::Device(busy)) = s.parse_read(id, answer(0xC059, &[]), 0) else {
        panic!("device error expected");
    };
    assert!(busy.retry.is_empty());
}

#[test]
fn malformed_and_out_of_turn_responses() {
    let s = q_l(specs("D100 INT16, D101 INT16"));
    let (id, _) = read_one(&s);
    let good = answer(0, &[1, 0, 2, 0]);
    assert!(matches!(
        s.parse_read(id + 1, good.clone(), 0),
        Err(FrameError::Malformed(_))
    ));
    assert!(
        matches!(
            s.parse_read(id, good.clone(), 0),
            Err(FrameError::Malformed(_))
        ),
        "nothing in flight"
    );
    for bad in [
        answer(0, &[1, 0, 2]),
        answer(0, &[1, 0, 2, 0, 3, 0]),
        good[..good.len() - 1].to_vec(),
        [&good[..], &[0]].concat(),
        Vec::new(),
    ] {
        s.encode_read(id).expect("encodes");
        assert!(matches!(
            s.parse_read(id, bad, 0),
            Err(FrameError::Malformed(_))
        ));
    }
    s.encode_read(id).expect("encodes");
    s.reset();
    assert!(s.parse_read(id, good, 0).is_err(), "reset forgets the read");
    assert_eq!(
        s.frame_length(answer(0, &[1, 0, 2, 0])[..9].to_vec()).ok(),
        Some(15)
    );
    assert!(
        s.frame_length(alloc::vec![0x50, 0, 0, 0xFF, 0xFF, 3, 0, 2, 0])
            .is_err()
    );
    assert!(s.check_handshake(0, Vec::new()).is_err());
}

#[test]
fn write_answers() {
    let s = q_l(alloc::vec![spec("D100", WireType::Int16)]);
    assert!(s.check_write(answer(0, &[])).is_err(), "no write in flight");
    s.encode_write(0, Value::Int(1)).expect("encodes");
    assert!(s.check_write(answer(0, &[])).is_ok());
    s.encode_write(0, Value::Int(1)).expect("encodes");
    let Err(FrameError::Device(error)) = s.check_write(answer(0xC056, &[0; 9])) else {
        panic!("device error expected");
    };
    assert_eq!(error.code, 0xC056);
    assert!(error.message.contains("0xC056"));
    s.encode_write(0, Value::Int(1)).expect("encodes");
    assert!(matches!(
        s.check_write(answer(0, &[1, 2])),
        Err(FrameError::Malformed(_))
    ));

    let e4 = session(
        &[text("frameType", "FRAME_4E")],
        alloc::vec![spec("D100", WireType::Int16)],
    );
    let frame = e4.encode_write(0, Value::Int(1)).expect("encodes");
    assert!(e4.check_write(reply(&frame, 0, &[])).is_ok());
    e4.encode_write(0, Value::Int(1)).expect("encodes");
    assert!(
        e4.check_write(reply(&frame, 0, &[])).is_err(),
        "stale serial number"
    );
}

#[test]
fn plans_merge_per_device_and_are_cached() {
    let s = q_l(specs(
        "D0 INT16, D10 INT32, D100 INT16, M0 BOOL, D12.4 BOOL, X0 BOOL",
    ));
    let reads = s.plan(alloc::vec![0, 1, 2, 3, 4, 5]);
    let tags: Vec<Vec<u32>> = reads.iter().map(|r| r.tags.clone()).collect();
    assert_eq!(
        tags,
        [
            alloc::vec![3],
            alloc::vec![5],
            alloc::vec![0, 1, 4],
            alloc::vec![2]
        ]
    );
    let again = s.plan(alloc::vec![0, 1, 2, 3, 4, 5]);
    assert_eq!(
        reads.iter().map(|r| r.id).collect::<Vec<_>>(),
        again.iter().map(|r| r.id).collect::<Vec<_>>()
    );
}

#[test]
fn random_and_mutated_frames_never_panic() {
    let tags = specs(
        "D0 INT16, D2 FLOAT64, D8.15 BOOL, D20 STRING(5), M0 BOOL, M7 BOOL, X1F BOOL, W10 UINT32",
    );
    let e4 = [text("frameType", "FRAME_4E"), text("series", "IQ_R")];
    for s in [q_l(tags.clone()), session(&e4, tags)] {
        let reached = fuzz::run(&s, &Plc, 8, 0x9E37_79B9_7F4A_7C15, 10_000);
        assert!(reached.reads > 500 && reached.writes > 50, "{reached:?}");
    }
}
