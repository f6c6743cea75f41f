//! The Modbus vertical slice end to end: a real Modbus server (pymodbus, libmodbus,
//! or the built-in simulator), the `sluice` binary, and a real MQTT broker
//! (mosquitto), checking the decoded values and payloads a platform receives.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::engine::{Engine, scratch_dir};
use support::mqtt::{Message, Subscriber};
use support::peers::{LibModbus, Mosquitto, PyModbus, free_port};

/// Registers of a big-endian value as they appear on the wire in `order`.
fn wire(be: &[u8], order: &str) -> Vec<u16> {
    let mut words: Vec<[u8; 2]> = be.chunks(2).map(|c| [c[0], c[1]]).collect();
    if matches!(order, "CDAB" | "DCBA") {
        words.reverse();
    }
    if matches!(order, "BADC" | "DCBA") {
        words.iter_mut().for_each(|w| w.swap(0, 1));
    }
    words.into_iter().map(u16::from_be_bytes).collect()
}

fn config(
    modbus_port: u16,
    mqtt_port: u16,
    http_port: u16,
    extra_collector: &str,
    devices: &str,
) -> String {
    format!(
        "collector:
  workerThreads: 2
  perDeviceTimeoutMs: 2000
  reportMode: BATCH
  mqtt:
    brokerUrl: tcp://127.0.0.1:{mqtt_port}
    clientId: sluice-test-{modbus_port}
    qos: 1
    keepAliveSec: 5
  http:
    listen: 127.0.0.1:{http_port}
  wal:
    dir: ./data
  backoff:
    baseMs: 100
    maxMs: 400
  lease:
    scanIntervalMs: 200
{extra_collector}devices:
{devices}"
    )
}

/// The last report on `topic` that carries every key in `keys`.
fn last_report(messages: &[Message], topic: &str) -> Option<Value> {
    messages
        .iter()
        .rev()
        .find(|m| m.topic == topic)
        .map(Message::json)
}

