//! Devices that publish by themselves (`protocol: mqtt`), played by MQTT
//! clients on a real Mosquitto: their messages decoded (JSON and binary) and
//! reported like polled samples, refusals made BAD with the decoder's words,
//! their lease renewed by each message, a flood held to its rate.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::config::{Device, Gateway, Tag, Tenant};
use crate::support::engine::{Engine, scratch_dir};
use crate::support::mqtt::{Message, Subscriber};
use crate::support::peers::{Mosquitto, free_port};

const ADMIN: &str = "operator-secret";

/// A JSON meter (`M7`, lease 3 s) and a binary flow sensor (`F1`), both on
/// the uplink's broker.
fn config(mqtt: u16, http: u16) -> String {
    Gateway::new(&format!("push-{http}"), mqtt)
        .http(http, ADMIN)
        .set("lease.scanIntervalMs", 200)
        .device(
            Device::mqtt("meter", "sensors/{deviceNum}/up", 1000)
                .set("deviceNum", "M7")
                .channel("maxMessagesPerSecond", 20)
                .tags([
                    Tag::pushed("temp", "/sensors/0/temp", "FLOAT32").set("factor", 0.1),
                    Tag::pushed("count", "/count", "UINT16"),
                    Tag::pushed("on", "/on", "BOOL"),
                    Tag::pushed("name", "/name", "STRING").set("length", 8),
                ]),
        )
        .device(
            Device::mqtt("flow", "plant/+/{deviceNum}", 1000)
                .set("deviceNum", "F1")
                .channel("decoder", "binary")
                .tags([
                    Tag::pushed("rate", "0", "FLOAT32").set("byteOrder", "CDAB"),
                    Tag::pushed("total", "4", "UINT32"),
                    Tag::pushed("alarm", "8.0", "BOOL"),
                ]),
        )
        .yaml()
}

/// The reports on `topic`, as JSON.
fn reports(messages: &[Message], topic: &str) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m.topic == topic)
        .map(Message::json)
        .collect()
}

/// `key`'s entry in a report.
fn value<'r>(report: &'r Value, key: &str) -> &'r Value {
    report["values"]
        .as_array()
        .and_then(|values| values.iter().find(|v| v["key"] == key))
        .unwrap_or_else(|| panic!("no `{key}` in {report}"))
}

/// A client playing the platform and the devices (a client id is one
/// session), once the engine is online and has had time to subscribe.
async fn platform(port: u16) -> Subscriber {
    let client = Subscriber::connect(port).await;
    client
        .wait_until(Duration::from_secs(20), "the engine online", |m| {
            m.iter()
                .any(|m| m.topic.ends_with("status/post") && m.json()["status"] == "online")
        })
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    client
}

