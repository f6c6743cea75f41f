use prost::Message as _;

use super::*;
use crate::model::{DataType, Quality, Sample, TagSpec, Value};

fn tag(key: &str, data_type: DataType, factor: f64) -> TagSpec {
    TagSpec {
        factor,
        ..TagSpec::plain(key, data_type)
    }
}

fn sample(tag: u32, value: Value, quality: Quality) -> Sample {
    Sample {
        tag,
        value,
        quality,
        ts_ms: 1_700_000_000_000,
    }
}

#[test]
fn datatypes_follow_the_tag_type_and_its_scaling() {
    assert_eq!(
        MetricType::of(&tag("a", DataType::Int16, 1.0), false),
        MetricType::Int16
    );
    assert_eq!(
        MetricType::of(&tag("a", DataType::Uint32, 1.0), false),
        MetricType::UInt32
    );
    assert_eq!(
        MetricType::of(&tag("a", DataType::Bcd16, 1.0), false),
        MetricType::UInt16
    );
    assert_eq!(
        MetricType::of(&tag("a", DataType::Float32, 1.0), false),
        MetricType::Float
    );
    assert_eq!(
        MetricType::of(&tag("a", DataType::Int16, 0.1), false),
        MetricType::Double
    );
    assert_eq!(
        MetricType::of(&tag("a", DataType::Bool, 0.1), false),
        MetricType::Boolean
    );
    assert_eq!(
        MetricType::of(&tag("a", DataType::String, 1.0), false),
        MetricType::String
    );
    for code in 1..=12 {
        assert_eq!(
            MetricType::from_code(code).map(MetricType::code),
            Some(code)
        );
    }
    assert_eq!(MetricType::from_code(13), None);
}

#[test]
fn signed_values_are_written_in_twos_complement() {
    assert_eq!(
        MetricType::Int16.encode(&Value::Int(-2)),
        Some(MetricValue::Int(0xffff_fffe))
    );
    assert_eq!(
        MetricType::Int64.encode(&Value::Int(-1)),
        Some(MetricValue::Long(u64::MAX))
    );
    assert_eq!(
        MetricType::UInt32.encode(&Value::Uint(4_000_000_000)),
        Some(MetricValue::Long(4_000_000_000))
    );
    assert_eq!(
        MetricType::Double.encode(&Value::Int(7)),
        Some(MetricValue::Double(7.0))
    );
    assert_eq!(MetricType::Int32.encode(&Value::None), None);
    assert_eq!(MetricType::Int32.encode(&Value::Text("x".into())), None);
}

/// `int16AsInt32`: an `INT16` tag is an Int32 metric in the table (births and
/// data alike), and its negative values carry the same 32 bits.
#[test]
fn int16_tags_can_be_published_as_int32() {
    let int16 = tag("a", DataType::Int16, 1.0);
    assert_eq!(MetricType::of(&int16, true), MetricType::Int32);
    assert_eq!(
        MetricType::of(&tag("b", DataType::Uint16, 1.0), true),
        MetricType::UInt16
    );
    let table = MetricTable::new("m1", std::slice::from_ref(&int16), true);
    assert_eq!(table.get(0).map(|(_, t)| t), Some(MetricType::Int32));
    assert_eq!(
        MetricType::Int32.encode(&Value::Int(-2)),
        MetricType::Int16.encode(&Value::Int(-2))
    );
}

#[test]
fn aliases_are_stable_distinct_and_fit_a_javascript_number() {
    assert_eq!(alias("m1", "temp"), alias("m1", "temp"));
    assert_ne!(alias("m1", "temp"), alias("m2", "temp"));
    // The separator keeps ("ab", "c") apart from ("a", "bc").
    assert_ne!(alias("ab", "c"), alias("a", "bc"));
    assert!(alias("m1", "temp") < 1 << 53);
}

#[test]
fn data_carries_aliases_qualities_and_appends_its_seq() {
    let tags = [
        tag("t", DataType::Int16, 1.0),
        tag("u", DataType::Uint16, 1.0),
    ];
    let metrics = MetricTable::new("m1", &tags, false);
    let samples = [
        sample(0, Value::Int(-5), Quality::Good),
        sample(1, Value::Uint(9), Quality::Uncertain),
        sample(1, Value::Uint(9), Quality::Bad),
        sample(7, Value::Uint(1), Quality::Good),
    ];
    let stored = device_data(1_700_000_000_001, &samples, &metrics);
    let payload = Payload::decode(sequenced(stored.clone(), 200).as_slice()).expect("payload");
    assert_eq!(payload.seq, Some(200));
    assert_eq!(payload.timestamp, Some(1_700_000_000_001));
    assert_eq!(payload.metrics.len(), 3, "the unknown tag is left out");
    let [good, uncertain, bad] = &payload.metrics[..] else {
        unreachable!()
    };
    assert_eq!(good.alias, Some(alias("m1", "t")));
    assert_eq!(good.name, None);
    assert_eq!(good.datatype, Some(2));
    assert_eq!(good.value, Some(MetricValue::Int(-5i32 as u32)));
    assert_eq!(good.properties, None);
    let quality = |m: &Metric| {
        m.properties
            .clone()
            .map(|p| (p.keys, p.values[0].value.clone()))
    };
    assert_eq!(
        quality(uncertain),
        Some((vec![QUALITY.to_owned()], Some(PropertyValueKind::Int(64))))
    );
    assert_eq!(uncertain.value, Some(MetricValue::Int(9)));
    assert_eq!(
        quality(bad),
        Some((vec![QUALITY.to_owned()], Some(PropertyValueKind::Int(0))))
    );
    assert_eq!((bad.value.clone(), bad.is_null), (None, Some(true)));

    let replayed =
        Payload::decode(historical(&stored, 3).expect("rewrite").as_slice()).expect("payload");
    assert_eq!(replayed.seq, Some(3));
    assert!(
        replayed
            .metrics
            .iter()
            .all(|m| m.is_historical == Some(true))
    );
    assert!(historical(b"\xff\xff", 0).is_err());
}

