//! Session tests: settings, byte-exact frames, exceptions and the splits they
//! cause, write echoes, robustness.

use alloc::vec;

use alloc::vec::Vec;

use super::*;
use sluice::dataflow::types::{DataType as Wit, SettingValue as Sv};
use sluice::dataflow::types::{Setting, Span, TagSpec, Value};
use sluice_guest::columns::Quality;
use sluice_guest::fuzz::{self, Peer, Rng};

sluice_guest::codec_test_kit!(ModbusSession);

#[path = "shared_tests.rs"]
mod shared;
use shared::{full_read_answer, read_all_tags};

fn session(settings: &[Setting], tags: Vec<TagSpec>) -> ModbusSession {
    ModbusSession::create(settings, tags).expect("valid configuration")
}

fn tid(sent: &[u8]) -> u16 {
    u16::from_be_bytes([sent[0], sent[1]])
}

/// A Modbus server answering every request in full.
struct Server;

impl Peer for Server {
    fn read(&self, sent: &[u8], rng: &mut Rng) -> Vec<u8> {
        // MBAP header (7 bytes: the unit id last), then the PDU.
        frame::build(tid(sent), sent[6], &full_read_answer(&sent[7..], rng))
    }

    fn write(&self, sent: &[u8]) -> Vec<u8> {
        frame::build(tid(sent), sent[6], &sent[7..12])
    }
}

fn device_error_of<T: core::fmt::Debug>(result: Result<T, FrameError>) -> DeviceError {
    match result {
        Err(FrameError::Device(error)) => error,
        other => panic!("expected a device error, got {other:?}"),
    }
}

#[test]
fn settings_and_tags_are_checked() {
    let errors = ModbusSession::create(
        &[
            setting("unitId", Sv::Int(256)),
            setting("maxRegisters", Sv::Int(0)),
            setting("writeMultiple", Sv::Int(1)),
            setting("slot", Sv::Int(1)),
            setting("byteOrder", Sv::Text("CDAB".into())),
        ],
        specs("40001 INT16, 00001 INT16, 40001.3 INT16, 465536 INT32, 4x INT16"),
    )
    .err()
    .expect("errors");
    let settings: Vec<&str> = errors
        .iter()
        .filter(|e| e.tag.is_none())
        .map(|e| e.key.as_str())
        .collect();
    assert_eq!(
        settings,
        ["unitId", "maxRegisters", "writeMultiple", "slot"]
    );
    let tags: Vec<(u32, &str)> = errors
        .iter()
        .filter_map(|e| Some((e.tag?, e.key.as_str())))
        .collect();
    assert_eq!(
        tags,
        [
            (1, "dataType"),
            (2, "dataType"),
            (3, "address"),
            (4, "address")
        ]
    );
    assert_eq!(
        errors[1].message,
        "setting `maxRegisters` must be an integer from 1 to 125, got an integer"
    );
    let small = ModbusSession::create(
        &[setting("maxRegisters", Sv::Int(1))],
        vec![spec("40001", Wit::Int32)],
    );
    assert_eq!(small.err().map(|e| e[0].key.clone()), Some("length".into()));
    let s = session(&[], Vec::new());
    assert_eq!((s.unit, s.header_len()), (1, 6));
    assert!(s.handshake(0).is_none());
    assert!(s.check_handshake(0, Vec::new()).is_err());
}

#[test]
fn reads_are_byte_exact() {
    let s = session(
        &[setting("unitId", Sv::Int(7))],
        vec![
            spec("40001", Wit::Int16),
            spec("40002", Wit::Float32),
            spec("40010.3", Wit::Bool),
        ],
    );
    let (id, frame) = read_all_tags(&s);
    assert_eq!(frame, [0, 1, 0, 0, 0, 6, 7, 0x03, 0, 0, 0, 10]);
    let mut data = vec![0u8; 20];
    data[..6].copy_from_slice(&[0xFF, 0x38, 0x3F, 0xC0, 0, 0]);
    data[19] = 0x08;
    let mut pdu = vec![0x03, 20];
    pdu.extend(&data);
    let batch = s
        .parse_read(id, frame::build(1, 7, &pdu), 5)
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
            (2, Value::Boolean(true)),
        ]
    );
    assert_eq!(batch.bytes, data);
    assert!(
        batch_samples(&batch)
            .iter()
            .all(|x| x.ts_ms == 5 && x.quality == Quality::Good)
    );
    let coils = session(
        &[],
        vec![spec("00001", Wit::Bool), spec("00010", Wit::Bool)],
    );
    let (id, frame) = read_all_tags(&coils);
    assert_eq!(frame[6..], [1, 0x01, 0, 0, 0, 10]);
    let batch = coils
        .parse_read(id, frame::build(1, 1, &[0x01, 2, 0x01, 0x02]), 0)
        .expect("parses");
    let bits: Vec<Value> = batch_samples(&batch)
        .iter()
        .map(|x| x.value.clone())
        .collect();
    assert_eq!(bits, [Value::Boolean(true), Value::Boolean(true)]);
    assert!(batch.bytes.is_empty());
}

