//! The S7 and MC codecs against real peers, through the whole engine: the snap7
//! server (native snap7), virtual-plc (MC 3E binary) and a 1E PLC of the tests'
//! own (no independent one runs here). Every type at known
//! offsets, bits, writes read back, an unknown area giving BAD for its tag only,
//! virtual-plc's faults, and the seed's device blocks running as written apart
//! from host and port.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::support::config::{Device, Gateway, Tag};
use crate::support::engine::{Engine, scratch_dir};
use crate::support::melsec_1e::Plc1E;
use crate::support::mqtt::{Message, Subscriber};
use crate::support::peers::{Mosquitto, Snap7, VirtualPlc, free_port};
use serde_json::{Value, json};

const ADMIN: &str = "admin-token";

fn collector(mqtt: u16, http: u16) -> Gateway {
    Gateway::new(&format!("plc-{http}"), mqtt)
        .http(http, ADMIN)
        .set("perDeviceTimeoutMs", 2000)
        .set("backoff", json!({ "baseMs": 100, "maxMs": 300 }))
}

/// Tag `key` at `address`, of `data_type`, read every 200 ms.
fn read(key: &str, address: &str, data_type: &str) -> Tag {
    Tag::new(key, address, data_type, 200)
}

/// [`read`], and written with a read-back.
fn written(key: &str, address: &str, data_type: &str) -> Tag {
    read(key, address, data_type)
        .set("access", "RW")
        .set("readback", true)
}

/// The values of the last report on `topic` that has every key of `keys`.
fn latest(
    messages: &[Message],
    topic: &str,
    keys: &[&str],
) -> Option<HashMap<String, (Value, String)>> {
    messages
        .iter()
        .rev()
        .filter(|m| m.topic == topic)
        .find_map(|m| {
            let values: HashMap<String, (Value, String)> = m.json()["values"]
                .as_array()?
                .iter()
                .map(|v| {
                    let key = v["key"].as_str().unwrap_or_default().to_owned();
                    let quality = v["quality"].as_str().unwrap_or_default().to_owned();
                    (key, (v["value"].clone(), quality))
                })
                .collect();
            keys.iter()
                .all(|k| values.contains_key(*k))
                .then_some(values)
        })
}

async fn wait_values(
    subscriber: &Subscriber,
    topic: &str,
    keys: &[&str],
    what: &str,
    done: impl Fn(&HashMap<String, (Value, String)>) -> bool,
) -> HashMap<String, (Value, String)> {
    let messages = subscriber
        .wait_until(Duration::from_secs(20), what, |m| {
            latest(m, topic, keys).is_some_and(|v| done(&v))
        })
        .await;
    latest(&messages, topic, keys).expect("checked")
}

fn close(got: &Value, want: &Value) -> bool {
    match (got.as_f64(), want.as_f64()) {
        (Some(a), Some(b)) => (a - b).abs() <= b.abs() * 1e-6 + 1e-9,
        _ => got == want,
    }
}

