//! Session tests: handshake, planning, reads and writes against frames built from
//! the protocol's layout, and robustness against arbitrary bytes.

use alloc::vec;

use super::*;
use sluice::dataflow::types::{
    ByteOrder, DataType as Wit, Quality, SettingValue as WitValue, Span,
};
use sluice_guest::fuzz::{self, Peer, Rng};

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
    assert_eq!(s.frame_length(vec![3, 0, 0, 0x16]), Ok(22));
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
fn reads_with_mixed_return_codes() {
    let s = session(specs(
        "DB1.DBD0 FLOAT32, DB1.DBX6.0 BOOL, MW10 INT16, DB2.DBW0 UINT16",
    ));
    connect(&s, 240);
    let plan = s.plan(vec![0, 1, 2, 3]);
    assert_eq!(plan.len(), 1);
    assert_eq!(plan[0].tags, [2, 0, 1, 3]);
    let frame = s.encode_read(plan[0].id).unwrap();
    let r = sent_ref(&frame);
    let [r0, r1] = r.to_be_bytes();
    assert_eq!(
        frame,
        [
            0x03, 0x00, 0x00, 0x37, 0x02, 0xF0, 0x80, // TPKT, COTP DT
            0x32, 0x01, 0x00, 0x00, r0, r1, 0x00, 0x26, 0x00, 0x00, // header
            0x04, 0x03, // Read Var, 3 items
            0x12, 0x0A, 0x10, 0x02, 0x00, 0x02, 0x00, 0x00, 0x83, 0x00, 0x00,
            0x50, // MB10..11
            0x12, 0x0A, 0x10, 0x02, 0x00, 0x07, 0x00, 0x01, 0x84, 0x00, 0x00,
            0x00, // DB1.0..6
            0x12, 0x0A, 0x10, 0x02, 0x00, 0x02, 0x00, 0x02, 0x84, 0x00, 0x00,
            0x00, // DB2.0..1
        ]
    );
    let data = [
        0xFF, 0x04, 0x00, 0x10, 0xFF, 0x38, // MW10 = -200
        0xFF, 0x04, 0x00, 0x38, 0x3F, 0xC0, 0x00, 0x00, 0x00, 0x00, 0x01,
        0x00, // 7 bytes + pad
        0x0A, 0x00, 0x00, 0x00, // DB2 does not exist
    ];
    let batch = s
        .parse_read(plan[0].id, ack(r, 0, &[0x04, 0x03], &data), 42)
        .unwrap();
    assert_eq!(
        batch.bytes,
        [0xFF, 0x38, 0x3F, 0xC0, 0x00, 0x00, 0x00, 0x00, 0x01]
    );
    let got: Vec<(u32, Value, Quality)> = batch
        .samples
        .iter()
        .map(|s| (s.tag, s.value.clone(), s.quality))
        .collect();
    assert_eq!(
        got,
        [
            (2, Value::Raw(Span { start: 0, len: 2 }), Quality::Good),
            (0, Value::Raw(Span { start: 2, len: 4 }), Quality::Good),
            (1, Value::Boolean(true), Quality::Good),
            (3, Value::None, Quality::Bad),
        ]
    );
    assert!(batch.samples.iter().all(|s| s.ts_ms == 42));
    assert_eq!(
        s.plan(vec![0, 1, 2, 3]),
        plan,
        "a lone failed tag changes no plan"
    );
}

#[test]
fn a_failed_merged_item_is_split_in_later_rounds() {
    let s = session(specs("DB1.DBW0 INT16, DB1.DBW2 INT16"));
    connect(&s, 240);
    let plan = s.plan(vec![0, 1]);
    let r = sent_ref(&s.encode_read(plan[0].id).unwrap());
    let batch = s
        .parse_read(
            plan[0].id,
            ack(r, 0, &[0x04, 0x01], &[0x05, 0x00, 0x00, 0x00]),
            0,
        )
        .unwrap();
    assert!(
        batch
            .samples
            .iter()
            .all(|s| s.quality == Quality::Bad && s.value == Value::None)
    );
    assert_eq!(batch.samples.len(), 2);
    let again = s.plan(vec![0, 1]);
    let state = s.state.borrow();
    assert_eq!(
        state.plans.request(again[0].id).map(|r| r.items.len()),
        Ok(2)
    );
}

