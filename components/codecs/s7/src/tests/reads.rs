//! Reads: planning at the negotiated PDU size, item answers with mixed return codes,
//! padding, slices, and inconsistent answers.

use super::*;

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
    let got: Vec<(u32, Value, Quality)> = batch_samples(&batch)
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
    assert!(batch_samples(&batch).iter().all(|s| s.ts_ms == 42));
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
        batch_samples(&batch)
            .iter()
            .all(|s| s.quality == Quality::Bad && s.value == Value::None)
    );
    assert_eq!(batch_samples(&batch).len(), 2);
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
    let values: Vec<Value> = batch_samples(&batch)
        .iter()
        .map(|s| s.value.clone())
        .collect();
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
        for sample in batch_samples(&batch) {
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
        let batch = s
            .parse_read(read.id, ack(r, 0, &[0x04, 0x01], &data), 0)
            .unwrap();
        bad.extend(batch_samples(&batch));
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
fn arrays_read_as_one_range_and_bool_arrays_as_their_bytes() {
    use crate::sluice::dataflow::types::{Access, Element};
    let mut bits = specs("DB1.DBX0.6 BOOL[4]").remove(0);
    bits.access = Access::Read;
    let s = session(alloc::vec![bits, specs("DB1.DBW4 INT16[2]").remove(0)]);
    connect(&s, 240);
    let plan = s.plan(vec![0, 1]);
    assert_eq!(plan.len(), 1);
    let frame = s.encode_read(plan[0].id).unwrap();
    let r = sent_ref(&frame);
    assert_eq!(frame[18], 1, "one item");
    assert_eq!(frame[23..25], [0x00, 0x08], "DB1 bytes 0..8");
    let data = [
        0xFF,
        0x04,
        0x00,
        0x40,
        0b1100_0000,
        0b0000_0001,
        0,
        0,
        0x00,
        0x01,
        0xFF,
        0xFE,
    ];
    let batch = s
        .parse_read(plan[0].id, ack(r, 0, &[0x04, 0x01], &data), 0)
        .unwrap();
    let values: Vec<Value> = batch_samples(&batch)
        .iter()
        .map(|x| x.value.clone())
        .collect();
    let on = [true, true, true, false].map(Element::Boolean).to_vec();
    assert_eq!(values[0], Value::Array(on.clone()), "bits 6, 7, 8 and 9");
    let Value::Raw(span) = values[1] else {
        panic!("raw words")
    };
    assert_eq!(
        batch.bytes[span.start as usize..][..span.len as usize],
        [0, 1, 0xFF, 0xFE]
    );
    assert!(
        s.encode_write(0, Value::Array(on)).is_err(),
        "a BOOL array is read-only"
    );
    let frame = s
        .encode_write(
            1,
            Value::Array(alloc::vec![Element::Int(1), Element::Int(-2)]),
        )
        .unwrap();
    assert_eq!(frame[frame.len() - 4..], [0, 1, 0xFF, 0xFE]);
    let refused = S7Session::create(&[], specs("DB1.DBX0.0 BOOL[8]"))
        .err()
        .expect("refused");
    assert_eq!(refused[0].key, "access", "a writable BOOL array");
}
