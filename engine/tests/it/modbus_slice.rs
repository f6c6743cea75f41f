//! The Modbus vertical slice end to end: a real Modbus server (pymodbus, libmodbus,
//! or the built-in simulator), the `sluice` binary, and a real MQTT broker
//! (mosquitto), checking the decoded values and payloads a platform receives.

use std::time::Duration;

use crate::support::config::{Device, Gateway, Tag};
use crate::support::engine::{ADMIN_TOKEN, Engine, scratch_dir};
use crate::support::mqtt::{Message, Subscriber};
use crate::support::peers::{LibModbus, Mosquitto, PyModbus, free_port};
use crate::support::registers::{RegisterTable, last_report, values_by_key};
use serde_json::{Value, json};

fn config(modbus_port: u16, mqtt_port: u16, http_port: u16, device: Device) -> String {
    Gateway::new(&format!("sluice-test-{modbus_port}"), mqtt_port)
        .http(http_port, ADMIN_TOKEN)
        .set("perDeviceTimeoutMs", 2000)
        .set("reportMode", "BATCH")
        .set("mqtt.qos", 1)
        .set("mqtt.keepAliveSec", 5)
        .set("backoff", json!({ "baseMs": 100, "maxMs": 400 }))
        .set("lease.scanIntervalMs", 200)
        .device(device)
        .yaml()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pymodbus_registers_in_every_type_and_byte_order_arrive_decoded() {
    let table = RegisterTable::every_type_and_order();
    let modbus = PyModbus::start(&table.map);
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect(broker.port()).await;
    let http = free_port();
    let meter = Device::modbus("meter-1", modbus.port())
        .set("productId", "P1")
        .set("deviceNum", "D1")
        .channel("unitId", 3)
        .channel("readTimeoutMs", 1000)
        .tags(table.tags.iter().cloned());
    let dir = scratch_dir("pymodbus-types");
    let mut engine = Engine::start(&dir, &config(modbus.port(), broker.port(), http, meter));
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
    table.check(&report);
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
    // Both are retained: a platform that subscribes now is told at once.
    let late = Subscriber::connect(broker.port()).await;
    late.wait_until(Duration::from_secs(10), "the retained statuses", |m| {
        let retained_online = |topic: &dyn Fn(&str) -> bool| {
            m.iter()
                .any(|m| topic(&m.topic) && m.retain && m.json()["status"] == "online")
        };
        retained_online(&|t| t == "P1/D1/status/post")
            && retained_online(&|t| t.starts_with("collector/") && t.ends_with("/status/post"))
    })
    .await;

    // Operations: health and metrics.
    let health = Engine::http_get(http, "/health", Some(ADMIN_TOKEN))
        .await
        .expect("health answers");
    let health: Value = serde_json::from_str(&health).expect("health is JSON");
    assert_eq!(health["devices"]["online"], 1, "{health}");
    assert_eq!(health["broker"]["connected"], true, "{health}");
    let metrics = Engine::http_get(http, "/metrics", None)
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
    let tag = |key: &str, address: &str, data_type: &str| Tag::new(key, address, data_type, 100);
    let plc = Device::modbus("plc-1", port)
        .set("productId", "P2")
        .set("deviceNum", "D2")
        .set("stateTimeout", 1)
        .channel("readTimeoutMs", 500)
        .tag(tag("h5", "40006", "UINT16"))
        .tag(tag("h199", "40200", "UINT16"))
        .tag(tag("i7", "30008", "UINT16"))
        .tag(tag("c3", "00004", "BOOL"))
        .tag(tag("d6", "10007", "BOOL"))
        .tag(tag("beyond", "40201", "UINT16"));
    let dir = scratch_dir("libmodbus");
    let mut engine = Engine::start(&dir, &config(port, broker.port(), free_port(), plc));
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
