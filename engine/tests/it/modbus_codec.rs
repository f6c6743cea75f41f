//! The `modbus_tcp` codec through the runtime, against frames written out by hand.
//! (Interoperability with real Modbus servers is tested in `modbus_peers.rs`.)

use std::sync::Arc;

use crate::common::{TS, builtin, runtime, setting, tag};
use sluice::model::{
    Batch, ByteOrder, DataType, DeviceError, FrameError, FrameSize, Quality, SettingValue, TagSpec,
    Value,
};
use sluice::runtime::{CallError, CodecPool, CodecSession, ComponentKind, Limits};

fn pool() -> Arc<CodecPool> {
    let runtime = runtime();
    let component = runtime
        .load(ComponentKind::Codec, "modbus_tcp", &builtin("modbus_tcp"))
        .expect("loads");
    runtime
        .codec_pool(&component, Limits::default())
        .expect("pool")
}

fn session(tags: &[TagSpec]) -> CodecSession {
    pool()
        .session(&[setting("unitId", SettingValue::Int(7))], Arc::from(tags))
        .expect("session")
}

/// An answer to `request` (whose frame was `sent`) carrying `pdu`.
fn answer(sent: &[u8], pdu: &[u8]) -> Vec<u8> {
    let mut frame = sent[..4].to_vec();
    frame.extend_from_slice(&((pdu.len() + 1) as u16).to_be_bytes());
    frame.push(sent[6]);
    frame.extend_from_slice(pdu);
    frame
}

/// Sends planned request `request` and parses an answer carrying `pdu`.
fn exchange(session: &CodecSession, request: u32, pdu: &[u8]) -> Result<Batch, FrameError> {
    let sent = session.encode_read(request).expect("call").expect("frame");
    session
        .parse_read(request, &answer(&sent, pdu), TS)
        .expect("call")
}

#[test]
fn nearby_registers_are_read_in_one_request_and_mapped_back_per_tag() {
    let tags = [
        tag("a", "40001", DataType::Int16),
        tag("b", "40003", DataType::Float32),
        tag("flag", "40002.1", DataType::Bool),
        tag("coil", "00010", DataType::Bool),
    ];
    let session = session(&tags);
    assert_eq!(session.header_len().expect("call"), 6);
    let plan = session.plan(&[0, 1, 2, 3]).expect("plan");
    assert_eq!(
        plan.len(),
        2,
        "one register request, one coil request: {plan:?}"
    );
    let registers = plan
        .iter()
        .find(|r| r.tags.contains(&0))
        .expect("register request");
    assert_eq!(registers.tags, [0, 2, 1], "sorted by address");

    let sent = session
        .encode_read(registers.id)
        .expect("call")
        .expect("frame");
    assert_eq!(
        &sent[2..],
        &[0, 0, 0, 6, 7, 0x03, 0, 0, 0, 4],
        "FC03 from 0, 4 registers, unit 7"
    );
    let data = [0xFF, 0xFE, 0x00, 0x02, 0x3F, 0xC0, 0x00, 0x00];
    let mut pdu = vec![0x03, 8];
    pdu.extend_from_slice(&data);
    let frame = answer(&sent, &pdu);
    assert_eq!(
        session.frame_length(&frame[..6]).expect("call"),
        Ok(FrameSize::Length(frame.len() as u32))
    );
    let batch = session
        .parse_read(registers.id, &frame, TS)
        .expect("call")
        .expect("parsed");
    let by_tag = |t: u32| batch.samples.iter().find(|s| s.tag == t).expect("sample");
    assert_eq!(
        batch.raw(match by_tag(0).value {
            Value::Raw(s) => s,
            ref v => panic!("{v:?}"),
        }),
        Some(&[0xFF, 0xFE][..])
    );
    assert_eq!(
        batch.raw(match by_tag(1).value {
            Value::Raw(s) => s,
            ref v => panic!("{v:?}"),
        }),
        Some(&data[4..8])
    );
    assert_eq!(by_tag(2).value, Value::Bool(true), "bit 1 of 0x0002");
    assert!(
        batch
            .samples
            .iter()
            .all(|s| s.ts_ms == TS && s.quality == Quality::Good)
    );

    let coils = plan.iter().find(|r| r.tags == [3]).expect("coil request");
    let sent = session.encode_read(coils.id).expect("call").expect("frame");
    assert_eq!(&sent[7..], &[0x01, 0, 9, 0, 1]);
    let batch = session
        .parse_read(coils.id, &answer(&sent, &[0x01, 1, 0x01]), TS)
        .expect("call")
        .expect("parsed");
    assert_eq!(batch.samples[0].value, Value::Bool(true));
}

