//! The A-compatible 1E frame (series A, and Q/L modules set to it): frames as
//! the reference manual's examples lay them out, answers whose size follows
//! from the request in flight, completion and abnormal codes, writes.

use super::*;

/// The answer to a 1E `command` with completion code 0 and `data`.
fn answer_1e(command: u8, data: &[u8]) -> Vec<u8> {
    [&[command | 0x80, 0x00][..], data].concat()
}

#[test]
fn reads_are_the_manuals_frames_and_their_answers_become_samples() {
    let s = a_1e(specs("D100 INT16, D101 UINT16, D102.3 BOOL"));
    let (id, frame) = read_one(&s);
    // Batch read in word units (01), PC FF, timer 10, D100 (64 00 00 00,
    // code 20 44), 3 points.
    assert_eq!(
        frame,
        [
            0x01, 0xFF, 0x0A, 0x00, 0x64, 0x00, 0x00, 0x00, 0x20, 0x44, 0x03, 0x00
        ]
    );
    // Its size follows from the read in flight: 2 + 3 words.
    let head = alloc::vec![0x81, 0x00];
    assert_eq!(s.frame_length(head).ok(), Some(FrameSize::Length(8)));
    let data = [0x18, 0xFC, 0x34, 0x12, 0x08, 0x00];
    let batch = s.parse_read(id, answer_1e(0x01, &data), 7).expect("parses");
    assert_eq!(
        pipeline(raw(&batch, 0), DataType::Int16, ByteOrder::Abcd),
        Number::Int(-1000)
    );
    assert_eq!(raw(&batch, 1), [0x12, 0x34]);
    assert!(boolean(&batch, 2));

    // Bits: command 00, two points a byte, the first in the high nibble.
    let s = a_1e(specs("M100 BOOL, M101 BOOL, M103 BOOL, X1F BOOL"));
    let reads = s.plan(alloc::vec![0, 1, 2, 3]);
    let frames: Vec<Vec<u8>> = reads
        .iter()
        .map(|r| s.encode_read(r.id).expect("encodes"))
        .collect();
    assert_eq!(
        frames[0],
        [
            0x00, 0xFF, 0x0A, 0x00, 0x64, 0x00, 0x00, 0x00, 0x20, 0x4D, 0x04, 0x00
        ]
    );
    assert_eq!(frames[1][4..11], [0x1F, 0, 0, 0, 0x20, 0x58, 0x01]);
    // Encoding a read makes it the one in flight: the bits of M100..M103.
    s.encode_read(reads[0].id).expect("encodes");
    assert_eq!(
        s.frame_length(alloc::vec![0x80, 0x00]).ok(),
        Some(FrameSize::Length(4))
    );
    let batch = s
        .parse_read(reads[0].id, answer_1e(0x00, &[0x10, 0x01]), 0)
        .expect("parses");
    assert_eq!(
        (0..3).map(|i| boolean(&batch, i)).collect::<Vec<_>>(),
        [true, false, true]
    );
}

#[test]
fn completion_codes_split_merged_reads_and_the_abnormal_code_is_kept() {
    let s = a_1e(specs("D100 INT16, D101 INT16, D110 INT32"));
    let (id, _) = read_one(&s);
    assert_eq!(
        s.frame_length(alloc::vec![0x81, 0x56]).ok(),
        Some(FrameSize::Length(2)),
        "a completion code ends the answer"
    );
    let Err(FrameError::Device(error)) = s.parse_read(id, alloc::vec![0x81, 0x56], 0) else {
        panic!("a device error");
    };
    assert_eq!(error.code, 0x56);
    assert!(
        error.message.contains("completion code 0x56"),
        "{}",
        error.message
    );
    assert!(error.message.contains("D100..D111"), "{}", error.message);
    assert_eq!(error.retry.len(), 2, "split in two");
    let retry = error.retry[0].id;
    s.encode_read(retry).expect("encodes");
    assert_eq!(
        s.frame_length(alloc::vec![0x81, 0x5B]).ok(),
        Some(FrameSize::Length(3)),
        "5B brings an abnormal code"
    );
    let Err(FrameError::Device(abnormal)) = s.parse_read(retry, alloc::vec![0x81, 0x5B, 0x10], 0)
    else {
        panic!("a device error");
    };
    assert_eq!(abnormal.code, 0x5B10);
    assert!(abnormal.retry.is_empty(), "not the addresses' fault");
}