#[test]
fn exceptions_split_merged_reads_for_later_rounds() {
    let tags = ["40001", "40002", "40003", "40004"].map(|a| spec(a, Wit::Int16));
    let s = session(&[], tags.to_vec());
    let (id, frame) = read_all_tags(&s);
    let error = device_error_of(s.parse_read(id, frame::build(tid(&frame), 1, &[0x83, 2]), 0));
    assert_eq!(error.code, 2);
    assert_eq!(
        error.message,
        "exception 2 (illegal data address) for holding registers 0..4"
    );
    let retried: Vec<Vec<u32>> = error.retry.iter().map(|r| r.tags.clone()).collect();
    assert_eq!(retried, [vec![0, 1], vec![2, 3]]);
    let sent = s.encode_read(error.retry[1].id).expect("encodes");
    assert_eq!(sent[8..], [0, 2, 0, 2], "registers 2 and 3");
    assert_eq!(s.plan(vec![0, 1, 2, 3]).len(), 2, "the split is kept");
    let busy = device_error_of(s.parse_read(
        error.retry[1].id,
        frame::build(tid(&sent), 1, &[0x83, 6]),
        0,
    ));
    assert!(busy.retry.is_empty(), "a busy server is not split");
    // An exception without its code is malformed, not a panic.
    let sent = s.encode_read(error.retry[0].id).expect("encodes");
    let short = s.parse_read(error.retry[0].id, frame::build(tid(&sent), 1, &[0x83]), 0);
    assert!(matches!(short, Err(FrameError::Malformed(_))), "{short:?}");
}

#[test]
fn writes_are_byte_exact_and_checked_against_their_echo() {
    let tags = vec![
        spec("40001", Wit::Int16),
        spec("40003", Wit::Int32),
        spec("00005", Wit::Bool),
    ];
    let s = session(&[], tags.clone());
    let frame = s.encode_write(0, Value::Int(-2)).expect("FC06");
    assert_eq!(frame, [0, 1, 0, 0, 0, 6, 1, 0x06, 0, 0, 0xFF, 0xFE]);
    assert_eq!(s.check_write(frame.clone()), Ok(()));
    assert!(s.check_write(frame).is_err(), "nothing in flight");
    let frame = s.encode_write(1, Value::Int(0x0102_0304)).expect("FC16");
    assert_eq!(frame[7..], [0x10, 0, 2, 0, 2, 4, 1, 2, 3, 4]);
    let echo = frame::build(tid(&frame), 1, &frame[7..12]);
    assert_eq!(s.check_write(echo), Ok(()));
    let frame = s.encode_write(2, Value::Boolean(true)).expect("FC05");
    assert_eq!(frame[7..], [0x05, 0, 4, 0xFF, 0]);
    let wrong = frame::build(tid(&frame), 1, &[0x05, 0, 4, 0, 0]);
    assert!(matches!(
        s.check_write(wrong),
        Err(FrameError::Malformed(_))
    ));
    let frame = s.encode_write(2, Value::Int(0)).expect("FC05");
    let refused = device_error_of(s.check_write(frame::build(tid(&frame), 1, &[0x85, 4])));
    assert_eq!((refused.code, refused.retry.len()), (4, 0));
    let multiple = session(&[setting("writeMultiple", Sv::Boolean(true))], tags);
    let frame = multiple
        .encode_write(2, Value::Boolean(true))
        .expect("FC15");
    assert_eq!(frame[7..], [0x0F, 0, 4, 0, 1, 1, 1]);
    let frame = multiple.encode_write(0, Value::Int(5)).expect("FC16");
    assert_eq!(frame[7..], [0x10, 0, 0, 0, 1, 2, 0, 5]);
    assert_eq!(device_error_of(s.encode_write(2, Value::Int(2))).code, 0);
    assert!(matches!(
        s.encode_write(3, Value::Int(1)),
        Err(FrameError::Malformed(_))
    ));
}