/// A session of four INT16 tags on consecutive registers, from 40001.
fn four_registers() -> CodecSession {
    let tags: Vec<TagSpec> = (0..4)
        .map(|i| tag(&format!("t{i}"), &format!("4000{}", i + 1), DataType::Int16))
        .collect();
    session(&tags)
}

#[test]
fn an_exception_on_a_merged_request_is_split_and_remembered() {
    let session = four_registers();
    let plan = session.plan(&[0, 1, 2, 3]).expect("plan");
    assert_eq!(plan.len(), 1);
    let error = exchange(&session, plan[0].id, &[0x83, 0x02]).expect_err("exception");
    let FrameError::Device(DeviceError {
        code,
        message,
        retry,
    }) = error
    else {
        panic!("an exception is a device error, not a malformed frame: {error:?}");
    };
    assert_eq!(code, 2);
    assert!(message.contains("illegal data address"), "{message}");
    assert_eq!(
        retry.iter().map(|r| r.tags.clone()).collect::<Vec<_>>(),
        [vec![0, 1], vec![2, 3]]
    );
    let again = session.plan(&[0, 1, 2, 3]).expect("plan");
    assert_eq!(again.len(), 2, "the split is kept for later rounds");

    // The second half still holds two tags: it splits again.
    let split_again = exchange(&session, again[1].id, &[0x83, 0x02]);
    let Err(FrameError::Device(DeviceError { retry, .. })) = split_again else {
        panic!("{split_again:?}")
    };
    assert_eq!(retry.len(), 2);
    // A busy device is not blamed on addresses: no split.
    let plan = session.plan(&[0]).expect("plan");
    let busy = exchange(&session, plan[0].id, &[0x83, 0x06]);
    assert!(
        matches!(busy, Err(FrameError::Device(DeviceError { code: 6, ref retry, .. })) if retry.is_empty()),
        "{busy:?}"
    );
}

#[test]
fn a_plan_and_the_header_length_are_asked_for_once_until_an_error() {
    let session = four_registers();
    let calls = || session.health().calls;
    let plan = session.plan(&[0, 1, 2, 3]).expect("plan");
    assert_eq!(session.header_len().expect("call"), 6);
    let before = calls();
    assert_eq!(session.plan(&[0, 1, 2, 3]).expect("plan"), plan);
    assert_eq!(session.header_len().expect("call"), 6);
    assert_eq!(calls(), before, "answered without entering the component");
    // Other due tags are planned by the codec.
    let other = session.plan(&[0]).expect("plan");
    assert_eq!(calls(), before + 1);
    assert_eq!(other[0].tags, [0]);

    // A device error (here one that splits the request) ends the reuse: the
    // next plan is the codec's, with the split.
    let plan = session.plan(&[0, 1, 2, 3]).expect("plan");
    let refused = exchange(&session, plan[0].id, &[0x83, 0x02]);
    assert!(refused.is_err(), "{refused:?}");
    let before = calls();
    assert_eq!(session.plan(&[0, 1, 2, 3]).expect("plan").len(), 2);
    assert_eq!(calls(), before + 1);
    // So does a reset.
    session.reset().expect("reset");
    let before = calls();
    session.plan(&[0, 1, 2, 3]).expect("plan");
    assert_eq!(calls(), before + 1);
}