async fn state(http: u16, device: &str, want: &str) -> Value {
    let path = format!("/devices/{device}/state");
    Engine::until_get(http, &path, ADMIN, |b| b["state"] == want).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_are_decoded_reported_and_keep_the_devices_lease() {
    let broker = Mosquitto::start();
    let http = free_port();
    let dir = scratch_dir(&format!("push-{http}"));
    let mut engine = Engine::start(&dir, &config(broker.port(), http));
    let uplink = platform(broker.port()).await;
    let devices = &uplink;

    // A JSON message: every type, scaled by the pipeline as a register's value.
    devices
        .publish(
            "sensors/M7/up",
            &json!({"sensors": [{"temp": 215}], "count": 7, "on": true, "name": "m-7"}),
        )
        .await;
    let messages = uplink
        .wait_until(Duration::from_secs(10), "the meter's report", |m| {
            m.iter().any(|m| m.topic == "P/M7/property/post")
        })
        .await;
    let report = &reports(&messages, "P/M7/property/post")[0];
    assert_eq!(report["seq"], 1, "{report}");
    let temp = value(report, "temp");
    assert!(
        (temp["value"].as_f64().unwrap_or_default() - 21.5).abs() < 1e-4,
        "{report}"
    );
    assert_eq!(temp["quality"], "GOOD");
    assert_eq!(value(report, "count")["value"], 7);
    assert_eq!(value(report, "on")["value"], true);
    assert_eq!(value(report, "name")["value"], "m-7");
    let row = state(http, "meter", "online").await;
    assert_eq!(
        (&row["parent"], &row["timeoutSeconds"]),
        (&json!("json"), &json!(3)),
        "{row}"
    );

    // A field missing and one out of its type: those two BAD, with the words.
    devices
        .publish(
            "sensors/M7/up",
            &json!({"sensors": [{"temp": 220}], "on": 5}),
        )
        .await;
    let messages = uplink
        .wait_until(Duration::from_secs(10), "the second report", |m| {
            reports(m, "P/M7/property/post").len() >= 2
        })
        .await;
    let report = &reports(&messages, "P/M7/property/post")[1];
    assert_eq!(report["seq"], 2, "{report}");
    assert_eq!(value(report, "count")["quality"], "BAD", "{report}");
    assert_eq!(value(report, "on")["quality"], "BAD", "{report}");
    assert_eq!(value(report, "temp")["quality"], "GOOD", "{report}");
    // The renewal that only extends the lease is written within a second.
    Engine::until_get(http, "/devices/meter/state", ADMIN, |row| {
        let last_error = row["extension"]["lastError"].as_str().unwrap_or_default();
        row["state"] == "online"
            && last_error.contains("no `/count` in the message")
            && last_error.contains("5 is out of the range of BOOL")
    })
    .await;

    // A binary message, its bytes decoded by the pipeline as registers are.
    let mut frame = Vec::new();
    frame.extend_from_slice(&[0x00, 0x00, 0x41, 0xA8]); // 21.0 in CDAB
    frame.extend_from_slice(&1_000_000u32.to_be_bytes());
    frame.push(0b0000_0001);
    devices.publish_bytes("plant/hall-2/F1", frame).await;
    let messages = uplink
        .wait_until(Duration::from_secs(10), "the flow sensor's report", |m| {
            m.iter().any(|m| m.topic == "P/F1/property/post")
        })
        .await;
    let report = &reports(&messages, "P/F1/property/post")[0];
    assert_eq!(value(report, "rate")["value"], 21.0, "{report}");
    assert_eq!(value(report, "total")["value"], 1_000_000, "{report}");
    assert_eq!(value(report, "alarm")["value"], true, "{report}");

    // Only refusals: the device is in fault, and still alive.
    devices
        .publish_bytes("sensors/M7/up", b"not json".to_vec())
        .await;
    let row = state(http, "meter", "fault").await;
    assert!(
        row["extension"]["lastError"]
            .as_str()
            .is_some_and(|e| e.contains("the message is not JSON")),
        "{row}"
    );

    // Silent past its lease (3 s), it goes offline; its next message brings it back.
    state(http, "meter", "offline").await;
    devices
        .publish(
            "sensors/M7/up",
            &json!({"sensors": [{"temp": 1}], "count": 1, "on": false, "name": "x"}),
        )
        .await;
    state(http, "meter", "online").await;

    // A flood: 20 a second with a second's burst are taken, the rest dropped
    // and counted; the other device goes on.
    for n in 0..200 {
        devices
            .publish(
                "sensors/M7/up",
                &json!({"sensors": [{"temp": n}], "count": n, "on": true, "name": "f"}),
            )
            .await;
    }
    devices.publish_bytes("plant/hall-2/F1", vec![0; 9]).await;
    uplink
        .wait_until(
            Duration::from_secs(10),
            "the flow sensor's second report",
            |m| reports(m, "P/F1/property/post").len() >= 2,
        )
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let (received, dropped) = loop {
        let metrics = Engine::http_get(http, "/metrics", Some(ADMIN))
            .await
            .unwrap_or_default();
        let count = |outcome: &str| {
            let line =
                format!("sluice_device_messages_total{{device=\"meter\",outcome=\"{outcome}\"}}");
            metrics
                .lines()
                .find(|l| l.starts_with(&line))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or_default()
        };
        let (received, dropped) = (count("received"), count("dropped"));
        if received >= 204.0 || std::time::Instant::now() > deadline {
            break (received, dropped);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(received, 204.0, "every message counted");
    assert!(
        (150.0..=185.0).contains(&dropped),
        "{dropped} of the flood's 200 dropped (20 a second and a burst of 20 taken)"
    );
    let meter_reports = reports(&uplink.messages(), "P/M7/property/post");
    let seqs: Vec<i64> = meter_reports
        .iter()
        .filter_map(|r| r["seq"].as_i64())
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "no gap in seq: {seqs:?}"
    );
    engine.assert_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decoder_uploaded_while_messages_flow_takes_over_from_one_message_on() {
    const MESSAGES: u64 = 600;
    let broker = Mosquitto::start();
    let http = free_port();
    let dir = scratch_dir(&format!("push-swap-{http}"));
    let config = Gateway::new(&format!("push-swap-{http}"), broker.port())
        .http(http, ADMIN)
        .device(
            Device::mqtt("meter", "sensors/{deviceNum}/up", 1000)
                .set("deviceNum", "M7")
                .channel("maxMessagesPerSecond", 10_000)
                .tag(Tag::pushed("n", "/n", "UINT32")),
        )
        .yaml();
    let mut engine = Engine::start(&dir, &config);
    let client = platform(broker.port()).await;

    // 300 messages a second; a new version of `json` (one that gives the
    // first tag the message's length) uploaded half-way.
    let upload = async {
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let wasm = crate::common::test_component("hostile_decoder");
        Engine::put_wasm(http, "/components/json/2.0.0?kind=decoder", ADMIN, &wasm).await
    };
    let publish = async {
        for i in 0..MESSAGES {
            client
                .publish("sensors/M7/up", &json!({"n": 100_000 + i}))
                .await;
            tokio::time::sleep(Duration::from_micros(3300)).await;
        }
    };
    let ((status, uploaded), ()) = tokio::join!(upload, publish);
    assert_eq!(status, 200, "{uploaded}");
    let messages = client
        .wait_until(Duration::from_secs(20), "a report per message", |m| {
            reports(m, "P/M7/property/post").len() as u64 >= MESSAGES
        })
        .await;
    let reports = reports(&messages, "P/M7/property/post");
    assert_eq!(reports.len() as u64, MESSAGES, "none lost, none twice");
    let seqs: Vec<u64> = reports.iter().filter_map(|r| r["seq"].as_u64()).collect();
    assert_eq!(seqs, (1..=MESSAGES).collect::<Vec<_>>());
    // Each message decoded by one version: the old one's values, then the new one's.
    let by_old: Vec<bool> = reports
        .iter()
        .map(|r| value(r, "n")["value"].as_u64().unwrap_or_default() >= 100_000)
        .collect();
    let switched = by_old
        .iter()
        .position(|old| !old)
        .expect("the new version decoded");
    assert!(switched > 0, "the old version decoded the first messages");
    assert!(
        by_old[switched..].iter().all(|old| !old),
        "no message decoded by the old version after the new one: {by_old:?}"
    );
    let olds: Vec<u64> = reports[..switched]
        .iter()
        .filter_map(|r| value(r, "n")["value"].as_u64())
        .collect();
    assert_eq!(
        olds,
        (100_000..100_000 + switched as u64).collect::<Vec<_>>()
    );
    engine.assert_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_shows_each_device_broker_connected_or_why_not() {
    let broker = Mosquitto::start();
    let closed = free_port();
    let http = free_port();
    let dir = scratch_dir(&format!("push-health-{http}"));
    let config = Gateway::new(&format!("push-health-{http}"), broker.port())
        .http(http, ADMIN)
        .device(
            Device::mqtt("meter", "sensors/{deviceNum}/up", 1000)
                .set("deviceNum", "M7")
                .tag(Tag::pushed("n", "/n", "UINT16")),
        )
        .device(
            Device::mqtt("far", "far/up", 1000)
                .channel("broker", format!("tcp://127.0.0.1:{closed}"))
                .tag(Tag::pushed("n", "/n", "UINT16")),
        )
        .yaml();
    let mut engine = Engine::start(&dir, &config);
    let client = platform(broker.port()).await;
    for n in 0..3 {
        client.publish("sensors/M7/up", &json!({ "n": n })).await;
    }
    let reachable = format!("127.0.0.1:{}", broker.port());
    let unreachable = format!("127.0.0.1:{closed}");
    let wanted = ("both device brokers in /health", Duration::from_secs(20));
    let health = Engine::until_health(http, ADMIN, wanted, |h| {
        let brokers = h["deviceBrokers"].as_array().cloned().unwrap_or_default();
        let at = |address: &str| brokers.iter().find(|b| b["address"] == address).cloned();
        at(&reachable).is_some_and(|b| b["connected"] == true && b["messages"] == 3)
            && at(&unreachable).is_some_and(|b| b["lastError"].is_string())
    })
    .await;
    let brokers = health["deviceBrokers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(brokers.len(), 2, "{health}");
    let far = brokers
        .iter()
        .find(|b| b["address"] == unreachable.as_str())
        .expect("the unreachable broker");
    assert_eq!(far["connected"], false, "{health}");
    assert!(
        far["lastError"]
            .as_str()
            .is_some_and(|e| e.contains("refused")),
        "{health}"
    );
    engine.assert_running();
}

/// Tenant 1's device `noisy` decoded by `decoder` (with `settings`), tenant
/// 2's device `calm` by `json`.
fn two_tenants(mqtt: u16, http: u16, decoder: &str, settings: &[(&str, &str)]) -> String {
    let mut noisy = Device::mqtt("noisy", "noisy/up", 1000)
        .set("tenantId", 1)
        .channel("decoder", decoder)
        .tag(Tag::pushed("n", "/n", "UINT16"));
    for (key, value) in settings {
        noisy = noisy.channel(key, *value);
    }
    Gateway::new(&format!("push-tenants-{http}"), mqtt)
        .http(http, ADMIN)
        .set("lease.scanIntervalMs", 200)
        .tenant(Tenant::new(1, "one"))
        .tenant(Tenant::new(2, "two"))
        .device(noisy)
        .device(
            Device::mqtt("calm", "calm/up", 1000)
                .set("tenantId", 2)
                .channel("maxMessagesPerSecond", 1000)
                .tag(Tag::pushed("n", "/n", "UINT32")),
        )
        .yaml()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looping_uploaded_decoder_faults_its_own_device_and_no_other_tenants() {
    const CALM: u64 = 200;
    let broker = Mosquitto::start();
    let http = free_port();
    let dir = scratch_dir(&format!("push-tenants-{http}"));
    let mut engine = Engine::start(&dir, &two_tenants(broker.port(), http, "json", &[]));
    let client = platform(broker.port()).await;

    // Tenant 1 takes an uploaded decoder that loops on `boom` until its budget.
    let wasm = crate::common::test_component("hostile_decoder");
    let path = "/components/hostile_decoder/1.0.0?kind=decoder";
    let (status, uploaded) = Engine::put_wasm(http, path, ADMIN, &wasm).await;
    assert_eq!(status, 200, "{uploaded}");
    let looping = two_tenants(broker.port(), http, "hostile_decoder", &[("mode", "loop")]);
    std::fs::write(dir.join("devices.yaml"), looping).expect("config written");
    let (status, reload) = Engine::request(http, "POST", "/reload", Some(ADMIN), None).await;
    assert_eq!(status, 200, "{reload}");
    assert_eq!(reload["devices"]["changed"], json!(["noisy"]), "{reload}");

    // The noisy device floods its looping payload while the calm one reports.
    let noisy = async {
        for _ in 0..100 {
            client.publish_bytes("noisy/up", b"boom".to_vec()).await;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let calm = async {
        for n in 0..CALM {
            client.publish("calm/up", &json!({ "n": n })).await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::join!(noisy, calm);
    let messages = client
        .wait_until(
            Duration::from_secs(20),
            "every calm message reported",
            |m| reports(m, "P/calm/property/post").len() as u64 >= CALM,
        )
        .await;
    let calm = reports(&messages, "P/calm/property/post");
    let values: Vec<u64> = calm
        .iter()
        .filter_map(|r| value(r, "n")["value"].as_u64())
        .collect();
    assert_eq!(values, (0..CALM).collect::<Vec<_>>(), "none lost, none BAD");
    let seqs: Vec<u64> = calm.iter().filter_map(|r| r["seq"].as_u64()).collect();
    assert_eq!(seqs, (1..=CALM).collect::<Vec<_>>());

    // The noisy device is in fault with the budget's words; the calm one online.
    let row = state(http, "noisy", "fault").await;
    let error = row["extension"]["lastError"].as_str().unwrap_or_default();
    assert!(
        error.contains("fuel") || error.contains("quarantined"),
        "{row}"
    );
    state(http, "calm", "online").await;
    engine.assert_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_is_published_to_the_device_and_done_when_its_next_message_shows_it() {
    use crate::support::engine::ADMIN_TOKEN;
    let broker = Mosquitto::start();
    let http = free_port();
    let dir = scratch_dir(&format!("push-write-{http}"));
    let config = Gateway::new(&format!("push-write-{http}"), broker.port())
        .http(http, ADMIN_TOKEN)
        .device(
            Device::mqtt("valve", "valves/{deviceNum}/up", 1000)
                .set("deviceNum", "V1")
                .channel("commandTopic", "valves/{deviceNum}/set")
                .tags([
                    Tag::pushed("sp", "/sp", "UINT16").set("access", "RW"),
                    Tag::pushed("flow", "/flow", "FLOAT32"),
                ]),
        )
        .device(
            Device::mqtt("gauge", "gauges/{deviceNum}/up", 1000)
                .set("deviceNum", "G1")
                .tag(Tag::pushed("sp", "/sp", "UINT16").set("access", "RW")),
        )
        .yaml();
    let mut engine = Engine::start(&dir, &config);
    let client = platform(broker.port()).await;
    client
        .publish("valves/V1/up", &json!({"sp": 10, "flow": 1.5}))
        .await;
    client
        .wait_until(Duration::from_secs(10), "the valve's report", |m| {
            m.iter().any(|m| m.topic == "P/V1/property/post")
        })
        .await;

    // The write goes out on the command topic; the device's next message
    // with the value completes it.
    let body = json!({ "deviceId": "valve", "key": "sp", "value": 22 });
    let (status, created) =
        Engine::request(http, "POST", "/commands", Some(ADMIN_TOKEN), Some(&body)).await;
    assert_eq!(status, 201, "{created}");
    let sent = client
        .wait_until(
            Duration::from_secs(10),
            "the write on the command topic",
            |m| m.iter().any(|m| m.topic == "valves/V1/set"),
        )
        .await;
    let write = sent
        .iter()
        .find(|m| m.topic == "valves/V1/set")
        .map(Message::json)
        .unwrap_or_default();
    assert_eq!(write, json!({"sp": 22}));
    client
        .publish("valves/V1/up", &json!({"sp": 22, "flow": 1.4}))
        .await;
    let command = Engine::final_command(http, created["id"].as_u64().expect("id")).await;
    assert_eq!(command["status"], "ACKED", "{command}");
    assert_eq!(command["write"]["before"], 10, "{command}");
    assert_eq!(command["write"]["after"], 22, "{command}");

    // A device without a command topic takes no writes: refused, nothing sent.
    let body = json!({ "deviceId": "gauge", "key": "sp", "value": 1 });
    let (status, created) =
        Engine::request(http, "POST", "/commands", Some(ADMIN_TOKEN), Some(&body)).await;
    assert_eq!(status, 201, "{created}");
    let command = Engine::final_command(http, created["id"].as_u64().expect("id")).await;
    assert_eq!(command["status"], "FAILED", "{command}");
    assert!(
        command["write"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("has no `commandTopic`")),
        "{command}"
    );
    engine.assert_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_devices_are_subscribed_on_one_connection() {
    // More topics than the client queues requests: subscribed many a SUBSCRIBE.
    const DEVICES: usize = 300;
    let broker = Mosquitto::start();
    let http = free_port();
    let dir = scratch_dir(&format!("push-many-{http}"));
    let gateway = (0..DEVICES).fold(
        Gateway::new(&format!("push-many-{http}"), broker.port()).http(http, ADMIN),
        |gateway, i| {
            gateway.device(
                Device::mqtt(&format!("m{i}"), "many/{deviceNum}/up", 1000)
                    .tag(Tag::pushed("n", "/n", "UINT16")),
            )
        },
    );
    let mut engine = Engine::start(&dir, &gateway.yaml());
    let client = platform(broker.port()).await;
    let last = DEVICES - 1;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let topic = format!("P/m{last}/property/post");
    // Until the subscriptions are made, a message may go unheard: sent again.
    while !client.messages().iter().any(|m| m.topic == topic) {
        assert!(
            std::time::Instant::now() < deadline,
            "device m{last} never reported"
        );
        client
            .publish(&format!("many/m{last}/up"), &json!({"n": 7}))
            .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    engine.assert_running();
}