#[test]
fn arrays_read_and_write_their_whole_extent() {
    use crate::sluice::dataflow::types::Element;
    let s = session(
        &[],
        specs("40001 FLOAT32[2], 00001 BOOL[10], 40010 INT16[3]"),
    );
    let plans = s.plan(vec![0, 1, 2]);
    let frames: Vec<Vec<u8>> = plans
        .iter()
        .map(|p| s.encode_read(p.id).expect("encodes")[7..].to_vec())
        .collect();
    assert_eq!(
        frames,
        [vec![0x01, 0, 0, 0, 10], vec![0x03, 0, 0, 0, 12]],
        "10 coils; registers 0..12 for four and three registers"
    );
    let coils = s.encode_read(plans[0].id).expect("encodes");
    let batch = s
        .parse_read(
            plans[0].id,
            frame::build(tid(&coils), 1, &[0x01, 2, 0b1000_0101, 0b10]),
            0,
        )
        .expect("parses");
    let on = |bits: &[bool]| Value::Array(bits.iter().map(|b| Element::Boolean(*b)).collect());
    let expected = on(&[
        true, false, true, false, false, false, false, true, false, true,
    ]);
    assert_eq!(batch_samples(&batch)[0].value, expected);
    let short = s.encode_read(plans[0].id).expect("encodes");
    let truncated = s.parse_read(plans[0].id, frame::build(tid(&short), 1, &[0x01, 1, 0]), 0);
    assert!(
        truncated.is_err(),
        "fewer coils than asked for is malformed"
    );

    let registers = s.encode_read(plans[1].id).expect("encodes");
    let mut pdu = vec![0x03, 24];
    pdu.extend([0u8; 24]);
    let batch = s
        .parse_read(plans[1].id, frame::build(tid(&registers), 1, &pdu), 0)
        .expect("parses");
    let spans: Vec<Value> = batch_samples(&batch)
        .iter()
        .map(|x| x.value.clone())
        .collect();
    assert_eq!(
        spans,
        [
            Value::Raw(Span { start: 0, len: 8 }),
            Value::Raw(Span { start: 18, len: 6 })
        ],
        "an array's raw bytes are its whole extent"
    );

    let ints = Value::Array(vec![Element::Int(1), Element::Int(-1), Element::Float(2.0)]);
    let frame = s.encode_write(2, ints).expect("FC16");
    assert_eq!(frame[7..], [0x10, 0, 9, 0, 3, 6, 0, 1, 0xFF, 0xFF, 0, 2]);
    let frame = s
        .encode_write(
            1,
            on(&[
                true, true, false, false, false, false, false, false, false, true,
            ]),
        )
        .expect("FC15");
    assert_eq!(frame[7..], [0x0F, 0, 0, 0, 10, 2, 0b11, 0b10]);
    let wrong_length = device_error_of(s.encode_write(2, Value::Array(vec![Element::Int(1)])));
    assert_eq!(
        wrong_length.message,
        "the tag is an array of 3 values, the write has 1"
    );
    let scalar = device_error_of(s.encode_write(2, Value::Int(1)));
    assert_eq!(
        scalar.message,
        "the tag is an array of 3 values: write an array"
    );
    let too_big = device_error_of(s.encode_write(0, Value::Array(vec![Element::Float(1e300); 2])));
    assert_eq!(too_big.code, 0);
}

#[test]
fn a_bool_in_a_whole_register_is_refused_with_a_bit_suggested() {
    let errors = ModbusSession::create(
        &[],
        specs("40001 BOOL, hr:4 BOOL[3], 40002.0 BOOL, 00001 BOOL, 30001 BOOL"),
    )
    .err()
    .expect("refused");
    let messages: Vec<(Option<u32>, &str, String)> = errors
        .iter()
        .map(|e| (e.tag, e.key.as_str(), e.message.clone()))
        .collect();
    let needs_bit = |written: &str| {
        format!(
            "a BOOL in a register needs one of its bits: `{written}.0` is the least significant \
             (or read the whole register as UINT16)"
        )
    };
    assert_eq!(
        messages,
        [
            (Some(0), "dataType", needs_bit("40001")),
            (Some(1), "dataType", needs_bit("hr:4")),
            (Some(4), "dataType", needs_bit("30001")),
        ]
    );
}

#[test]
fn arrays_are_checked_against_their_area_and_the_request_limits() {
    let errors = ModbusSession::create(
        &[setting("maxRegisters", Sv::Int(10))],
        specs("40001 FLOAT64[3], 40001.2 BOOL[4], 00001 BOOL[2001], 40001 INT16[10]"),
    )
    .err()
    .expect("refused");
    let messages: Vec<(Option<u32>, String)> =
        errors.into_iter().map(|e| (e.tag, e.message)).collect();
    assert_eq!(
        messages,
        [
            (
                Some(0),
                "the value needs 12 registers, more than one request may read (10)".into()
            ),
            (
                Some(1),
                "an array cannot start at a register bit (`.N`): give the register, or coils"
                    .into()
            ),
            (
                Some(2),
                "the value needs 2001 bits, more than one request may read (2000)".into()
            ),
        ]
    );
}
