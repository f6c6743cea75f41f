use std::sync::Mutex;

use prost::Message as _;

use super::*;
use crate::model::{DataType, Quality, Sample, TagSpec, Value};
use crate::mqtt::sparkplug::{MetricTable, Payload};

#[derive(Debug)]
struct FakeBirths {
    devices: Mutex<Vec<DeviceBirth>>,
    changes: watch::Sender<u64>,
}

fn tags() -> Arc<[TagSpec]> {
    vec![TagSpec::plain("t", DataType::Int16)].into()
}

fn device(id: &str, offline: bool) -> DeviceBirth {
    DeviceBirth {
        device_id: id.into(),
        offline,
        tags: tags(),
        metrics: MetricTable::new(id, &tags(), false),
        latest: vec![sample(Value::Int(1), Quality::Good)],
    }
}

fn sample(value: Value, quality: Quality) -> Sample {
    Sample {
        tag: 0,
        value,
        quality,
        ts_ms: 1,
    }
}

impl Births for FakeBirths {
    fn devices(&self) -> Vec<DeviceBirth> {
        self.devices.lock().expect("devices").clone()
    }

    fn device(&self, device_id: &str) -> Option<DeviceBirth> {
        self.devices()
            .into_iter()
            .find(|d| d.device_id == device_id)
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

fn node(name: &str, devices: Vec<DeviceBirth>) -> (EdgeNode, PathBuf) {
    let file = std::env::temp_dir().join(format!("sluice-bdseq-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let mut node = EdgeNode::new(SparkplugTopics::new("g", "e"), file.clone());
    node.set_births(Arc::new(FakeBirths {
        devices: Mutex::new(devices),
        changes: watch::Sender::new(0),
    }));
    (node, file)
}

fn seq(message: &Outgoing) -> Option<u64> {
    Payload::decode(message.payload.as_ref())
        .expect("payload")
        .seq
}

fn kinds(messages: &[Outgoing]) -> Vec<&str> {
    messages
        .iter()
        .map(|m| m.topic.split('/').nth(2).expect("a type"))
        .collect()
}

fn data(device: &str, at: i64, value: Value, quality: Quality) -> Message {
    let table = MetricTable::new(device, &tags(), false);
    Message {
        device: device.into(),
        seq: 1,
        topic: format!("spBv1.0/g/DDATA/e/{device}"),
        payload: sparkplug::device_data(at, &[sample(value, quality)], &table).into(),
        retain: false,
    }
}

#[test]
fn each_connection_takes_the_next_bd_seq_and_keeps_it() {
    let (mut node, file) = node("keep", Vec::new());
    node.connecting();
    assert_eq!(node.bd_seq, 0, "the first connection has bdSeq 0");
    node.connecting();
    assert_eq!(std::fs::read_to_string(&file).expect("kept"), "1");
    let mut again = EdgeNode::new(SparkplugTopics::new("g", "e"), file.clone());
    again.connecting();
    assert_eq!(again.bd_seq, 2, "a restart goes on from the kept one");
    std::fs::write(&file, "255").expect("write");
    let mut wrapped = EdgeNode::new(SparkplugTopics::new("g", "e"), file.clone());
    wrapped.connecting();
    assert_eq!(wrapped.bd_seq, 0, "bdSeq wraps after 255");
    let _ = std::fs::remove_file(file);
}

#[test]
fn births_come_first_with_one_seq_and_deaths_for_offline_devices() {
    let (mut node, file) = node("births", vec![device("a", false), device("b", true)]);
    node.connecting();
    assert!(!node.is_born());
    let births = node.birth();
    assert_eq!(kinds(&births), ["NBIRTH", "DBIRTH", "DBIRTH", "DDEATH"]);
    let seqs: Vec<_> = births.iter().map(seq).collect();
    assert_eq!(seqs, [Some(0), Some(1), Some(2), Some(3)]);
    // A dead device's data without a value is released unpublished; with one,
    // its device is born again first.
    assert!(
        node.record(data("b", now_ms(), Value::None, Quality::Bad))
            .is_none()
    );
    let (before, message) = node
        .record(data("b", now_ms(), Value::Int(5), Quality::Good))
        .expect("published");
    assert_eq!(kinds(&before), ["DBIRTH"]);
    assert_eq!(seq(&before[0]), Some(4));
    let payload = Payload::decode(message.payload.as_ref()).expect("payload");
    assert_eq!(payload.seq, Some(5));
    // The lease going offline and back.
    let gone = node.device_state("a", true);
    assert_eq!(kinds(&gone), ["DDEATH"]);
    assert!(node.device_state("a", true).is_empty(), "one DDEATH");
    assert_eq!(kinds(&node.device_state("a", false)), ["DBIRTH"]);
    // A rebirth starts over at seq 0.
    let rebirth = sparkplug::Payload {
        metrics: vec![sparkplug::Metric {
            name: Some(sparkplug::REBIRTH.into()),
            value: Some(sparkplug::MetricValue::Boolean(true)),
            ..Default::default()
        }],
        ..Default::default()
    };
    let again = node.node_command(&rebirth.encode_to_vec());
    assert_eq!(seq(&again[0]), Some(0));
    assert!(
        node.node_command(b"\xff").is_empty(),
        "a bad NCMD is refused"
    );
    let _ = std::fs::remove_file(file);
}

#[test]
fn a_change_of_devices_births_them_again_and_buries_the_removed() {
    let births = Arc::new(FakeBirths {
        devices: Mutex::new(vec![device("a", false), device("b", false)]),
        changes: watch::Sender::new(0),
    });
    let (mut node, file) = node("changes", Vec::new());
    node.set_births(Arc::clone(&births) as Arc<dyn Births>);
    node.connecting();
    assert!(
        node.rebirth_devices().is_empty(),
        "nothing before the NBIRTH"
    );
    node.birth();
    *births.devices.lock().expect("devices") = vec![device("b", false), device("c", false)];
    let again = node.rebirth_devices();
    let topics: Vec<&str> = again.iter().map(|m| m.topic.as_str()).collect();
    assert_eq!(
        topics,
        [
            "spBv1.0/g/DDEATH/e/a",
            "spBv1.0/g/DBIRTH/e/b",
            "spBv1.0/g/DBIRTH/e/c"
        ]
    );
    let _ = std::fs::remove_file(file);
}

#[test]
fn data_made_before_the_births_is_historical_and_seq_wraps() {
    let (mut node, file) = node("history", vec![device("a", false)]);
    node.connecting();
    let old = data("a", now_ms() - 60_000, Value::Int(1), Quality::Good);
    node.birth();
    let (_, replayed) = node.record(old).expect("published");
    let replayed = Payload::decode(replayed.payload.as_ref()).expect("payload");
    assert_eq!(replayed.metrics[0].is_historical, Some(true));
    let mut last = replayed.seq.expect("seq");
    let mut wrapped = false;
    for _ in 0..300 {
        let (_, live) = node
            .record(data("a", now_ms() + 1_000, Value::Int(2), Quality::Good))
            .expect("published");
        let live = Payload::decode(live.payload.as_ref()).expect("payload");
        assert_eq!(live.metrics[0].is_historical, None);
        let seq = live.seq.expect("seq");
        assert_eq!(seq, (last + 1) % 256);
        wrapped |= seq == 0;
        last = seq;
    }
    assert!(wrapped);
    // Other records pass untouched.
    let event = Message {
        device: String::new(),
        seq: 0,
        topic: "P/M1/event/post/device-online".into(),
        payload: bytes::Bytes::from_static(b"{}"),
        retain: false,
    };
    let (before, same) = node.record(event.clone()).expect("published");
    assert!(before.is_empty());
    assert_eq!(same, event);
    let _ = std::fs::remove_file(file);
}
