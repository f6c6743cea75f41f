use alloc::string::String;
use alloc::vec::Vec;
use alloc::{format, vec};

use sluice_guest::columns::{Cell, Columns};
use sluice_guest::decoder::{Decoder, Field, Refusal, Written};
use sluice_guest::numeric::{ByteOrder, DataType, Number};
use sluice_guest::settings::SettingValue;
use sluice_guest::stages::Tag;

use super::JsonDecoder;

fn field<'a>(address: &'a str, data_type: DataType, array_len: Option<u32>) -> Field<'a> {
    Field {
        key: "t",
        address,
        tag: Tag {
            data_type,
            array_len,
            byte_order: ByteOrder::Abcd,
            factor: 1.0,
            offset: 0.0,
            deadband: 0.0,
            settings: Vec::new(),
        },
        readable: true,
        writable: true,
    }
}

fn decoder(fields: &[Field<'_>]) -> JsonDecoder {
    JsonDecoder::create(&[("commandTopic", SettingValue::Text("dev/7/set"))], fields)
        .unwrap_or_else(|issues| panic!("{issues:?}"))
}

fn decode(decoder: &JsonDecoder, payload: &str) -> (Columns, Vec<Refusal>) {
    let mut out = Columns::default();
    let mut refusals = Vec::new();
    decoder.decode("dev/7/up", payload.as_bytes(), 42, &mut out, &mut refusals);
    (out, refusals)
}

fn cells(out: &Columns) -> Vec<(u32, String)> {
    (0..out.len())
        .map(|i| (out.tags[i], format!("{:?}", out.cell(i))))
        .collect()
}

#[test]
fn every_type_is_found_by_its_pointer_and_taken_as_its_type() {
    let fields = [
        field("/temp", DataType::Float32, None),
        field("/sensors/0/rh", DataType::Uint16, None),
        field("/on", DataType::Bool, None),
        field("/count", DataType::Int64, None),
        field("/name", DataType::String(16), None),
        field("/big", DataType::Uint64, None),
        field("/text", DataType::Float64, None),
        field("/bcd", DataType::Bcd16, None),
        field("/a~1b", DataType::Int16, None),
        field("/list", DataType::Int32, Some(3)),
    ];
    let decoder = decoder(&fields);
    let (out, refusals) = decode(
        &decoder,
        r#"{"temp": 21.1, "sensors": [{"rh": 55}], "on": true, "count": -7,
            "name": "pump 1", "big": 18446744073709551615, "text": " 2.5 ", "bcd": 1234,
            "a/b": -3, "list": [1, -2, 3]}"#,
    );
    assert_eq!(refusals, []);
    assert!(out.ts_ms.iter().all(|ts| *ts == 42));
    assert_eq!(
        cells(&out),
        vec![
            (0, format!("{:?}", Cell::Float(f64::from(21.1f32)))),
            // As a register of the type decodes: 16-bit values are ints.
            (1, format!("{:?}", Cell::Int(55))),
            (2, format!("{:?}", Cell::Boolean(true))),
            (3, format!("{:?}", Cell::Int(-7))),
            (4, format!("{:?}", Cell::Text("pump 1"))),
            (5, format!("{:?}", Cell::Uint(u64::MAX))),
            (6, format!("{:?}", Cell::Float(2.5))),
            (7, format!("{:?}", Cell::Int(1234))),
            (8, format!("{:?}", Cell::Int(-3))),
            (9, format!("{:?}", Cell::Array { start: 0, len: 3 })),
        ]
    );
    let elements: Vec<String> = (0..3).map(|e| format!("{:?}", out.element(e))).collect();
    assert_eq!(elements, ["Int(1)", "Int(-2)", "Int(3)"]);
}

#[test]
fn only_the_values_at_fault_are_refused_with_the_reason() {
    let fields = [
        field("/ok", DataType::Int16, None),
        field("/missing", DataType::Int16, None),
        field("/null", DataType::Int16, None),
        field("/big", DataType::Int16, None),
        field("/half", DataType::Uint32, None),
        field("/word", DataType::Float32, None),
        field("/obj", DataType::Float32, None),
        field("/long", DataType::String(4), None),
        field("/short", DataType::Int16, Some(3)),
        field("/ok", DataType::Int16, Some(2)),
    ];
    let decoder = decoder(&fields);
    let (out, refusals) = decode(
        &decoder,
        r#"{"ok": 5, "null": null, "big": 70000, "half": 2.5, "word": "warm",
            "obj": {"v": 1}, "long": "pump 12", "short": [1, 2]}"#,
    );
    assert_eq!(cells(&out), vec![(0, format!("{:?}", Cell::Int(5)))]);
    let said: Vec<(Option<u32>, &str)> = refusals
        .iter()
        .map(|r| (r.tag, r.message.as_str()))
        .collect();
    assert_eq!(
        said,
        vec![
            (Some(1), "`/missing`: no `/missing` in the message"),
            (Some(2), "`/null`: `/null` is null"),
            (Some(3), "`/big`: 70000 is out of the range of INT16"),
            (Some(4), "`/half`: 2.5 is out of the range of UINT32"),
            (Some(5), "`/word`: \"warm\" is not a number"),
            (Some(6), "`/obj`: an object or an array, not a value"),
            (
                Some(7),
                "`/long`: \"pump 12\" is longer than the tag's 4 characters"
            ),
            (
                Some(8),
                "`/short`: an array of 2 values, for an array tag of 3"
            ),
            (Some(9), "`/ok`: not an array, for an array tag of 2"),
        ]
    );
}

