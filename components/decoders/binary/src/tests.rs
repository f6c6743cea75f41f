use alloc::string::String;
use alloc::vec::Vec;
use alloc::{format, vec};

use sluice_guest::columns::{Cell, Columns};
use sluice_guest::decoder::{Decoder, Field, Refusal, Written};
use sluice_guest::numeric::{ByteOrder, DataType, Number};
use sluice_guest::settings::SettingValue;
use sluice_guest::stages::Tag;

use super::BinaryDecoder;

fn field<'a>(
    key: &'a str,
    address: &'a str,
    data_type: DataType,
    byte_order: ByteOrder,
    array_len: Option<u32>,
) -> Field<'a> {
    Field {
        key,
        address,
        tag: Tag {
            data_type,
            array_len,
            byte_order,
            factor: 1.0,
            offset: 0.0,
            deadband: 0.0,
            settings: Vec::new(),
        },
        readable: true,
        writable: true,
    }
}

fn decoder(fields: &[Field<'_>]) -> BinaryDecoder {
    BinaryDecoder::create(&[("commandTopic", SettingValue::Text("dev/set"))], fields)
        .unwrap_or_else(|issues| panic!("{issues:?}"))
}

fn decode(decoder: &BinaryDecoder, payload: &[u8]) -> (Columns, Vec<Refusal>) {
    let mut out = Columns::default();
    let mut refusals = Vec::new();
    decoder.decode("dev/up", payload, 9, &mut out, &mut refusals);
    (out, refusals)
}

#[test]
fn each_tag_takes_its_bytes_raw_for_the_pipeline_and_bools_their_bits() {
    let fields = [
        field("t", "0", DataType::Float32, ByteOrder::Cdab, None),
        field("n", "0x04", DataType::Int16, ByteOrder::Abcd, None),
        field("s", "6", DataType::String(3), ByteOrder::Abcd, None),
        field("on", "10.1", DataType::Bool, ByteOrder::Abcd, None),
        field("bits", "10.6", DataType::Bool, ByteOrder::Abcd, Some(3)),
        field("pair", "12", DataType::Uint16, ByteOrder::Badc, Some(2)),
    ];
    let decoder = decoder(&fields);
    let payload = [
        0x00,
        0x00,
        0x41,
        0xA8,
        0xFF,
        0xFE,
        b'a',
        b'b',
        b'c',
        0,
        0b0100_0010,
        0b0000_0001,
        1,
        0,
        2,
        0,
    ];
    let (out, refusals) = decode(&decoder, &payload);
    assert_eq!(refusals, []);
    let raw = |i: usize| out.raw_range(i).map(|r| out.bytes[r].to_vec());
    assert_eq!(out.tags, [0, 1, 2, 3, 4, 5]);
    assert_eq!(raw(0), Some(vec![0x00, 0x00, 0x41, 0xA8]));
    assert_eq!(raw(1), Some(vec![0xFF, 0xFE]));
    assert_eq!(raw(2), Some(vec![b'a', b'b', b'c', 0]));
    assert_eq!(out.cell(3), Cell::Boolean(true));
    let bits: Vec<String> = (0..3).map(|e| format!("{:?}", out.element(e))).collect();
    assert_eq!(bits, ["Boolean(true)", "Boolean(false)", "Boolean(true)"]);
    assert_eq!(raw(5), Some(vec![1, 0, 2, 0]));
    assert!(out.ts_ms.iter().all(|ts| *ts == 9));
}

#[test]
fn a_short_message_refuses_only_the_tags_past_its_end() {
    let fields = [
        field("a", "0", DataType::Uint16, ByteOrder::Abcd, None),
        field("b", "2", DataType::Uint32, ByteOrder::Abcd, None),
    ];
    let (out, refusals) = decode(&decoder(&fields), &[0, 7, 1]);
    assert_eq!(out.tags, [0]);
    assert_eq!(
        refusals,
        [Refusal {
            tag: Some(1),
            message: "the message has 3 bytes; `b` takes bytes 2 to 5".into(),
        }]
    );
}

#[test]
fn a_write_is_the_values_bytes_in_the_tags_order() {
    let fields = [
        field("t", "0", DataType::Float32, ByteOrder::Cdab, None),
        field("on", "4.0", DataType::Bool, ByteOrder::Abcd, None),
        field("pair", "6", DataType::Int16, ByteOrder::Badc, Some(2)),
    ];
    let decoder = decoder(&fields);
    let float = decoder
        .encode(0, &Written::One(Number::Float(21.0)))
        .expect("encoded");
    assert_eq!(
        (float.topic.as_str(), float.payload),
        ("dev/set", vec![0x00, 0x00, 0x41, 0xA8])
    );
    let on = decoder
        .encode(1, &Written::One(Number::Bool(true)))
        .expect("encoded");
    assert_eq!(on.payload, [1]);
    let pair = decoder
        .encode(2, &Written::Array(vec![Number::Int(1), Number::Int(-2)]))
        .expect("encoded");
    assert_eq!(pair.payload, [1, 0, 0xFE, 0xFF]);
    assert!(
        decoder
            .encode(0, &Written::One(Number::Float(1e40)))
            .is_err()
    );
}

#[test]
fn addresses_are_checked_at_create() {
    let fields = [
        field("a", "x", DataType::Uint16, ByteOrder::Abcd, None),
        field("b", "3", DataType::Bool, ByteOrder::Abcd, None),
        field("c", "3.8", DataType::Bool, ByteOrder::Abcd, None),
        field("d", "3.1", DataType::Int16, ByteOrder::Abcd, None),
    ];
    let refused = BinaryDecoder::create(&[], &fields).err().expect("refused");
    let said: Vec<&str> = refused.iter().map(|i| i.message.as_str()).collect();
    assert_eq!(
        said,
        [
            "`x` is not a byte offset (`0`, `12`, `0x0c`; a BOOL `3.0` to `3.7`)",
            "`3`: a BOOL is one bit: give its byte and bit (`3.0`)",
            "`3.8`: a bit is 0 to 7",
            "`3.1`: only a BOOL takes a bit; a INT16 starts at a byte",
        ]
    );
}