#[test]
fn frames_that_do_not_answer_the_request_are_malformed() {
    let session = session(&[tag("a", "40001", DataType::Uint16)]);
    let plan = session.plan(&[0]).expect("plan");
    type Corrupt = fn(&[u8]) -> Vec<u8>;
    let corruptions: [(&str, Corrupt); 4] = [
        ("tid", |sent| {
            let mut frame = answer(sent, &[0x03, 2, 0, 1]);
            frame[1] ^= 0xFF;
            frame
        }),
        ("unit", |sent| {
            let mut frame = answer(sent, &[0x03, 2, 0, 1]);
            frame[6] = 9;
            frame
        }),
        ("count", |sent| answer(sent, &[0x03, 4, 0, 1])),
        ("function", |sent| answer(sent, &[0x04, 2, 0, 1])),
    ];
    for (name, corrupt) in corruptions {
        let sent = session
            .encode_read(plan[0].id)
            .expect("call")
            .expect("frame");
        let result = session
            .parse_read(plan[0].id, &corrupt(&sent), TS)
            .expect("call");
        assert!(
            matches!(result, Err(FrameError::Malformed(_))),
            "{name}: {result:?}"
        );
    }
    for head in [[0u8, 1, 0, 1, 0, 6], [0, 1, 0, 0, 0, 0], [0, 1, 0, 0, 1, 0]] {
        let result = session.frame_length(&head).expect("call");
        assert!(matches!(result, Err(FrameError::Malformed(_))), "{head:?}");
    }
    // Arbitrary bytes never trap the codec.
    for len in 0..20u8 {
        let junk: Vec<u8> = (0..len).map(|i| i.wrapping_mul(37)).collect();
        assert!(
            session.parse_read(plan[0].id, &junk, TS).is_ok(),
            "a clean refusal, not a trap"
        );
        assert!(session.frame_length(&junk).is_ok());
    }
}

#[test]
fn writes_use_the_function_for_the_table_and_size() {
    let tags = [
        tag("coil", "00001", DataType::Bool),
        tag("word", "40010", DataType::Int16),
        TagSpec {
            byte_order: ByteOrder::Cdab,
            ..tag("float", "40020", DataType::Float32)
        },
        tag("input", "30001", DataType::Int16),
    ];
    let session = session(&tags);
    let coil = session
        .encode_write(0, Value::Bool(true))
        .expect("call")
        .expect("frame");
    assert_eq!(&coil[7..], &[0x05, 0, 0, 0xFF, 0x00]);
    assert_eq!(
        session
            .check_write(&answer(&coil, &coil[7..]))
            .expect("call"),
        Ok(())
    );
    let word = session
        .encode_write(1, Value::Int(-2))
        .expect("call")
        .expect("frame");
    assert_eq!(&word[7..], &[0x06, 0, 9, 0xFF, 0xFE]);
    let rejected = session
        .check_write(&answer(&word, &[0x86, 0x03]))
        .expect("call");
    assert!(
        matches!(
            rejected,
            Err(FrameError::Device(DeviceError { code: 3, .. }))
        ),
        "{rejected:?}"
    );
    let float = session
        .encode_write(2, Value::Float(1.5))
        .expect("call")
        .expect("frame");
    assert_eq!(
        &float[7..],
        &[0x10, 0, 19, 0, 2, 4, 0x00, 0x00, 0x3F, 0xC0],
        "CDAB on the wire"
    );
    let input = session.encode_write(3, Value::Int(1)).expect("call");
    assert!(
        matches!(input, Err(FrameError::Device(DeviceError { ref message, .. })) if message.contains("read-only")),
        "{input:?}"
    );
    let too_big = session.encode_write(1, Value::Int(70_000)).expect("call");
    assert!(matches!(too_big, Err(FrameError::Device(_))), "{too_big:?}");
}

#[test]
fn bad_tags_and_settings_are_refused_with_their_tag() {
    let error = pool()
        .session(
            &[
                setting("unitId", SettingValue::Int(300)),
                setting("colour", SettingValue::Text("red".into())),
            ],
            Arc::from([
                tag("ok", "40001", DataType::Int16),
                tag("bad", "D100", DataType::Int16),
                tag("coil", "00001", DataType::Int16),
            ]),
        )
        .expect_err("refused");
    let CallError::Config { issues, .. } = error else {
        panic!("{error}")
    };
    let summary: Vec<_> = issues.iter().map(|i| (i.tag, i.key.as_str())).collect();
    assert_eq!(
        summary,
        [
            (None, "unitId"),
            (None, "colour"),
            (Some(1), "address"),
            (Some(2), "dataType")
        ]
    );
}
