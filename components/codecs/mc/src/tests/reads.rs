//! Reads: byte-exact request frames, samples from word and bit answers, end codes
//! and malformed answers.

use super::*;

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
    assert_eq!(batch_samples(&batch).len(), 5);
    assert!(
        batch_samples(&batch)
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
        Some(FrameSize::Length(15))
    );
    assert!(
        s.frame_length(alloc::vec![0x50, 0, 0, 0xFF, 0xFF, 3, 0, 2, 0])
            .is_err()
    );
    assert!(s.check_handshake(0, Vec::new()).is_err());
}

#[test]
fn arrays_read_each_element_in_the_word_order_of_one_value() {
    use crate::sluice::dataflow::types::Element;
    // Two INT32 from D300, low word first each: 0x00010002 and -2.
    let s = q_l(specs("D300 INT32[2]"));
    let (id, frame) = read_one(&s);
    assert_eq!(frame[15..], [0x2C, 0x01, 0, 0xA8, 4, 0], "four words");
    let data = [0x02, 0x00, 0x01, 0x00, 0xFE, 0xFF, 0xFF, 0xFF];
    let batch = s.parse_read(id, answer(0, &data), 0).expect("parses");
    let Value::Raw(span) = batch_samples(&batch)[0].value else {
        panic!("raw bytes")
    };
    let bytes = &batch.bytes[span.start as usize..(span.start + span.len) as usize];
    assert_eq!(
        bytes,
        [0, 1, 0, 2, 0xFF, 0xFF, 0xFF, 0xFE],
        "each element big-endian"
    );

    // Five bits from M10: nibbles, the first high.
    let bits = q_l(specs("M10 BOOL[5]"));
    let (id, frame) = read_one(&bits);
    assert_eq!(frame[18..], [0x90, 5, 0]);
    let batch = bits
        .parse_read(id, answer(0, &[0x10, 0x01, 0x10]), 0)
        .expect("parses");
    let expected = [true, false, false, true, true]
        .map(Element::Boolean)
        .to_vec();
    assert_eq!(
        batch_samples(&batch)[0].value,
        Value::Array(expected.clone())
    );
    let frame = bits.encode_write(0, Value::Array(expected)).expect("bits");
    assert_eq!(
        frame[18..],
        [0x90, 5, 0, 0x10, 0x01, 0x10],
        "five bits, three bytes"
    );
    let frame = s
        .encode_write(
            0,
            Value::Array(alloc::vec![Element::Int(0x0001_0002), Element::Int(-2)]),
        )
        .expect("words");
    assert_eq!(
        frame[18..],
        [0xA8, 4, 0, 0x02, 0x00, 0x01, 0x00, 0xFE, 0xFF, 0xFF, 0xFF]
    );
    let refused = errors(&[], specs("D5.1 BOOL[4]"));
    assert_eq!(refused[0].key, "length");
}