#[test]
fn bit_items_and_odd_padding() {
    let s = session(specs("M10.1 BOOL, DB1.DBB100 STRING(3), I0.7 BOOL"));
    connect(&s, 240);
    let plan = s.plan(vec![0, 1, 2]);
    let frame = s.encode_read(plan[0].id).unwrap();
    assert_eq!(frame[17..19], [0x04, 0x03]);
    // I0.7 first (inputs sort first): a BIT item at bit address 7.
    assert_eq!(
        frame[19..31],
        [
            0x12, 0x0A, 0x10, 0x01, 0x00, 0x01, 0x00, 0x00, 0x81, 0x00, 0x00, 0x07
        ]
    );
    assert_eq!(
        frame[31..43],
        [
            0x12, 0x0A, 0x10, 0x01, 0x00, 0x01, 0x00, 0x00, 0x83, 0x00, 0x00, 0x51
        ]
    );
    let data = [
        0xFF, 0x03, 0x00, 0x01, 0x00, 0x00, // I0.7 false, padded
        0xFF, 0x03, 0x00, 0x01, 0x01, 0x00, // M10.1 true, padded
        0xFF, 0x09, 0x00, 0x03, b'a', b'b', b'c', // STRING, last: unpadded
    ];
    let batch = s
        .parse_read(
            plan[0].id,
            ack(sent_ref(&frame), 0, &[0x04, 0x03], &data),
            0,
        )
        .unwrap();
    let values: Vec<Value> = batch.samples.iter().map(|s| s.value.clone()).collect();
    assert_eq!(
        values,
        [
            Value::Boolean(false),
            Value::Boolean(true),
            Value::Raw(Span { start: 0, len: 3 })
        ]
    );
    assert_eq!(batch.bytes, b"abc");
    // The same answer with the last item cut short is malformed.
    let truncated = &data[..data.len() - 1];
    let r = sent_ref(&s.encode_read(plan[0].id).unwrap());
    assert!(is_malformed(&s.parse_read(
        plan[0].id,
        ack(r, 0, &[0x04, 0x03], truncated),
        0
    )));
}

#[test]
fn inconsistent_answers_are_malformed_and_header_errors_are_device_errors() {
    let s = session(vec![spec("DB1.DBW0", Wit::Int16)]);
    connect(&s, 240);
    let id = s.plan(vec![0])[0].id;
    let good = [0xFF, 0x04, 0x00, 0x10, 0x00, 0x07];
    // (PDU reference offset, parameters, data, accepted)
    let cases: [(u16, [u8; 2], &[u8], bool); 6] = [
        (0, [0x04, 0x01], &good, true),
        (1, [0x04, 0x01], &good, false),
        (0, [0x04, 0x02], &good, false),
        (0, [0x05, 0x01], &good, false),
        (0, [0x04, 0x01], &good[..5], false),
        (0, [0x04, 0x01], &[0xFF, 0x04, 0x00, 0x08, 0x07], false),
    ];
    for (index, (skew, param, data, ok)) in cases.into_iter().enumerate() {
        let r = sent_ref(&s.encode_read(id).unwrap());
        let result = s.parse_read(id, ack(r.wrapping_add(skew), 0, &param, data), 0);
        assert_eq!(result.is_ok(), ok, "case {index}: {result:?}");
        assert!(ok || is_malformed(&result), "case {index}");
    }
    let r = sent_ref(&s.encode_read(id).unwrap());
    assert_eq!(
        device_code(s.parse_read(id, ack(r, 0x8500, &[], &[]), 0)),
        0x8500
    );
    assert!(
        is_malformed(&s.parse_read(id, ack(r, 0, &[0x04, 0x01], &good), 0)),
        "nothing in flight"
    );
    s.encode_read(id).unwrap();
    assert!(is_malformed(&s.parse_read(id + 1, Vec::new(), 0)));
    assert!(is_malformed(&s.encode_read(999)));
}