/// Writes through a command and waits for its final state.
async fn write(http: u16, device: &str, key: &str, value: Value) -> Value {
    let body = json!({ "deviceId": device, "key": key, "value": value });
    let (status, command) =
        Engine::request(http, "POST", "/commands", Some(ADMIN), Some(&body)).await;
    assert_eq!(status, 201, "{command}");
    let id = command["id"].as_u64().expect("id");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, command) =
            Engine::request(http, "GET", &format!("/commands/{id}"), Some(ADMIN), None).await;
        if ["ACKED", "FAILED", "TIMEOUT"].contains(&command["status"].as_str().unwrap_or("")) {
            return command;
        }
        assert!(Instant::now() < deadline, "not final: {command}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// DB1 as the S7 tests lay it out (big-endian, as the PLC stores it).
fn db1() -> Vec<u8> {
    let mut db = vec![0u8; 64];
    db[0..4].copy_from_slice(&12.5f32.to_be_bytes());
    db[4..6].copy_from_slice(&(-300i16).to_be_bytes());
    db[6] = 0b0000_0101;
    db[8..12].copy_from_slice(&4_000_000_000u32.to_be_bytes());
    db[12..16].copy_from_slice(&(-70_000i32).to_be_bytes());
    db[16..24].copy_from_slice(&1234.5678f64.to_be_bytes());
    db[24..26].copy_from_slice(&65_000u16.to_be_bytes());
    db[26..28].copy_from_slice(&[0x12, 0x34]);
    for (i, v) in [1i16, -2, 300].iter().enumerate() {
        db[28 + 2 * i..30 + 2 * i].copy_from_slice(&v.to_be_bytes());
    }
    db
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s7_types_bits_writes_and_a_missing_db_against_snap7() {
    let mut mk = vec![0u8; 32];
    mk[10] = 0b10;
    mk[20..22].copy_from_slice(&0x1234u16.to_be_bytes());
    let plc = Snap7::start(&json!({ "db": { "1": db1() }, "mk": mk, "pe": [1, 0], "pa": [2, 0] }));
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect(broker.port()).await;
    let http = free_port();
    let s7 = Device::tcp("s7", "s7", plc.port())
        .set("deviceNum", "S7")
        .channel("plcType", "S1500")
        .channel("rack", 0)
        .channel("slot", 1)
        .tags([
            read("f32", "DB1.0", "FLOAT32"),
            read("i16", "DB1.DBW4", "INT16"),
            read("bit0", "DB1.6.0", "BOOL"),
            read("bit1", "DB1.DBX6.1", "BOOL"),
            written("bit2", "DB1.DBX6.2", "BOOL"),
            read("u32", "DB1.DBD8", "UINT32"),
            read("i32", "DB1.12", "INT32"),
            read("f64", "DB1.16", "FLOAT64"),
            written("u16", "DB1.DBW24", "UINT16"),
            read("bcd", "DB1.26", "BCD16"),
            written("flag", "M10.1", "BOOL"),
            read("mw", "MW20", "UINT16"),
            read("input", "I0.0", "BOOL"),
            read("output", "Q0.1", "BOOL"),
            read("missing", "DB9.0", "INT16"),
            written("i16s", "DB1.28", "INT16").set("length", 3),
            read("bits", "DB1.DBX6.0", "BOOL").set("length", 3),
        ]);
    let text = collector(broker.port(), http).device(s7).yaml();
    let _engine = Engine::start(&scratch_dir("s7-snap7"), &text);
    let expected = [
        ("f32", json!(12.5)),
        ("i16", json!(-300)),
        ("bit0", json!(true)),
        ("bit1", json!(false)),
        ("bit2", json!(true)),
        ("u32", json!(4_000_000_000u64)),
        ("i32", json!(-70_000)),
        ("f64", json!(1234.5678)),
        ("u16", json!(65_000)),
        ("bcd", json!(1234)),
        ("flag", json!(true)),
        ("mw", json!(0x1234)),
        ("input", json!(true)),
        ("output", json!(true)),
        ("i16s", json!([1, -2, 300])),
        ("bits", json!([true, false, true])),
    ];
    let keys: Vec<&str> = expected
        .iter()
        .map(|(k, _)| *k)
        .chain(["missing"])
        .collect();
    let values = wait_values(
        &subscriber,
        "P/S7/property/post",
        &keys,
        "a report of every tag",
        |_| true,
    )
    .await;
    for (key, want) in &expected {
        let (got, quality) = &values[*key];
        assert!(
            close(got, want) && quality == "GOOD",
            "{key}: {got} ({quality}), want {want}"
        );
    }
    assert_eq!(
        values["missing"],
        (Value::Null, "BAD".to_owned()),
        "a DB that does not exist is BAD for its tag only"
    );

    // Writes: a word, a bit in a DB, a flag, an array; each read back by the engine.
    for (key, value) in [
        ("u16", json!(4321)),
        ("bit2", json!(false)),
        ("flag", json!(false)),
        ("i16s", json!([5, -6, 7])),
    ] {
        let command = write(http, "s7", key, value.clone()).await;
        assert_eq!(command["status"], "ACKED", "{key}: {command}");
        assert_eq!(command["write"]["after"], value, "{key}");
    }
    wait_values(
        &subscriber,
        "P/S7/property/post",
        &["u16", "bit2", "flag", "bit0", "i16s", "bits"],
        "the written values polled",
        |v| {
            v["u16"].0 == 4321
                && v["bit2"].0 == false
                && v["flag"].0 == false
                && v["bit0"].0 == true
                && v["i16s"].0 == json!([5, -6, 7])
                && v["bits"].0 == json!([true, false, false])
        },
    )
    .await;
}

/// MC memory as virtual-plc loads it (unsigned words, bits).
fn mc_memory() -> Value {
    json!({
        "D": { "100": [1234, 0], "200": [8], "300": [0x5678, 0x1234], "400": [0x4248, 0x0000], "500": [1, 65534, 0, 2] },
        "M": { "10": [1, 0, 1], "20": [0, 1, 1, 0, 1] },
        "X": { "31": [1] },
        "W": { "16": [77] },
        "R": { "5": [555] },
        "ZR": { "1000": [999] },
        "TN": { "3": [42] },
        "CN": { "4": [9] },
    })
}

fn mc_config(mqtt: u16, http: u16, port: u16, series: &str) -> String {
    let mc = Device::tcp("mc", "mc", port)
        .set("deviceNum", "MC")
        .channel("series", series)
        .channel("monitorTimer", 4)
        .channel("readTimeoutMs", 1000)
        .tags([
            written("d100", "D100", "INT16"),
            read("d300", "D300", "INT32"),
            read("f400", "D400", "FLOAT32").set("byteOrder", "CDAB"),
            read("bit3", "D200.3", "BOOL"),
            written("m10", "M10", "BOOL"),
            read("m11", "M11", "BOOL"),
            read("x1f", "X1F", "BOOL"),
            read("w10", "W10", "UINT16"),
            read("r5", "R5", "UINT16"),
            read("tn3", "TN3", "UINT16"),
            read("cn4", "CN4", "UINT16"),
            read("missing", "D9000", "INT16"),
            written("d500", "D500", "INT32").set("length", 2),
            written("m20", "M20", "BOOL").set("length", 5),
        ]);
    collector(mqtt, http).device(mc).yaml()
}

const MC_KEYS: &[&str] = &[
    "d100", "d300", "f400", "bit3", "m10", "m11", "x1f", "w10", "r5", "tn3", "cn4", "missing",
    "d500", "m20",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mc_types_bits_writes_and_an_unknown_device_against_virtual_plc() {
    for (profile, series) in [("Q", "Q_L"), ("iQ-R", "IQ_R")] {
        let plc = VirtualPlc::start(profile, &mc_memory(), None, &["D:0-8191"]);
        let broker = Mosquitto::start();
        let subscriber = Subscriber::connect(broker.port()).await;
        let http = free_port();
        let text = mc_config(broker.port(), http, plc.port(), series);
        let _engine = Engine::start(&scratch_dir(&format!("mc-{series}")), &text);
        let values = wait_values(
            &subscriber,
            "P/MC/property/post",
            MC_KEYS,
            "a report of every tag",
            |_| true,
        )
        .await;
        let expected = [
            ("d100", json!(1234)),
            ("d300", json!(0x1234_5678)),
            ("f400", json!(50.0)),
            ("bit3", json!(true)),
            ("m10", json!(true)),
            ("m11", json!(false)),
            ("x1f", json!(true)),
            ("w10", json!(77)),
            ("r5", json!(555)),
            ("tn3", json!(42)),
            ("cn4", json!(9)),
            ("d500", json!([-131_071, 131_072])),
            ("m20", json!([false, true, true, false, true])),
        ];
        for (key, want) in &expected {
            let (got, quality) = &values[*key];
            assert!(
                close(got, want) && quality == "GOOD",
                "{series} {key}: {got} ({quality}), want {want}"
            );
        }
        assert_eq!(
            values["missing"].1, "BAD",
            "{series}: a device number beyond the PLC's range is BAD for its tag only"
        );
        for (key, value) in [
            ("d100", json!(-4321)),
            ("m10", json!(false)),
            ("d500", json!([-3, 70_000])),
            ("m20", json!([true, false, false, true, true])),
        ] {
            let command = write(http, "mc", key, value.clone()).await;
            assert_eq!(command["status"], "ACKED", "{series} {key}: {command}");
            assert_eq!(command["write"]["after"], value, "{series} {key}");
        }
    }
}

/// Series A over the 1E frame: words low word first, bits, a device the PLC
/// refuses (BAD for its tag only), writes read back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn series_a_over_the_1e_frame_reads_and_writes() {
    let words = [(100, 1234), (300, 0x5678), (301, 0x1234)];
    let plc = Plc1E::start(&words, &[(10, true), (12, true)]).await;
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect(broker.port()).await;
    let http = free_port();
    let mc = Device::tcp("a1e", "mc", plc.port())
        .set("deviceNum", "A1E")
        .channel("series", "A")
        .channel("frameType", "FRAME_1E")
        .channel("readTimeoutMs", 1000)
        .tags([
            written("d100", "D100", "INT16"),
            read("d300", "D300", "INT32"),
            written("m10", "M10", "BOOL"),
            read("m11", "M11", "BOOL"),
            read("m12", "M12", "BOOL"),
            read("missing", "D9000", "INT16"),
        ]);
    let text = collector(broker.port(), http).device(mc).yaml();
    let _engine = Engine::start(&scratch_dir("mc-1e"), &text);
    let keys = ["d100", "d300", "m10", "m11", "m12", "missing"];
    let values = wait_values(
        &subscriber,
        "P/A1E/property/post",
        &keys,
        "a report",
        |_| true,
    )
    .await;
    for (key, want) in [
        ("d100", json!(1234)),
        ("d300", json!(0x1234_5678)),
        ("m10", json!(true)),
        ("m11", json!(false)),
        ("m12", json!(true)),
    ] {
        let (got, quality) = &values[key];
        assert!(
            got == &want && quality == "GOOD",
            "{key}: {got} ({quality})"
        );
    }
    assert_eq!(values["missing"].1, "BAD", "D9000 is past the PLC's memory");
    for (key, value) in [("d100", json!(-4321)), ("m10", json!(false))] {
        let command = write(http, "a1e", key, value.clone()).await;
        assert_eq!(command["status"], "ACKED", "{key}: {command}");
        assert_eq!(command["write"]["after"], value, "{key}: read back");
    }
    assert_eq!(plc.word(100), (-4321i16) as u16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtual_plc_faults_are_survived_with_reconnects_or_bad_values() {
    // Request numbers count every request of every connection after the port probe.
    let faults = json!({ "steps": [
        { "match": { "nth": 3 }, "action": { "type": "partial_send", "chunks": [3, 5, 4], "pause": 0.05 } },
        { "match": { "nth": 6 }, "action": { "type": "bad_end_code", "code": 0xC059 } },
        { "match": { "nth": 9 }, "action": { "type": "rst" } },
        { "match": { "nth": 12 }, "action": { "type": "truncate", "n": 5 } },
    ]});
    let plc = VirtualPlc::start("Q", &mc_memory(), Some(&faults), &[]);
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect(broker.port()).await;
    let http = free_port();
    let mc = Device::tcp("mc", "mc", plc.port())
        .set("deviceNum", "MC")
        .channel("readTimeoutMs", 500)
        .tag(Tag::new("d100", "D100", "INT16", 100));
    let text = collector(broker.port(), http).device(mc).yaml();
    let _engine = Engine::start(&scratch_dir("mc-faults"), &text);
    let messages = subscriber
        .wait_until(
            Duration::from_secs(20),
            "a BAD round and good rounds after all faults",
            |m| {
                let qualities: Vec<String> = m
                    .iter()
                    .filter(|m| m.topic == "P/MC/property/post")
                    .map(|m| {
                        m.json()["values"][0]["quality"]
                            .as_str()
                            .unwrap_or("")
                            .to_owned()
                    })
                    .collect();
                qualities.iter().any(|q| q == "BAD")
                    && qualities.len() >= 14
                    && qualities.last().is_some_and(|q| q == "GOOD")
            },
        )
        .await;
    let reports: Vec<Value> = messages
        .iter()
        .filter(|m| m.topic == "P/MC/property/post")
        .map(|m| m.json()["values"][0].clone())
        .collect();
    assert!(
        reports
            .iter()
            .all(|v| v["quality"] == "BAD" || v["value"] == 1234),
        "a good value is always the right one: {reports:?}"
    );
    // The reset and the truncated answer each cost the connection: reconnected since.
    let metrics = Engine::http_get(http, "/metrics", None)
        .await
        .expect("metrics");
    let reconnects: f64 = metrics
        .lines()
        .find(|l| l.starts_with("sluice_connection_reconnects_total{"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .expect("a reconnect counter");
    assert!(reconnects >= 1.0, "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seeds_s7_and_mc_device_blocks_run_as_written() {
    let seed = include_str!("../../src/config/testdata/seed.yaml");
    let start = seed.find("  - deviceId: dev-s7-1200-01").expect("S7 block");
    let end = seed
        .find("  - deviceId: dev-modbus-01")
        .expect("Modbus block");
    let mut db = vec![0u8; 16];
    db[0..4].copy_from_slice(&250.0f32.to_be_bytes());
    db[6] = 1;
    let s7 = Snap7::start(&json!({ "db": { "1": db } }));
    let mc = VirtualPlc::start("Q", &json!({ "D": { "100": [7, 1] } }), None, &[]);
    let blocks = seed[start..end]
        .replace("host: 192.168.1.110", "host: 127.0.0.1")
        .replace("port: 102", &format!("port: {}", s7.port()))
        .replace("host: 192.168.1.120", "host: 127.0.0.1")
        .replace("port: 6000", &format!("port: {}", mc.port()));
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect(broker.port()).await;
    let http = free_port();
    let text = collector(broker.port(), http).yaml_with_devices(&blocks);
    let _engine = Engine::start(&scratch_dir("seed-blocks"), &text);
    // The temperature has a deadband: after its first report it is only sent when
    // it moves, so look for each tag on its own.
    for (key, want) in [("temperature", json!(25.0)), ("run_status", json!(true))] {
        let values = wait_values(
            &subscriber,
            "P1001/DEV0001/property/post",
            &[key],
            "the seed's S7 device",
            |_| true,
        )
        .await;
        assert_eq!(
            values[key],
            (want, "GOOD".to_owned()),
            "{key} (250.0 x factor 0.1 for the temperature)"
        );
    }
    let mc_values = wait_values(
        &subscriber,
        "P1002/DEV0002/property/post",
        &["counter"],
        "the seed's MC device",
        |_| true,
    )
    .await;
    assert_eq!(
        mc_values["counter"].0,
        json!(65_543),
        "D100 = 7, D101 = 1: low word first"
    );
    let command = write(http, "dev-s7-1200-01", "set_speed", json!(1200)).await;
    assert_eq!(command["status"], "ACKED", "{command}");
    assert_eq!(command["write"]["after"], 1200);
}