#[test]
fn a_message_that_is_not_json_refuses_every_tag_at_once() {
    let decoder = decoder(&[field("/t", DataType::Int16, None)]);
    let (out, refusals) = decode(&decoder, "temp=21");
    assert!(out.is_empty());
    assert_eq!(refusals.len(), 1);
    assert_eq!(refusals[0].tag, None);
    assert!(
        refusals[0].message.starts_with("the message is not JSON: "),
        "{}",
        refusals[0].message
    );
    // Text that is not UTF-8 is not JSON, also where no tag looks.
    let mut out = Columns::default();
    let mut refusals = Vec::new();
    decoder.decode(
        "dev/7/up",
        b"{\"note\": \"\xff\", \"t\": 1}",
        42,
        &mut out,
        &mut refusals,
    );
    assert!(out.is_empty());
    assert_eq!(refusals.len(), 1);
    assert!(
        refusals[0]
            .message
            .starts_with("the message is not JSON: it is not UTF-8 text"),
        "{}",
        refusals[0].message
    );
}

#[test]
fn a_write_nests_the_value_at_its_pointer_on_the_command_topic() {
    let fields = [
        field("/set/temp", DataType::Float32, None),
        field("/modes", DataType::Uint16, Some(2)),
    ];
    let decoder = decoder(&fields);
    let one = decoder
        .encode(0, &Written::One(Number::Float(21.5)))
        .expect("encoded");
    assert_eq!(one.topic, "dev/7/set");
    assert_eq!(
        String::from_utf8(one.payload).unwrap(),
        r#"{"set":{"temp":21.5}}"#
    );
    let array = decoder
        .encode(1, &Written::Array(vec![Number::Int(1), Number::Uint(2)]))
        .expect("encoded");
    assert_eq!(
        String::from_utf8(array.payload).unwrap(),
        r#"{"modes":[1,2]}"#
    );
    assert_eq!(
        decoder.encode(0, &Written::One(Number::Float(1e40))),
        Err("1e40 is out of the range of FLOAT32".into())
    );
    assert_eq!(
        decoder.encode(1, &Written::One(Number::Int(1))),
        Err("the tag is an array of 2 values".into())
    );
    let silent = JsonDecoder::create(&[], &fields).expect("created");
    assert!(
        silent
            .encode(0, &Written::One(Number::Int(1)))
            .is_err_and(|e| e.contains("no `commandTopic`"))
    );
}

#[test]
fn addresses_and_settings_are_checked_at_create() {
    let refused = JsonDecoder::create(
        &[("interval", SettingValue::Int(5))],
        &[
            field("temp", DataType::Int16, None),
            field("/a~2", DataType::Int16, None),
        ],
    )
    .err()
    .expect("refused");
    let said: Vec<(Option<u32>, &str, &str)> = refused
        .iter()
        .map(|i| (i.tag, i.key.as_str(), i.message.as_str()))
        .collect();
    assert_eq!(said[0].1, "interval");
    assert_eq!(
        &said[1..],
        [
            (
                Some(0),
                "address",
                "`temp` is not a JSON Pointer: it starts with `/` (`/temp`)"
            ),
            (
                Some(1),
                "address",
                "`/a~2`: `~` is written `~0` in a JSON Pointer, `/` in a member `~1`"
            ),
        ]
    );
}

#[test]
fn a_message_may_say_when_its_values_were_measured() {
    let fields = [field("/t", DataType::Int16, None)];
    let decoder = JsonDecoder::create(&[("timestamp", SettingValue::Text("/at"))], &fields)
        .unwrap_or_else(|issues| panic!("{issues:?}"));
    let (out, _) = decode(&decoder, r#"{"t": 1, "at": 1700000000123}"#);
    assert_eq!(out.ts_ms, [1_700_000_000_123]);
    // No number there: stamped when it arrived.
    let (out, _) = decode(&decoder, r#"{"t": 1, "at": "yesterday"}"#);
    assert_eq!(out.ts_ms, [42]);
    assert!(JsonDecoder::create(&[("timestamp", SettingValue::Text("at"))], &fields).is_err());
}