#[test]
fn a_long_string_is_read_in_slices_and_joined() {
    let s = session(vec![string("DB1.DBB10", 500), spec("DB1.DBW0", Wit::Int16)]);
    connect(&s, 240);
    let plan = s.plan(vec![0, 1]);
    assert_eq!(plan.len(), 4);
    assert_eq!(plan[0].tags, [1]);
    assert!(plan[1..].iter().all(|p| p.tags == [0]));
    let text: Vec<u8> = (0..500u32).map(|i| b'A' + (i % 26) as u8).collect();
    let mut samples = Vec::new();
    let mut offset = 0;
    for (index, read) in plan.iter().enumerate() {
        let frame = s.encode_read(read.id).unwrap();
        let r = sent_ref(&frame);
        let data = if index == 0 {
            vec![0xFF, 0x04, 0x00, 0x10, 0x00, 0x01]
        } else {
            let len = u16::from_be_bytes([frame[23], frame[24]]) as usize;
            let mut data = vec![0xFF, 0x04];
            data.extend_from_slice(&((len * 8) as u16).to_be_bytes());
            data.extend_from_slice(&text[offset..offset + len]);
            offset += len;
            data
        };
        let batch = s
            .parse_read(read.id, ack(r, 0, &[0x04, 0x01], &data), 0)
            .unwrap();
        for sample in batch.samples {
            if let Value::Raw(span) = sample.value {
                let bytes = &batch.bytes[span.start as usize..(span.start + span.len) as usize];
                samples.push((sample.tag, bytes.to_vec()));
            }
        }
    }
    assert_eq!(offset, 500);
    assert_eq!(samples, [(1, vec![0x00, 0x01]), (0, text)]);
    // A failed slice makes the joined tag BAD, once, at the last slice.
    let mut bad = Vec::new();
    for (index, read) in plan.iter().enumerate().skip(1) {
        let r = sent_ref(&s.encode_read(read.id).unwrap());
        let data: Vec<u8> = if index == 2 {
            vec![0x05, 0x00, 0x00, 0x00]
        } else {
            let len = if index == 3 { 56 } else { 222 };
            [vec![0xFF, 0x09, 0x00, len as u8], vec![b'x'; len]].concat()
        };
        bad.extend(
            s.parse_read(read.id, ack(r, 0, &[0x04, 0x01], &data), 0)
                .unwrap()
                .samples,
        );
    }
    assert_eq!(bad.len(), 1);
    assert_eq!((bad[0].tag, bad[0].quality), (0, Quality::Bad));
    // With a 960-byte PDU the string fits one item.
    connect(&s, 960);
    assert_eq!(s.plan(vec![0, 1]).len(), 1);
}

#[test]
fn planning_follows_the_negotiated_pdu() {
    let tags: Vec<TagSpec> = (0..30)
        .map(|i| spec(&format!("DB1.DBW{}", i * 100), Wit::Int16))
        .collect();
    let s = session(tags);
    let due: Vec<u32> = (0..30).collect();
    connect(&s, 240);
    let items = |plan: &[PlannedRead]| -> Vec<usize> {
        let state = s.state.borrow();
        plan.iter()
            .map(|p| state.plans.request(p.id).map_or(0, |r| r.items.len()))
            .collect()
    };
    assert_eq!(items(&s.plan(due.clone())), [19, 11]);
    connect(&s, 960);
    assert_eq!(items(&s.plan(due.clone())), [20, 10]);
    // Every request frame stays within the PDU.
    for read in s.plan(due) {
        let frame = s.encode_read(read.id).unwrap();
        assert!(frame.len() - 7 <= 960, "TPKT and COTP headers aside");
    }
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
