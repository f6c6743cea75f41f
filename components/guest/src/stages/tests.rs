use alloc::vec;
use alloc::vec::Vec;

use super::chain::Step;
use super::*;
use crate::columns::{Cell, kind, quality, span_bits};

fn tag(data_type: DataType, byte_order: ByteOrder) -> Tag<'static> {
    Tag {
        data_type,
        array_len: None,
        byte_order,
        factor: 1.0,
        offset: 0.0,
        deadband: 0.0,
        settings: Vec::new(),
    }
}

/// One raw sample per tag over `bytes`, `width` bytes each.
fn raw(bytes: &[u8], width: u32) -> Columns {
    let mut columns = Columns {
        bytes: bytes.to_vec(),
        ..Columns::default()
    };
    for tag in 0..bytes.len() as u32 / width {
        columns.push(
            tag,
            quality::GOOD,
            kind::RAW,
            span_bits(tag * width, width),
            9,
        );
    }
    columns
}

const DEFAULT: [(&str, SettingValue<'static>); 6] = [
    ("0.use", SettingValue::Text("swap_bytes")),
    ("1.use", SettingValue::Text("decode")),
    ("2.use", SettingValue::Text("scale")),
    ("2.decimals", SettingValue::Int(6)),
    ("3.use", SettingValue::Text("check_range")),
    ("4.use", SettingValue::Text("deadband")),
];

#[test]
fn the_chain_does_what_its_stages_do_one_after_another() {
    let mut t = tag(DataType::Int16, ByteOrder::Badc);
    t.factor = 0.1;
    t.settings.push(("max", SettingValue::Float(100.0)));
    let mut f = tag(DataType::Float32, ByteOrder::Cdab);
    f.deadband = 1.0;
    let tags = [t, f];
    let chain = <Chain>::create(&DEFAULT, &tags).unwrap();
    // INT16 1234 byte-swapped, then FLOAT32 12.5 word-swapped.
    let mut batch = raw(&[0xD2, 0x04], 2);
    batch.bytes.extend_from_slice(&[0x00, 0x00, 0x41, 0x48]);
    batch.push(1, quality::GOOD, kind::RAW, span_bits(2, 4), 9);
    let mut one_by_one = batch.clone();
    chain.process(&mut batch);
    assert_eq!(batch.cell(0), Cell::Float(123.4));
    assert_eq!(batch.quality(0), quality::UNCERTAIN);
    assert_eq!(batch.cell(1), Cell::Float(12.5));

    let empty: [(&str, SettingValue<'_>); 0] = [];
    SwapBytes::create(&empty, &tags)
        .unwrap()
        .process(&mut one_by_one);
    Decode::create(&empty, &tags)
        .unwrap()
        .process(&mut one_by_one);
    Scale::create(&[("decimals", SettingValue::Int(6))], &tags)
        .unwrap()
        .process(&mut one_by_one);
    CheckRange::create(&empty, &tags)
        .unwrap()
        .process(&mut one_by_one);
    Deadband::create(&empty, &tags)
        .unwrap()
        .process(&mut one_by_one);
    assert_eq!(batch, one_by_one);
}

/// The elements of sample `i`.
fn elements(batch: &Columns, i: usize) -> Vec<Cell<'_>> {
    let range = batch.array_range(i).expect("an array");
    range.map(|e| batch.element(e)).collect()
}

#[test]
fn an_array_tag_goes_through_every_stage_element_by_element() {
    // FLOAT32 x 2 in CDAB, x 2 + 1, at most 10, band 0.5.
    let mut f = tag(DataType::Float32, ByteOrder::Cdab);
    f.array_len = Some(2);
    f.factor = 2.0;
    f.offset = 1.0;
    f.deadband = 0.5;
    f.settings.push(("max", SettingValue::Float(10.0)));
    // INT16 x 3, no scaling: stays integers.
    let mut n = tag(DataType::Int16, ByteOrder::Abcd);
    n.array_len = Some(3);
    let chain = <Chain>::create(&DEFAULT, &[f, n]).unwrap();
    let round = |first: [u8; 4], second: [u8; 4]| {
        let mut bytes = Vec::new();
        for value in [first, second] {
            bytes.extend_from_slice(&[value[2], value[3], value[0], value[1]]);
        }
        bytes.extend_from_slice(&[0x00, 0x01, 0xFF, 0xFE, 0x7F, 0xFF]);
        let mut batch = Columns {
            bytes,
            ..Columns::default()
        };
        batch.push(0, quality::GOOD, kind::RAW, span_bits(0, 8), 9);
        batch.push(1, quality::GOOD, kind::RAW, span_bits(8, 6), 9);
        chain.process(&mut batch);
        batch
    };
    // 1.5 and 2.5: 4 and 6.
    let batch = round(1.5f32.to_be_bytes(), 2.5f32.to_be_bytes());
    assert_eq!(elements(&batch, 0), [Cell::Float(4.0), Cell::Float(6.0)]);
    assert_eq!(batch.quality(0), quality::GOOD);
    assert_eq!(
        elements(&batch, 1),
        [Cell::Int(1), Cell::Int(-2), Cell::Int(32767)]
    );
    // 1.6 and 2.5 (4.2 and 6): every element within the band, dropped; the
    // INT16 array has no band and passes.
    let batch = round(1.6f32.to_be_bytes(), 2.5f32.to_be_bytes());
    assert_eq!(batch.tags, [1]);
    // 1.5 and 5 (4 and 11): one element moved past the band, and out of range.
    let batch = round(1.5f32.to_be_bytes(), 5.0f32.to_be_bytes());
    assert_eq!(elements(&batch, 0), [Cell::Float(4.0), Cell::Float(11.0)]);
    assert_eq!(batch.quality(0), quality::UNCERTAIN);
    // A NaN element makes the whole array BAD.
    let batch = round(f32::NAN.to_be_bytes(), 5.0f32.to_be_bytes());
    assert_eq!(
        (batch.cell(0), batch.quality(0)),
        (Cell::None, quality::BAD)
    );
    // Too few bytes for its elements: BAD.
    let mut short = Columns {
        bytes: alloc::vec![0; 6],
        ..Columns::default()
    };
    short.push(0, quality::GOOD, kind::RAW, span_bits(0, 6), 9);
    chain.process(&mut short);
    assert_eq!(
        (short.cell(0), short.quality(0)),
        (Cell::None, quality::BAD)
    );
}

#[test]
fn stages_with_nothing_to_do_for_any_tag_still_do_the_rest() {
    // No factor, no range, no band on any tag: scale, check_range and deadband
    // keep nothing per tag; scale still rounds, and every value passes.
    let tags = [tag(DataType::Float32, ByteOrder::Abcd)];
    let settings = [
        ("0.use", SettingValue::Text("decode")),
        ("1.use", SettingValue::Text("scale")),
        ("1.decimals", SettingValue::Int(1)),
        ("2.use", SettingValue::Text("check_range")),
        ("3.use", SettingValue::Text("deadband")),
    ];
    let chain = <Chain>::create(&settings, &tags).unwrap();
    for _ in 0..2 {
        // FLOAT32 12.25 (exact), the same value twice.
        let mut batch = raw(&[0x41, 0x44, 0x00, 0x00], 4);
        chain.process(&mut batch);
        assert_eq!(batch.len(), 1, "without a band an unchanged value passes");
        assert_eq!(batch.cell(0), Cell::Float(12.3));
        assert_eq!(batch.quality(0), quality::GOOD);
    }
}

#[test]
fn the_chain_keeps_each_stages_memory_until_reset() {
    let mut p = tag(DataType::Uint16, ByteOrder::Abcd);
    p.deadband = 1.5;
    let chain = <Chain>::create(&DEFAULT, &[p]).unwrap();
    let kept = |chain: &Chain, raw_value: u8| {
        let mut batch = raw(&[0, raw_value], 2);
        chain.process(&mut batch);
        batch.len()
    };
    assert_eq!(
        [kept(&chain, 100), kept(&chain, 101), kept(&chain, 102)],
        [1, 0, 1]
    );
    chain.reset();
    assert_eq!(kept(&chain, 102), 1);
}

#[test]
fn issues_name_the_stage_they_are_about() {
    let mut bad = tag(DataType::Int16, ByteOrder::Abcd);
    bad.deadband = -1.0;
    let settings = [
        ("0.use", SettingValue::Text("scale")),
        ("0.decimals", SettingValue::Int(40)),
        ("1.use", SettingValue::Text("deadband")),
        ("2.use", SettingValue::Text("nope")),
        ("3.decimals", SettingValue::Int(1)),
        ("decimals", SettingValue::Int(1)),
    ];
    let Err(issues) = <Chain>::create(&settings, &[bad]) else {
        panic!("settings accepted")
    };
    let keys: Vec<(&str, Option<u32>)> = issues.iter().map(|i| (i.key.as_str(), i.tag)).collect();
    assert_eq!(
        keys,
        vec![
            ("decimals", None),
            ("0.decimals", None),
            ("1.deadband", Some(0)),
            ("2.use", None),
            ("3.use", None),
        ]
    );
    assert!(
        issues[3].message.contains("`nope` is not a built-in stage"),
        "{}",
        issues[3].message
    );
}

#[test]
fn bytes_that_do_not_decode_make_the_sample_bad() {
    let tags = [tag(DataType::Bcd16, ByteOrder::Abcd)];
    let chain = <Chain>::create(&DEFAULT, &tags).unwrap();
    let mut batch = raw(&[0x12, 0xF4], 2);
    // A span past the buffer, as a faulty codec might send.
    batch.push(0, quality::GOOD, kind::RAW, span_bits(40, 2), 9);
    chain.process(&mut batch);
    assert_eq!(
        (batch.cell(0), batch.quality(0)),
        (Cell::None, quality::BAD)
    );
    assert_eq!(
        (batch.cell(1), batch.quality(1)),
        (Cell::None, quality::BAD)
    );
}

/// A plug that adds 1000 to every float, or breaks the batch's columns.
struct Shift {
    ragged: bool,
    resets: core::cell::Cell<u32>,
}

impl Plug for Shift {
    fn process(&self, batch: &mut Columns) {
        if self.ragged {
            batch.tags.push(7);
            return;
        }
        for i in 0..batch.len() {
            if let Cell::Float(v) = batch.cell(i) {
                batch.set_float(i, v + 1000.0);
            }
        }
    }

    fn reset(&self) {
        self.resets.set(self.resets.get() + 1);
    }
}

fn shift(ragged: bool) -> Shift {
    Shift {
        ragged,
        resets: core::cell::Cell::new(0),
    }
}

/// The settings of the default chain with a plug at position 3; its own
/// settings (`3.*`) are not the chain's to read.
const PLUGGED: [(&str, SettingValue<'static>); 8] = [
    ("0.use", SettingValue::Text("swap_bytes")),
    ("1.use", SettingValue::Text("decode")),
    ("2.use", SettingValue::Text("scale")),
    ("3.use", SettingValue::Text("operators_own")),
    ("3.whatever", SettingValue::Int(1)),
    ("4.use", SettingValue::Text("check_range")),
    ("5.use", SettingValue::Text("deadband")),
    ("5.keep_last", SettingValue::Boolean(true)),
];

#[test]
fn a_plug_runs_at_its_position_between_the_built_in_stages() {
    let mut t = tag(DataType::Int16, ByteOrder::Abcd);
    t.factor = 0.5;
    t.settings.push(("max", SettingValue::Float(100.0)));
    let settings = &PLUGGED[..7];
    let chain = Chain::with_plug(settings, &[t], Some((3, shift(false)))).unwrap();
    let mut batch = raw(&[0x00, 0x0A], 2);
    chain.process(&mut batch);
    // 10 scaled to 5, shifted to 1005, then out of range for `check_range` after it.
    assert_eq!(batch.cell(0), Cell::Float(1005.0));
    assert_eq!(batch.quality(0), quality::UNCERTAIN);
    chain.reset();
    let Step::Plugged(plug) = &chain.steps[3] else {
        panic!("the plug is not at position 3")
    };
    assert_eq!(plug.resets.get(), 1);
}

#[test]
fn a_batch_a_plug_breaks_goes_back_untouched_by_the_later_stages() {
    let mut t = tag(DataType::Int16, ByteOrder::Abcd);
    t.factor = 0.5;
    // `check_range` after the plug would make 5 UNCERTAIN.
    t.settings.push(("max", SettingValue::Float(1.0)));
    let chain = Chain::with_plug(&PLUGGED[..7], &[t], Some((3, shift(true)))).unwrap();
    let mut batch = raw(&[0x00, 0x0A], 2);
    chain.process(&mut batch);
    assert!(!batch.is_aligned());
    assert_eq!(batch.cell(0), Cell::Float(5.0), "decoded and scaled only");
    assert_eq!(batch.quality(0), quality::GOOD);
}

#[test]
fn the_chain_checks_its_own_settings_around_a_plug() {
    let tags = [tag(DataType::Int16, ByteOrder::Abcd)];
    let Err(issues) = Chain::with_plug(&PLUGGED, &tags, Some((3, shift(false)))) else {
        panic!("settings accepted")
    };
    let keys: Vec<&str> = issues.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(keys, ["5.keep_last"]);
    let Err(issues) = Chain::with_plug(&PLUGGED[..3], &tags, Some((5, shift(false)))) else {
        panic!("a plug past the stages accepted")
    };
    assert_eq!(issues[0].key, "5.use");
}
