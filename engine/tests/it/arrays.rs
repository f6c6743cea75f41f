//! Array tags (a `length` on a type other than STRING) against a pymodbus
//! server: one read of the whole extent, a JSON array in every report with its
//! `rawValue`, element-wise scaling and byte order, writes of JSON arrays
//! (FC16 for registers, FC15 for coils) read back, and the refusals of a
//! write of another length or of a single value.

use std::time::Duration;

use crate::support::config::{Device, Gateway, Tag};
use crate::support::engine::{ADMIN_TOKEN, Engine, scratch_dir};
use crate::support::mqtt::Subscriber;
use crate::support::peers::{Mosquitto, PyModbus, free_port};
use serde_json::{Value, json};

/// The registers of `values` as FLOAT32 in CDAB: each value's words swapped.
fn cdab(values: &[f32]) -> Vec<u16> {
    values
        .iter()
        .flat_map(|v| {
            let bits = v.to_bits();
            [bits as u16, (bits >> 16) as u16]
        })
        .collect()
}

/// Creates a write of `value` to tag `key`; the status and the body.
async fn write(http: u16, key: &str, value: Value) -> (u16, Value) {
    let body = json!({ "deviceId": "rack", "key": key, "value": value });
    Engine::request(http, "POST", "/commands", Some(ADMIN_TOKEN), Some(&body)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn array_tags_are_read_reported_and_written_whole() {
    let mut registers = cdab(&[21.5, -3.25]);
    registers.extend([7, 0xFFFE, 300]);
    let modbus = PyModbus::start(&json!({
        "hr": { "0": registers },
        "co": { "0": [1, 0, 1, 1, 0, 0, 0, 0, 0, 1] },
    }));
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect(broker.port()).await;
    let http = free_port();
    let rack = Device::modbus("rack", modbus.port())
        .set("deviceNum", "RACK1")
        .channel("readTimeoutMs", 1000)
        .tag(
            Tag::new("temps", "40001", "FLOAT32", 200)
                .set("length", 2)
                .set("byteOrder", "CDAB")
                .set("factor", 2),
        )
        .tag(
            Tag::new("counts", "40005", "INT16", 200)
                .set("length", 3)
                .set("access", "RW"),
        )
        .tag(
            Tag::new("flags", "00001", "BOOL", 200)
                .set("length", 10)
                .set("access", "RW"),
        );
    let config = Gateway::new(&format!("arrays-{http}"), broker.port())
        .http(http, ADMIN_TOKEN)
        .set("rawValue", true)
        .set("perDeviceTimeoutMs", 1000)
        .device(rack)
        .yaml();
    let _engine = Engine::start(&scratch_dir("arrays"), &config);

    let messages = subscriber
        .wait_until(Duration::from_secs(15), "a report", |m| {
            m.iter().any(|m| m.topic == "P/RACK1/property/post")
        })
        .await;
    let report = messages
        .iter()
        .find(|m| m.topic == "P/RACK1/property/post")
        .expect("a report")
        .json();
    let mut values: Vec<(Value, Value, Value)> = report["values"]
        .as_array()
        .expect("values")
        .iter()
        .map(|v| (v["key"].clone(), v["value"].clone(), v["rawValue"].clone()))
        .collect();
    values.sort_by_key(|(key, ..)| key.to_string());
    let flags = json!([
        true, false, true, true, false, false, false, false, false, true
    ]);
    assert_eq!(
        values,
        [
            (json!("counts"), json!([7, -2, 300]), json!([7, -2, 300])),
            (json!("flags"), flags.clone(), flags),
            (json!("temps"), json!([43.0, -6.5]), json!([21.5, -3.25])),
        ],
        "{report}"
    );

    let (status, device) =
        Engine::request(http, "GET", "/devices/rack", Some(ADMIN_TOKEN), None).await;
    assert_eq!(status, 200, "{device}");
    let tags = &device["channels"][0]["tags"];
    assert_eq!(
        (tags[0]["length"].clone(), tags[1]["length"].clone()),
        (json!(2), json!(3))
    );

    // Writes of whole arrays, each read back.
    let (status, created) = write(http, "counts", json!([-1, 0, 12345])).await;
    assert_eq!(status, 201, "{created}");
    let command = Engine::final_command(http, created["id"].as_u64().expect("id")).await;
    assert_eq!(command["status"], "ACKED", "{command}");
    let (status, created) = write(http, "flags", json!([0, 1, 1, 0, 0, 0, 0, 0, 1, 1])).await;
    assert_eq!(status, 201, "{created}");
    let command = Engine::final_command(http, created["id"].as_u64().expect("id")).await;
    assert_eq!(command["status"], "ACKED", "{command}");
    let writes = PyModbus::writes(&modbus);
    assert_eq!(
        writes,
        [
            json!({ "fc": 16, "address": 4, "values": [65535, 0, 12345] }),
            json!({ "fc": 15, "address": 0, "values": [0, 1, 1, 0, 0, 0, 0, 0, 1, 1] }),
        ]
    );

    // What does not fit is refused before anything is sent.
    let (status, refused) = write(http, "counts", json!([1, 2])).await;
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused
            .to_string()
            .contains("tag `counts` is an array of 3 values: the write has 2"),
        "{refused}"
    );
    let (status, refused) = write(http, "counts", json!(5)).await;
    assert_eq!(status, 400, "{refused}");
    let (status, refused) = write(http, "counts", json!([1, 2, 40000])).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused.to_string().contains("element 2"), "{refused}");
    assert_eq!(
        PyModbus::writes(&modbus).len(),
        2,
        "nothing more was written"
    );
}