#[test]
fn answers_that_do_not_fit_the_request_in_flight_are_malformed() {
    let s = a_1e(specs("D100 INT16, D101 INT16"));
    assert!(
        s.frame_length(alloc::vec![0x81, 0x00]).is_err(),
        "nothing in flight"
    );
    let (id, _) = read_one(&s);
    assert!(
        s.frame_length(alloc::vec![0x80, 0x00]).is_err(),
        "a bit answer"
    );
    assert!(s.frame_length(alloc::vec![0x81]).is_err());
    for bad in [
        answer_1e(0x01, &[1, 0, 2]),
        answer_1e(0x01, &[1, 0, 2, 0, 3, 0]),
        answer_1e(0x00, &[1, 0, 2, 0]),
        alloc::vec![0x81, 0x5B],
        Vec::new(),
    ] {
        s.encode_read(id).expect("encodes");
        let parsed = s.parse_read(id, bad.clone(), 0);
        assert!(
            matches!(parsed, Err(FrameError::Malformed(_))),
            "{bad:02X?}: {parsed:?}"
        );
    }
}

#[test]
fn writes_are_byte_exact_and_their_answers_checked() {
    let s = a_1e(specs("D100 INT16, D300 INT32, M10 BOOL"));
    // Batch write in word units (03), D100, one point, 1234 low byte first.
    assert_eq!(
        s.encode_write(0, Value::Int(0x1234)).expect("word"),
        [
            0x03, 0xFF, 0x0A, 0x00, 0x64, 0x00, 0x00, 0x00, 0x20, 0x44, 0x01, 0x00, 0x34, 0x12
        ]
    );
    assert_eq!(
        s.frame_length(alloc::vec![0x83, 0x00]).ok(),
        Some(FrameSize::Length(2))
    );
    s.check_write(alloc::vec![0x83, 0x00]).expect("written");
    assert_eq!(
        s.encode_write(1, Value::Int(0x1234_5678)).expect("dword")[10..],
        [0x02, 0x00, 0x78, 0x56, 0x34, 0x12]
    );
    let refused = s.check_write(alloc::vec![0x83, 0x5B, 0x10]);
    assert!(matches!(refused, Err(FrameError::Device(_))), "{refused:?}");
    // Bits: command 02, the value in the high nibble.
    assert_eq!(
        s.encode_write(2, Value::Boolean(true)).expect("bit"),
        [
            0x02, 0xFF, 0x0A, 0x00, 0x0A, 0x00, 0x00, 0x00, 0x20, 0x4D, 0x01, 0x00, 0x10
        ]
    );
    let wrong = s.check_write(alloc::vec![0x83, 0x00]);
    assert!(matches!(wrong, Err(FrameError::Malformed(_))), "{wrong:?}");
}

#[test]
fn devices_the_1e_frame_lacks_are_refused_at_their_tag() {
    let errs = errors(
        &[text("series", "A"), text("frameType", "FRAME_1E")],
        specs("D0 INT16, ZR10 INT16, SM400 BOOL, D300 STRING(600)"),
    );
    let got: Vec<(Option<u32>, &str)> = errs.iter().map(|e| (e.tag, e.key.as_str())).collect();
    assert_eq!(
        got,
        [
            (Some(1), "address"),
            (Some(2), "address"),
            (Some(3), "length")
        ]
    );
    assert!(
        errs[0].message.contains("no device ZR"),
        "{}",
        errs[0].message
    );
    // A Q/L module set to the 1E frame speaks it too.
    let q = session(&[text("frameType", "FRAME_1E")], specs("D0 INT16"));
    assert_eq!(read_one(&q).1[0], 0x01);
}
