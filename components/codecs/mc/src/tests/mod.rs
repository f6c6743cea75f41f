//! Session-level tests: settings, byte-exact frames, parsing, errors, robustness.

use super::*;
use sluice::dataflow::types::{ByteOrder as WireOrder, DataType as WireType, SettingValue as Sv};
use sluice_guest::columns::Quality;
use sluice_guest::fuzz::{self, Peer, Rng};
use sluice_guest::numeric::{ByteOrder, Number, decode, reorder};

mod frame_1e;
mod reads;
mod writes;

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

/// Series Q/L, monitoring timer 4 (1 s): the frames below are written with it.
fn q_l(tags: Vec<TagSpec>) -> McSession {
    session(&[int("monitorTimer", 4)], tags)
}

fn iq_r(tags: Vec<TagSpec>) -> McSession {
    session(&[text("series", "IQ_R"), int("monitorTimer", 4)], tags)
}

/// Series A over the 1E frame, monitoring timer 10.
fn a_1e(tags: Vec<TagSpec>) -> McSession {
    session(&[text("series", "A"), text("frameType", "FRAME_1E")], tags)
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

/// A PLC answering every request in full, in the request's frame.
struct Plc;

/// Whether `sent` is a 1E request (a command 0-3 to PC `FF`).
fn is_1e(sent: &[u8]) -> bool {
    sent.len() >= 12 && sent[0] <= 3 && sent[1] == 0xFF
}

impl Peer for Plc {
    fn read(&self, sent: &[u8], rng: &mut Rng) -> Vec<u8> {
        if is_1e(sent) {
            let points = if sent[10] == 0 {
                256
            } else {
                usize::from(sent[10])
            };
            let len = if sent[0] == 0 {
                points.div_ceil(2)
            } else {
                points * 2
            };
            return [&[sent[0] | 0x80, 0][..], &rng.bytes(len)].concat();
        }
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
        if is_1e(sent) {
            return alloc::vec![sent[0] | 0x80, 0];
        }
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
fn sample_of(batch: &Batch, tag: u32) -> Sample {
    match batch_samples(batch).into_iter().find(|s| s.tag == tag) {
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
    let s = session(&[], alloc::vec![spec("D100", WireType::Int16)]);
    assert_eq!(s.config.frame, FrameType::E3);
    assert!(!s.config.wide);
    assert_eq!(s.config.timer, 10, "2.5 s, as the seed's default");
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

    let s = a_1e(Vec::new());
    assert_eq!((s.config.frame, s.header_len()), (FrameType::E1, 2));
    let errs = errors(
        &[
            text("frameType", "FRAME_2E"),
            int("monitorTimer", 0),
            int("unitId", 1),
            int("series", 3),
            text("series", "A"),
        ],
        Vec::new(),
    );
    let keys: Vec<&str> = errs.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        keys,
        ["frameType", "monitorTimer", "unitId", "series", "series"]
    );
    assert!(
        errs[0].message.contains("FRAME_1E, FRAME_3E or FRAME_4E"),
        "{}",
        errs[0].message
    );
    assert!(
        errs[4]
            .message
            .contains("series A speaks only the 1E frame"),
        "{}",
        errs[4].message
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
    let e1 = [text("frameType", "FRAME_1E"), text("series", "A")];
    for s in [
        q_l(tags.clone()),
        session(&e4, tags.clone()),
        session(&e1, tags),
    ] {
        let reached = fuzz::run(&s, &Plc, 8, 0x9E37_79B9_7F4A_7C15, 10_000);
        assert!(reached.reads > 500 && reached.writes > 50, "{reached:?}");
    }
}