fn values_by_key(report: &Value) -> std::collections::HashMap<String, (Value, String)> {
    report["values"]
        .as_array()
        .expect("values")
        .iter()
        .map(|v| {
            (
                v["key"].as_str().expect("key").to_owned(),
                (
                    v["value"].clone(),
                    v["quality"].as_str().expect("quality").to_owned(),
                ),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pymodbus_registers_in_every_type_and_byte_order_arrive_decoded() {
    let mut hr: Vec<u16> = Vec::new();
    let mut tags = String::new();
    let mut expected: Vec<(&str, Value)> = Vec::new();
    let mut add = |key: &'static str,
                   data_type: &str,
                   order: &str,
                   registers: Vec<u16>,
                   value: Value,
                   extra: &str| {
        let address = 40001 + hr.len();
        tags.push_str(&format!(
            "          - {{ key: {key}, address: '{address}', dataType: {data_type}, byteOrder: {order}, periodMs: 200{extra} }}\n"
        ));
        hr.extend(registers);
        expected.push((key, value));
    };
    add(
        "i16",
        "INT16",
        "ABCD",
        wire(&(-300i16).to_be_bytes(), "ABCD"),
        json!(-300),
        "",
    );
    add(
        "i16_swapped",
        "INT16",
        "BADC",
        wire(&(-300i16).to_be_bytes(), "BADC"),
        json!(-300),
        "",
    );
    add("u16", "UINT16", "ABCD", vec![65000], json!(65000), "");
    for order in ["ABCD", "BADC", "CDAB", "DCBA"] {
        let key: &'static str = Box::leak(format!("f32_{order}").into_boxed_str());
        add(
            key,
            "FLOAT32",
            order,
            wire(&12.5f32.to_be_bytes(), order),
            json!(12.5),
            "",
        );
        let key: &'static str = Box::leak(format!("i32_{order}").into_boxed_str());
        add(
            key,
            "INT32",
            order,
            wire(&(-123_456i32).to_be_bytes(), order),
            json!(-123_456),
            "",
        );
        let key: &'static str = Box::leak(format!("f64_{order}").into_boxed_str());
        add(
            key,
            "FLOAT64",
            order,
            wire(&(-2.25f64).to_be_bytes(), order),
            json!(-2.25),
            "",
        );
    }
    add(
        "u32",
        "UINT32",
        "CDAB",
        wire(&4_000_000_000u32.to_be_bytes(), "CDAB"),
        json!(4_000_000_000u64),
        "",
    );
    add(
        "u64",
        "UINT64",
        "ABCD",
        wire(&u64::MAX.to_be_bytes(), "ABCD"),
        json!(u64::MAX),
        "",
    );
    add("bcd16", "BCD16", "ABCD", vec![0x1234], json!(1234), "");
    add(
        "bcd32",
        "BCD32",
        "ABCD",
        vec![0x0012, 0x3456],
        json!(123_456),
        "",
    );
    add("bad_bcd", "BCD16", "ABCD", vec![0x12F4], Value::Null, "");
    add(
        "text",
        "STRING",
        "ABCD",
        vec![0x4142, 0x4344, 0x4500],
        json!("ABCDE"),
        ", length: 5",
    );
    add(
        "scaled",
        "INT16",
        "ABCD",
        vec![1234],
        json!(123.4),
        ", factor: 0.1",
    );
    add(
        "offset",
        "UINT16",
        "ABCD",
        vec![50],
        json!(-25.0),
        ", factor: 0.5, offset: -50",
    );
    add(
        "ranged",
        "UINT16",
        "ABCD",
        vec![150],
        json!(150),
        ", min: 0, max: 100",
    );
    add("bit", "BOOL", "ABCD", vec![0b1000], json!(true), "");
    let bit_register = 40001 + hr.len() - 1;
    let map = json!({
        "hr": { "0": hr },
        "ir": { "0": [777] },
        "co": { "0": [1, 0, 1] },
        "di": { "0": [0, 1] },
    });
    let modbus = PyModbus::start(&map);
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect(broker.port()).await;
    let http = free_port();
    let devices = format!(
        "  - deviceId: meter-1
    productId: P1
    deviceNum: D1
    channels:
      - channelId: main
        protocol: modbus-tcp
        host: 127.0.0.1
        port: {port}
        unitId: 3
        readTimeoutMs: 1000
        tags:
{tags}          - {{ key: bit3, address: '{bit_register}.3', dataType: BOOL, periodMs: 200 }}
          - {{ key: bit2, address: '{bit_register}.2', dataType: BOOL, periodMs: 200 }}
          - {{ key: input, address: '30001', dataType: INT16, periodMs: 200 }}
          - {{ key: coil0, address: '00001', dataType: BOOL, periodMs: 200 }}
          - {{ key: coil1, address: '00002', dataType: BOOL, periodMs: 200 }}
          - {{ key: discrete, address: '10002', dataType: BOOL, periodMs: 200 }}
          - {{ key: unmapped, address: '40500', dataType: INT16, periodMs: 200 }}
          - {{ key: write_only, address: '40001', dataType: INT16, periodMs: 0, access: W }}
",
        port = modbus.port(),
    );
    let dir = scratch_dir("pymodbus-types");
    let mut engine = Engine::start(
        &dir,
        &config(modbus.port(), broker.port(), http, "", &devices),
    );
    let messages = subscriber
        .wait_until(Duration::from_secs(20), "two reports", |m| {
            m.iter()
                .filter(|m| m.topic == "P1/D1/property/post")
                .count()
                >= 2
        })
        .await;
    engine.assert_running();
    let report = last_report(&messages, "P1/D1/property/post").expect("a report");
    assert_eq!(report["productId"], "P1");
    assert_eq!(report["deviceNum"], "D1");
    let values = values_by_key(&report);
    for (key, value) in &expected {
        let (got, quality) = values
            .get(*key)
            .unwrap_or_else(|| panic!("no value for {key} in {report}"));
        assert_eq!(got, value, "{key}: {report}");
        let want = match *key {
            "bad_bcd" => "BAD",
            "ranged" => "UNCERTAIN",
            _ => "GOOD",
        };
        assert_eq!(quality, want, "{key}");
    }
    for (key, value) in [
        ("bit3", json!(true)),
        ("bit2", json!(false)),
        ("input", json!(777)),
        ("coil0", json!(true)),
        ("coil1", json!(false)),
        ("discrete", json!(true)),
    ] {
        assert_eq!(values[key], (value, "GOOD".to_owned()), "{key}");
    }
    assert_eq!(
        values["unmapped"],
        (Value::Null, "BAD".to_owned()),
        "exception 2 makes only that tag BAD"
    );
    assert!(
        !values.contains_key("write_only"),
        "a periodMs 0 tag is never polled"
    );
    for entry in report["values"].as_array().expect("values") {
        assert!(entry["ts"].as_i64().expect("ts") > 1_600_000_000_000);
    }
    // seq rises by one per report; the status topic is retained and online.
    let seqs: Vec<i64> = messages
        .iter()
        .filter(|m| m.topic == "P1/D1/property/post")
        .map(|m| m.json()["seq"].as_i64().expect("seq"))
        .collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    let status = subscriber.on("P1/D1/status/post");
    assert_eq!(
        status.last().expect("device status").json()["status"],
        "online"
    );
    // The latest one counts: a first connection cut short on a loaded machine ends
    // with the broker's Last Will before the next connection says online again.
    let collector_status = messages
        .iter()
        .rev()
        .find(|m| m.topic.starts_with("collector/") && m.topic.ends_with("/status/post"))
        .expect("collector status");
    assert_eq!(collector_status.json()["status"], "online");

    // Operations: health and metrics.
    let health = Engine::http_get(http, "/health")
        .await
        .expect("health answers");
    let health: Value = serde_json::from_str(&health).expect("health is JSON");
    assert_eq!(health["devices"]["online"], 1, "{health}");
    assert_eq!(health["broker"]["connected"], true, "{health}");
    let metrics = Engine::http_get(http, "/metrics")
        .await
        .expect("metrics answer");
    assert!(
        metrics.contains("sluice_rounds_total{device=\"meter-1\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("sluice_connection_state{protocol=\"modbus-tcp\""),
        "{metrics}"
    );
    assert!(
        metrics.contains("sluice_round_seconds_bucket{device=\"meter-1\",le=\"+Inf\"}"),
        "{metrics}"
    );
    for name in [
        "sluice_mqtt_publish_seconds_count",
        "sluice_mqtt_backlog",
        "sluice_component_seconds_total{device=\"meter-1\"}",
        "sluice_component_failures_total{device=\"meter-1\",kind=\"stage\"} 0",
    ] {
        assert!(metrics.contains(name), "{name} in {metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn libmodbus_values_and_a_killed_peer_reconnects_without_leaking() {
    let mut modbus = LibModbus::start();
    let port = modbus.port();
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect(broker.port()).await;
    let devices = format!(
        "  - deviceId: plc-1
    productId: P2
    deviceNum: D2
    channels:
      - channelId: main
        protocol: modbus-tcp
        host: 127.0.0.1
        port: {port}
        readTimeoutMs: 500
        tags:
          - {{ key: h5, address: '40006', dataType: UINT16, periodMs: 100 }}
          - {{ key: h199, address: '40200', dataType: UINT16, periodMs: 100 }}
          - {{ key: i7, address: '30008', dataType: UINT16, periodMs: 100 }}
          - {{ key: c3, address: '00004', dataType: BOOL, periodMs: 100 }}
          - {{ key: d6, address: '10007', dataType: BOOL, periodMs: 100 }}
          - {{ key: beyond, address: '40201', dataType: UINT16, periodMs: 100 }}
"
    );
    let dir = scratch_dir("libmodbus");
    let mut engine = Engine::start(
        &dir,
        &config(port, broker.port(), free_port(), "", &devices),
    );
    let topic = "P2/D2/property/post";
    let messages = subscriber
        .wait_until(Duration::from_secs(20), "a report", |m| {
            m.iter().any(|m| m.topic == topic)
        })
        .await;
    let values = values_by_key(&last_report(&messages, topic).expect("report"));
    assert_eq!(values["h5"].0, json!(LibModbus::holding(5)));
    assert_eq!(values["h199"].0, json!(LibModbus::holding(199)));
    assert_eq!(values["i7"].0, json!(LibModbus::input(7)));
    assert_eq!(values["c3"].0, json!(LibModbus::coil(3)));
    assert_eq!(values["d6"].0, json!(LibModbus::discrete(6)));
    assert_eq!(values["beyond"], (Value::Null, "BAD".to_owned()));

    // Kill and restart the peer a few times: the device goes offline and comes
    // back, and the engine holds no more descriptors than before.
    let status_topic = "P2/D2/status/post";
    let settle =
        |n: usize| move |m: &[Message]| m.iter().filter(|m| m.topic == status_topic).count() >= n;
    let baseline = engine.open_fds();
    for cycle in 0..3 {
        modbus.kill();
        subscriber
            .wait_until(
                Duration::from_secs(10),
                "offline status",
                settle(2 + 2 * cycle),
            )
            .await;
        assert_eq!(
            subscriber.on(status_topic).last().expect("status").json()["status"],
            "offline"
        );
        modbus = LibModbus::start_on(port);
        subscriber
            .wait_until(
                Duration::from_secs(10),
                "online status",
                settle(3 + 2 * cycle),
            )
            .await;
        assert_eq!(
            subscriber.on(status_topic).last().expect("status").json()["status"],
            "online"
        );
    }
    engine.assert_running();
    let after = engine.open_fds();
    assert!(
        after <= baseline,
        "descriptors grew from {baseline} to {after} over three reconnects"
    );
    let reconnected = subscriber.on(topic).len();
    subscriber
        .wait_until(
            Duration::from_secs(5),
            "reports after the reconnects",
            |m| m.iter().filter(|m| m.topic == topic).count() > reconnected,
        )
        .await;
}
