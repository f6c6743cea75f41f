//! Session tests: handshake, planning, reads and writes against frames built from
//! the protocol's layout, and robustness against arbitrary bytes.

use alloc::vec;

use super::*;
use sluice::dataflow::types::{ByteOrder, DataType as Wit, SettingValue as WitValue, Span};
use sluice_guest::columns::Quality;
use sluice_guest::fuzz::{self, Peer, Rng};

mod reads;

sluice_guest::codec_test_kit!(S7Session);

fn settings(plc: &str, rack: i64, slot: i64) -> Vec<Setting> {
    vec![
        setting("plcType", WitValue::Text(plc.into())),
        setting("rack", WitValue::Int(rack)),
        setting("slot", WitValue::Int(slot)),
        setting("byteOrder", WitValue::Text("ABCD".into())),
    ]
}

fn session(tags: Vec<TagSpec>) -> S7Session {
    S7Session::create(&settings("S1200", 0, 1), tags).expect("valid configuration")
}

/// An Ack_Data frame.
fn ack(pdu_ref: u16, error: u16, param: &[u8], data: &[u8]) -> Vec<u8> {
    let mut pdu = vec![0x32, 0x03, 0, 0];
    pdu.extend_from_slice(&pdu_ref.to_be_bytes());
    pdu.extend_from_slice(&(param.len() as u16).to_be_bytes());
    pdu.extend_from_slice(&(data.len() as u16).to_be_bytes());
    pdu.extend_from_slice(&error.to_be_bytes());
    pdu.extend_from_slice(param);
    pdu.extend_from_slice(data);
    frame::data(&pdu)
}

/// The PDU reference of a job frame the session sent.
fn sent_ref(frame: &[u8]) -> u16 {
    u16::from_be_bytes([frame[11], frame[12]])
}

const CC: [u8; 22] = [
    0x03, 0x00, 0x00, 0x16, 0x11, 0xD0, 0x00, 0x01, 0x00, 0x01, 0x00, 0xC0, 0x01, 0x0A, 0xC1, 0x02,
    0x01, 0x00, 0xC2, 0x02, 0x01, 0x01,
];

fn setup_answer(pdu_ref: u16, pdu: u16) -> Vec<u8> {
    let [p0, p1] = pdu.to_be_bytes();
    ack(
        pdu_ref,
        0,
        &[0xF0, 0x00, 0x00, 0x01, 0x00, 0x01, p0, p1],
        &[],
    )
}

/// Runs the handshake, the PLC granting `pdu` bytes.
fn connect(session: &S7Session, pdu: u16) {
    session.handshake(0).expect("step 0");
    session.check_handshake(0, CC.to_vec()).expect("confirmed");
    let setup = session.handshake(1).expect("step 1");
    session
        .check_handshake(1, setup_answer(sent_ref(&setup), pdu))
        .expect("negotiated");
    assert_eq!(session.handshake(2), None);
    session.reset();
}

fn device_code(result: Result<impl core::fmt::Debug, FrameError>) -> u32 {
    match result {
        Err(FrameError::Device(error)) => error.code,
        other => panic!("expected a device error, got {other:?}"),
    }
}

fn is_malformed<T>(result: &Result<T, FrameError>) -> bool {
    matches!(result, Err(FrameError::Malformed(_)))
}

#[test]
fn handshake_frames_are_byte_exact() {
    let s = session(vec![spec("DB1.DBW0", Wit::Int16)]);
    assert_eq!(
        s.handshake(0).unwrap(),
        [
            0x03, 0x00, 0x00, 0x16, 0x11, 0xE0, 0x00, 0x00, 0x00, 0x01, 0x00, 0xC0, 0x01, 0x0A,
            0xC1, 0x02, 0x01, 0x00, 0xC2, 0x02, 0x01, 0x01
        ]
    );
    assert_eq!(
        s.handshake(1).unwrap(),
        [
            0x03, 0x00, 0x00, 0x19, 0x02, 0xF0, 0x80, 0x32, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00,
            0x08, 0x00, 0x00, 0xF0, 0x00, 0x00, 0x01, 0x00, 0x01, 0x03, 0xC0
        ]
    );
    assert_eq!(s.handshake(2), None);
    let s300 = S7Session::create(&settings("S300", 0, 2), Vec::new()).unwrap();
    assert_eq!(
        s300.handshake(0).unwrap()[14..],
        [0xC1, 0x02, 0x01, 0x00, 0xC2, 0x02, 0x01, 0x02]
    );
    let s400 = S7Session::create(&settings("S400", 1, 3), Vec::new()).unwrap();
    assert_eq!(s400.handshake(0).unwrap()[20..], [0x01, 0x23]);
    let s200 = S7Session::create(&settings("S200", 0, 1), Vec::new()).unwrap();
    assert_eq!(
        s200.handshake(0).unwrap()[14..],
        [0xC1, 0x02, 0x4D, 0x57, 0xC2, 0x02, 0x4D, 0x57]
    );
    assert_eq!(s.header_len(), 4);
    assert_eq!(
        s.frame_length(vec![3, 0, 0, 0x16]),
        Ok(FrameSize::Length(22))
    );
    assert!(is_malformed(&s.frame_length(vec![4, 0, 0, 0x16])));
    assert!(is_malformed(&s.frame_length(vec![3, 0, 0x7F, 0xFF])));
}