#[test]
fn births_name_every_metric_and_deaths_carry_the_bd_seq() {
    let tags = vec![tag("t", DataType::Float32, 1.0)];
    let birth = DeviceBirth {
        device_id: "m1".into(),
        offline: false,
        metrics: MetricTable::new("m1", &tags, false),
        tags: tags.into(),
        latest: vec![sample(0, Value::Float(1.5), Quality::Good)],
    };
    let payload = Payload::decode(device_birth(&birth, 5, 1).as_slice()).expect("payload");
    assert_eq!(payload.seq, Some(1));
    assert_eq!(payload.metrics[0].name.as_deref(), Some("t"));
    assert_eq!(payload.metrics[0].alias, Some(alias("m1", "t")));
    assert_eq!(payload.metrics[0].value, Some(MetricValue::Float(1.5)));

    let node = Payload::decode(node_birth(42, 5).as_slice()).expect("payload");
    assert_eq!(node.seq, Some(0));
    assert_eq!(node.metrics[0].name.as_deref(), Some(BD_SEQ));
    assert_eq!(node.metrics[0].value, Some(MetricValue::Long(42)));
    assert_eq!(node.metrics[1].name.as_deref(), Some(REBIRTH));
    let death = Payload::decode(node_death(42, 6).as_slice()).expect("payload");
    assert_eq!(death.seq, None);
    assert_eq!(death.metrics[0].value, Some(MetricValue::Long(42)));
    let gone = Payload::decode(device_death(6, 255).as_slice()).expect("payload");
    assert_eq!((gone.seq, gone.metrics.len()), (Some(255), 0));
}

#[test]
fn commands_are_read_by_name_or_alias_with_their_types() {
    let metric = |name: Option<&str>, alias, datatype: MetricType, value| Metric {
        name: name.map(str::to_owned),
        alias,
        datatype: Some(datatype.code()),
        value: Some(value),
        ..Metric::default()
    };
    let rebirth = Payload {
        timestamp: Some(1),
        metrics: vec![metric(
            Some(REBIRTH),
            None,
            MetricType::Boolean,
            MetricValue::Boolean(true),
        )],
        seq: None,
    };
    assert_eq!(asks_rebirth(&rebirth.encode_to_vec()), Ok(true));
    assert_eq!(asks_rebirth(&Payload::default().encode_to_vec()), Ok(false));
    assert!(matches!(
        asks_rebirth(b"\x0a\xff"),
        Err(CommandError::Decode(_))
    ));

    let command = Payload {
        timestamp: Some(77),
        metrics: vec![
            metric(
                Some("sp"),
                None,
                MetricType::Int16,
                MetricValue::Int(-3i32 as u32),
            ),
            metric(
                None,
                Some(9),
                MetricType::Int64,
                MetricValue::Long(u64::MAX),
            ),
            metric(None, Some(10), MetricType::Double, MetricValue::Double(2.5)),
        ],
        seq: None,
    };
    let read = device_command(&command.encode_to_vec()).expect("a command");
    assert_eq!(read.timestamp, 77);
    assert_eq!(read.writes[0].metric, MetricRef::Name("sp".into()));
    assert_eq!(read.writes[0].value, serde_json::json!(-3));
    assert_eq!(read.writes[1].metric, MetricRef::Alias(9));
    assert_eq!(read.writes[1].value, serde_json::json!(-1));
    assert_eq!(read.writes[2].value, serde_json::json!(2.5));

    let nameless = Payload {
        metrics: vec![Metric::default()],
        ..Payload::default()
    };
    assert_eq!(
        device_command(&nameless.encode_to_vec()),
        Err(CommandError::Unnamed(0))
    );
    let null = Payload {
        metrics: vec![Metric {
            name: Some("sp".into()),
            is_null: Some(true),
            ..Metric::default()
        }],
        ..Payload::default()
    };
    assert_eq!(
        device_command(&null.encode_to_vec()),
        Err(CommandError::NoValue("sp".into()))
    );
}
