//! Writes: byte-exact frames, the word order of every byte order, the answers to writes.

use super::*;

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
        let engine_order = s.tags[0].byte_order;
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