#[test]
fn connection_confirm_and_refusal() {
    let s = session(Vec::new());
    s.handshake(0);
    assert_eq!(s.check_handshake(0, CC.to_vec()), Ok(()));
    let disconnect = vec![3, 0, 0, 11, 6, 0x80, 0, 1, 0, 0, 0x81];
    assert_eq!(device_code(s.check_handshake(0, disconnect)), 0x81);
    assert!(is_malformed(
        &s.check_handshake(0, vec![3, 0, 0, 7, 2, 0xF0, 0x80])
    ));
    assert!(is_malformed(&s.check_handshake(0, vec![1, 2, 3])));
    assert!(is_malformed(&s.check_handshake(3, CC.to_vec())));
}

#[test]
fn setup_communication_negotiates_the_pdu_size() {
    let s = session(Vec::new());
    for (granted, used) in [(480, 480), (240, 240), (1920, 960), (960, 960)] {
        connect(&s, granted);
        assert_eq!(s.state.borrow().pdu_size, used);
    }
    s.handshake(0);
    assert_eq!(
        s.state.borrow().pdu_size,
        DEFAULT_PDU,
        "a new connection starts over"
    );
    let setup = s.handshake(1).unwrap();
    let refused = ack(sent_ref(&setup), 0x8104, &[], &[]);
    assert_eq!(device_code(s.check_handshake(1, refused)), 0x8104);
    let setup = s.handshake(1).unwrap();
    assert!(is_malformed(
        &s.check_handshake(1, setup_answer(sent_ref(&setup) + 1, 480))
    ));
    let setup = s.handshake(1).unwrap();
    assert!(is_malformed(
        &s.check_handshake(1, setup_answer(sent_ref(&setup), 32))
    ));
    assert!(
        is_malformed(&s.check_handshake(1, setup_answer(1, 480))),
        "nothing in flight"
    );
}

#[test]
fn writes_are_byte_exact() {
    let mut cdab = spec("MD34", Wit::Float32);
    cdab.byte_order = ByteOrder::Cdab;
    let s = session(vec![
        spec("DB1.DBX6.0", Wit::Bool),
        spec("DB1.DBW4", Wit::Int16),
        spec("MD30", Wit::Float32),
        cdab,
        string("DB1.DBB20", 3),
    ]);
    connect(&s, 240);
    let frame = s.encode_write(0, Value::Boolean(true)).unwrap();
    let [r0, r1] = sent_ref(&frame).to_be_bytes();
    assert_eq!(
        frame,
        [
            0x03, 0x00, 0x00, 0x24, 0x02, 0xF0, 0x80, 0x32, 0x01, 0x00, 0x00, r0, r1, 0x00, 0x0E,
            0x00, 0x05, 0x05, 0x01, 0x12, 0x0A, 0x10, 0x01, 0x00, 0x01, 0x00, 0x01, 0x84, 0x00,
            0x00, 0x30, 0x00, 0x03, 0x00, 0x01, 0x01
        ]
    );
    assert_eq!(
        s.check_write(ack(sent_ref(&frame), 0, &[0x05, 0x01], &[0xFF])),
        Ok(())
    );
    let frame = s.encode_write(1, Value::Int(0x1234)).unwrap();
    let [r0, r1] = sent_ref(&frame).to_be_bytes();
    assert_eq!(
        frame,
        [
            0x03, 0x00, 0x00, 0x25, 0x02, 0xF0, 0x80, 0x32, 0x01, 0x00, 0x00, r0, r1, 0x00, 0x0E,
            0x00, 0x06, 0x05, 0x01, 0x12, 0x0A, 0x10, 0x02, 0x00, 0x02, 0x00, 0x01, 0x84, 0x00,
            0x00, 0x20, 0x00, 0x04, 0x00, 0x10, 0x12, 0x34
        ]
    );
    let refused = ack(sent_ref(&frame), 0, &[0x05, 0x01], &[0x05]);
    assert_eq!(device_code(s.check_write(refused)), 0x05);
    let frame = s.encode_write(2, Value::Float(1.5)).unwrap();
    assert_eq!(
        frame[19..],
        [
            0x12, 0x0A, 0x10, 0x02, 0x00, 0x04, 0x00, 0x00, 0x83, 0x00, 0x00, 0xF0, 0x00, 0x04,
            0x00, 0x20, 0x3F, 0xC0, 0x00, 0x00
        ]
    );
    let header_error = ack(sent_ref(&frame), 0x8500, &[], &[]);
    assert_eq!(device_code(s.check_write(header_error)), 0x8500);
    assert!(
        is_malformed(&s.check_write(ack(1, 0, &[0x05, 0x01], &[0xFF]))),
        "nothing in flight"
    );
    let frame = s.encode_write(3, Value::Float(1.5)).unwrap();
    assert_eq!(frame[frame.len() - 4..], [0x00, 0x00, 0x3F, 0xC0], "CDAB");
    let frame = s.encode_write(4, Value::Text("ab".into())).unwrap();
    assert_eq!(
        frame[frame.len() - 7..],
        [0x00, 0x04, 0x00, 0x18, b'a', b'b', 0]
    );
    assert!(is_malformed(&s.check_write(ack(
        sent_ref(&frame),
        0,
        &[0x05, 0x01],
        &[]
    ))));
    assert_eq!(device_code(s.encode_write(1, Value::Text("x".into()))), 0);
    assert_eq!(device_code(s.encode_write(1, Value::Int(40000))), 0);
    assert_eq!(device_code(s.encode_write(0, Value::Int(2))), 0);
    assert!(is_malformed(&s.encode_write(9, Value::Int(1))));
}

