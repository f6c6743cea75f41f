//! RTU framing: the CRC, answer sizes from their first bytes, byte-exact reads and
//! writes, and every way an answer can be wrong (CRC, truncation, another unit).
//! The session logic itself is Modbus TCP's, tested there.

use alloc::vec;
use alloc::vec::Vec;

use super::*;
use sluice::dataflow::types::{DataType as Wit, Setting, SettingValue as Sv, Span, TagSpec, Value};
use sluice_guest::fuzz::{self, Peer, Rng};

sluice_guest::codec_test_kit!(ModbusSession);

#[path = "../../modbus_tcp/src/shared_tests.rs"]
mod shared;
use shared::{full_read_answer, read_all_tags};

fn session(settings: &[Setting], tags: Vec<TagSpec>) -> ModbusSession {
    ModbusSession::create(settings, tags).expect("valid configuration")
}

/// A Modbus RTU server answering every request in full.
struct Server;

impl Peer for Server {
    fn read(&self, sent: &[u8], rng: &mut Rng) -> Vec<u8> {
        // Unit id, then the PDU.
        frame::build(0, sent[0], &full_read_answer(&sent[1..], rng))
    }

    fn write(&self, sent: &[u8]) -> Vec<u8> {
        frame::build(0, sent[0], &sent[1..6])
    }
}

fn malformed<T: core::fmt::Debug>(result: Result<T, FrameError>) -> String {
    match result {
        Err(FrameError::Malformed(message)) => message,
        other => panic!("expected a malformed answer, got {other:?}"),
    }
}

#[test]
fn the_crc_is_modbus_crc16_low_byte_first() {
    // The specification's example: read 10 holding registers of unit 1.
    let frame = frame::build(0, 1, &[0x03, 0x00, 0x00, 0x00, 0x0A]);
    assert_eq!(frame, [0x01, 0x03, 0x00, 0x00, 0x00, 0x0A, 0xC5, 0xCD]);
    assert_eq!(frame::crc16(b"123456789"), 0x4B37);
}

#[test]
fn an_answer_is_sized_from_its_first_three_bytes() {
    assert_eq!(frame::total_len(&[1, 0x03, 20]), Ok(25));
    assert_eq!(frame::total_len(&[1, 0x01, 2]), Ok(7));
    assert_eq!(frame::total_len(&[1, 0x83, 2]), Ok(5));
    assert_eq!(frame::total_len(&[1, 0x10, 0]), Ok(8));
    assert_eq!(frame::total_len(&[1, 0x05, 0]), Ok(8));
    assert!(frame::total_len(&[1, 0x2B, 0]).is_err(), "not asked for");
    assert!(frame::total_len(&[1, 0x03]).is_err(), "short header");
    let s = session(&[], vec![spec("40001", Wit::Int16)]);
    assert_eq!(s.header_len(), 3);
    assert_eq!(s.frame_length(vec![1, 0x04, 4]), Ok(FrameSize::Length(9)));
}

#[test]
fn unit_ids_are_1_to_247() {
    for bad in [0, 248] {
        let errors = ModbusSession::create(&[setting("unitId", Sv::Int(bad))], Vec::new())
            .err()
            .expect("refused");
        assert_eq!(errors[0].key, "unitId");
        assert_eq!(
            errors[0].message,
            "setting `unitId` must be an integer from 1 to 247, got an integer"
        );
    }
    assert_eq!(
        session(&[setting("unitId", Sv::Int(247))], Vec::new()).unit,
        247
    );
}

#[test]
fn reads_are_byte_exact() {
    let s = session(
        &[setting("unitId", Sv::Int(7))],
        vec![spec("40001", Wit::Int16), spec("40002", Wit::Float32)],
    );
    let (id, sent) = read_all_tags(&s);
    assert_eq!(sent[..6], [7, 0x03, 0, 0, 0, 3]);
    assert_eq!(sent[6..], frame::crc16(&sent[..6]).to_le_bytes());
    let data = [0xFF, 0x38, 0x3F, 0xC0, 0, 0];
    let mut pdu = vec![0x03, 6];
    pdu.extend(data);
    let batch = s
        .parse_read(id, frame::build(0, 7, &pdu), 5)
        .expect("parses");
    let values: Vec<(u32, Value)> = batch_samples(&batch)
        .iter()
        .map(|x| (x.tag, x.value.clone()))
        .collect();
    assert_eq!(
        values,
        [
            (0, Value::Raw(Span { start: 0, len: 2 })),
            (1, Value::Raw(Span { start: 2, len: 4 })),
        ]
    );
    assert_eq!(batch.bytes, data);
}

#[test]
fn a_bad_crc_a_short_frame_or_another_unit_is_malformed() {
    let s = session(
        &[setting("unitId", Sv::Int(2))],
        vec![spec("40001", Wit::Int16)],
    );
    let (id, _) = read_all_tags(&s);
    // Each answer is to a request of its own: a refused answer ends its request.
    let parse = |frame: Vec<u8>| {
        s.encode_read(id).expect("encodes");
        s.parse_read(id, frame, 0)
    };
    let good = frame::build(0, 2, &[0x03, 2, 0, 9]);
    let mut corrupt = good.clone();
    corrupt[3] ^= 0x40;
    assert!(malformed(parse(corrupt)).starts_with("CRC "));
    let other = frame::build(0, 3, &[0x03, 2, 0, 9]);
    assert_eq!(malformed(parse(other)), "an answer from unit 3, expected 2");
    assert!(malformed(parse(good[..4].to_vec())).contains("too short"));
    let batch = parse(good).expect("the good answer still parses");
    assert_eq!(batch.bytes, [0, 9]);
    // An exception is the device's answer, not a broken frame.
    match parse(frame::build(0, 2, &[0x83, 2])) {
        Err(FrameError::Device(error)) => assert_eq!(error.code, 2),
        other => panic!("expected a device error, got {other:?}"),
    }
}

#[test]
fn writes_are_byte_exact_and_checked_against_their_echo() {
    let s = session(
        &[],
        vec![spec("40001", Wit::Int16), spec("00005", Wit::Bool)],
    );
    let sent = s.encode_write(0, Value::Int(-2)).expect("FC06");
    assert_eq!(sent[..6], [1, 0x06, 0, 0, 0xFF, 0xFE]);
    assert_eq!(s.check_write(sent.clone()), Ok(()));
    let sent = s.encode_write(1, Value::Boolean(true)).expect("FC05");
    assert_eq!(sent[..6], [1, 0x05, 0, 4, 0xFF, 0]);
    let mut echo = sent.clone();
    echo[7] ^= 1;
    assert!(malformed(s.check_write(echo)).starts_with("CRC "));
}