#[test]
fn configuration_errors_name_their_tag_and_key() {
    let errors = S7Session::create(
        &[
            setting("plcType", WitValue::Text("S7_1200".into())),
            setting("rack", WitValue::Int(8)),
            setting("slot", WitValue::Text("x".into())),
            setting("unitId", WitValue::Int(1)),
        ],
        specs(
            "DB1.DBW4 FLOAT32, DB1.DBD0 FLOAT32, VW100 INT16, M10 BOOL, DB1.DBB0 STRING(0), \
             T5 INT16",
        ),
    )
    .err()
    .expect("errors");
    let keys: Vec<(Option<u32>, &str)> = errors.iter().map(|e| (e.tag, e.key.as_str())).collect();
    assert_eq!(
        keys,
        [
            (None, "plcType"),
            (None, "rack"),
            (None, "slot"),
            (None, "unitId"),
            (Some(0), "address"),
            (Some(2), "address"),
            (Some(3), "address"),
            (Some(4), "length"),
            (Some(5), "address"),
        ]
    );
    assert!(
        errors[4].message.contains("FLOAT32"),
        "{}",
        errors[4].message
    );
    let smart = S7Session::create(
        &settings("S200_SMART", 0, 1),
        vec![spec("VW100", Wit::Int16)],
    );
    assert!(smart.is_ok());
}

/// A successful answer to a read request the session sent, with random data.
fn answer_to(sent: &[u8], rng: &mut Rng) -> Vec<u8> {
    let count = usize::from(sent[18]);
    let mut answer = Vec::new();
    for k in 0..count {
        let item = &sent[19 + 12 * k..31 + 12 * k];
        let (transport, len, bits) = if item[3] == 0x01 {
            (0x03, 1, 1)
        } else {
            let len = usize::from(u16::from_be_bytes([item[4], item[5]]));
            (0x04, len, len * 8)
        };
        answer.extend([0xFF, transport]);
        answer.extend((bits as u16).to_be_bytes());
        answer.extend(rng.bytes(len));
        if len % 2 == 1 && k + 1 < count {
            answer.push(0);
        }
    }
    ack(sent_ref(sent), 0, &[0x04, count as u8], &answer)
}

/// A PLC answering every request in full.
struct Plc;

impl Peer for Plc {
    fn handshake(&self, step: u32, sent: &[u8], rng: &mut Rng) -> Vec<u8> {
        if step == 0 {
            CC.to_vec()
        } else {
            setup_answer(sent_ref(sent), [240, 480, 960][rng.below(3)])
        }
    }

    fn read(&self, sent: &[u8], rng: &mut Rng) -> Vec<u8> {
        answer_to(sent, rng)
    }

    fn write(&self, sent: &[u8]) -> Vec<u8> {
        ack(sent_ref(sent), 0, &[0x05, 0x01], &[0xFF])
    }
}

#[test]
fn arbitrary_bytes_never_panic() {
    let s = session(specs(
        "DB1.DBD0 FLOAT32, DB1.DBX6.0 BOOL, M10.1 BOOL, DB2.DBW0 INT16, DB3.DBB0 STRING(300)",
    ));
    connect(&s, 240);
    let reached = fuzz::run(&s, &Plc, 5, 0x9E37_79B9_7F4A_7C15, 20_000);
    let accepted = reached.handshakes + reached.reads + reached.writes;
    assert!(
        accepted > 1000,
        "the mutations still reach the success paths ({reached:?})"
    );
}
