//! A protocol the gateway has never seen, uploaded while it runs: the DL/T 645
//! example built with the SDK, uploaded through the API, a meter of the `dlt645`
//! package (PyPI) polled over TCP and on a serial line shared by two meters,
//! while a Modbus device keeps its period and the engine keeps running. Also
//! what is refused: a channel of a protocol no codec speaks, a second codec
//! claiming the protocol, removing the codec devices use, a codec that cannot
//! say what it speaks or misbehaves while checking a channel.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::test_component;
use crate::sdk::{author, builds};
use crate::support::config::{Device, Gateway, Tag};
use crate::support::engine::{Engine, scratch_dir};
use crate::support::mqtt::{Message, Subscriber};
use crate::support::peers::{Dlt645Meter, Mosquitto, SerialPair, free_port, project_root};
use sluice::runtime::ComponentKind;

const ADMIN: &str = "admin-token";
const PLC: &str = "P/plc/property/post";

/// The DL/T 645 example, built by the SDK in a directory of its own.
fn dlt645() -> Vec<u8> {
    let example = project_root().join("examples/codecs/dlt645/src/lib.rs");
    let (_, _, dir) = author(ComponentKind::Codec, "dlt645", Some(&example));
    let wasm = std::fs::read(builds().join("dlt645.wasm")).expect("the example's build");
    let _ = std::fs::remove_dir_all(dir);
    wasm
}

async fn upload(http: u16, path: &str, bytes: &[u8]) -> (u16, Value) {
    Engine::put_wasm(http, path, ADMIN, bytes).await
}

/// The values of the last report on `topic`, by key.
fn last_values(messages: &[Message], topic: &str) -> Option<Vec<(String, f64)>> {
    let last = messages.iter().rev().find(|m| m.topic == topic)?.json();
    last["values"].as_array().map(|values| {
        values
            .iter()
            .filter_map(|v| Some((v["key"].as_str()?.to_owned(), v["value"].as_f64()?)))
            .collect()
    })
}

fn has_values(messages: &[Message], topic: &str, expected: &[(&str, f64)]) -> bool {
    last_values(messages, topic).is_some_and(|values| {
        expected.iter().all(|(key, value)| {
            values
                .iter()
                .any(|(k, v)| k == key && (v - value).abs() < 1e-9)
        })
    })
}

/// The longest time between two reports of the Modbus device, by their `ts`.
fn longest_gap_ms(messages: &[Message]) -> i64 {
    let stamps: Vec<i64> = messages
        .iter()
        .filter(|m| m.topic == PLC)
        .filter_map(|m| m.json()["ts"].as_i64())
        .collect();
    stamps.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0)
}

/// A gateway that knows nothing of DL/T 645, with a Modbus device reporting
/// every 200 ms.
struct Rig {
    broker: crate::support::peers::Peer,
    subscriber: Subscriber,
    http: u16,
    dir: PathBuf,
    _sim: (sluice::sim::Simulator, sluice::sim::SimHandle),
    plc: Device,
}

impl Rig {
    async fn start(name: &str) -> Self {
        let sim = crate::support::sim::simulator(10, Duration::ZERO).await;
        sim.0.set_holding(0, &[7]);
        let plc = Device::modbus("plc", sim.1.local_addr().port())
            .tag(Tag::new("t", "40001", "UINT16", 200));
        let broker = Mosquitto::start();
        let subscriber = Subscriber::connect(broker.port()).await;
        Self {
            subscriber,
            http: free_port(),
            dir: scratch_dir(name),
            broker,
            _sim: sim,
            plc,
        }
    }

    fn gateway(&self) -> Gateway {
        Gateway::without_client_id(self.broker.port())
            .http(self.http, ADMIN)
            .set("lease.scanIntervalMs", 200)
            .device(self.plc.clone())
    }

    async fn state(&self, id: &str) -> Value {
        let path = format!("/devices/{id}/state");
        Engine::request(self.http, "GET", &path, Some(ADMIN), None)
            .await
            .1
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protocol_never_seen_is_uploaded_pushed_and_polled_while_the_gateway_runs() {
    let wasm = dlt645();
    let meter = Dlt645Meter::start(&json!({
        "address": "000000000001",
        "values": {"02010100": 229.7, "00000000": 45678.91},
    }));
    let rig = Rig::start("protocol-upload").await;
    let config = rig.gateway().yaml();
    assert!(!config.contains("dlt645"));
    let mut engine = Engine::start(&rig.dir, &config);
    let pid = engine.pid();
    rig.subscriber
        .until_value(PLC, 7.0, "the PLC reports")
        .await;
    let push = json!({
        "productId": "P", "deviceNum": "meter",
        "channels": [{
            "channelId": "rs485", "protocol": "dlt645", "host": "127.0.0.1", "port": meter.port(),
            "meterAddress": "000000000001", "leaseSeconds": 2,
            "tags": [
                { "key": "ua", "address": "02010100", "dataType": "FLOAT64", "periodMs": 200 },
                { "key": "energy", "address": "00000000", "dataType": "FLOAT64", "periodMs": 200 }
            ]
        }]
    });
    let put = |body: Value| async move {
        Engine::request(
            rig.http,
            "PUT",
            "/devices/meter/config",
            Some(ADMIN),
            Some(&body),
        )
        .await
    };

    // Before the upload no codec speaks it: refused, naming the protocols there are.
    let (status, refused) = put(push.clone()).await;
    assert_eq!(status, 422, "{refused}");
    let said = refused.to_string();
    assert!(
        said.contains("unknown protocol `dlt645`: this gateway speaks mc | modbus-rtu"),
        "{said}"
    );

    let (status, uploaded) = upload(rig.http, "/components/dlt645/1.0.0?kind=codec", &wasm).await;
    assert_eq!(status, 200, "{uploaded}");
    // Another codec may not claim the protocol.
    let (status, refused) = upload(rig.http, "/components/meters/1.0.0?kind=codec", &wasm).await;
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused
            .to_string()
            .contains("protocol dlt645, which codec `dlt645` speaks already"),
        "{refused}"
    );
    // The codec's declaration checks the channel: a key it does not declare,
    // a value not of its type, each where the JSON has it.
    let mut wrong = push.clone();
    wrong["channels"][0]["unitId"] = json!(1);
    wrong["channels"][0]["leaseSeconds"] = json!("soon");
    let (status, refused) = put(wrong).await;
    assert_eq!(status, 422, "{refused}");
    let said = refused.to_string();
    for words in [
        "`unitId` does not apply to protocol dlt645",
        "`leaseSeconds`: expected an integer, found a string",
    ] {
        assert!(said.contains(words), "{words}: {said}");
    }

    let since = rig.subscriber.messages().len();
    let (status, applied) = put(push).await;
    assert_eq!(
        (status, applied["status"].as_str()),
        (200, Some("APPLIED")),
        "{applied}"
    );
    let seen = rig
        .subscriber
        .wait_until(Duration::from_secs(15), "the meter's values", |m| {
            has_values(
                m,
                "P/meter/property/post",
                &[("ua", 229.7), ("energy", 45678.91)],
            )
        })
        .await;
    let gap = longest_gap_ms(&seen[since..]);
    assert!(gap < 1000, "the PLC kept its 200 ms period: {gap} ms");

    // The lease its codec reported (`leaseSeconds`), which ends when the meter
    // stops answering.
    let deadline = Instant::now() + Duration::from_secs(5);
    let state = loop {
        let state = rig.state("meter").await;
        if (state["state"].is_string() && state["state"] != "unknown") || Instant::now() > deadline
        {
            break state;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        (
            state["timeoutSource"].as_str(),
            state["timeoutSeconds"].as_u64()
        ),
        (Some("driver"), Some(2)),
        "{state}"
    );
    assert_eq!(state["state"], "online", "{state}");
    // Devices use the codec: it stays.
    let (status, refused) = Engine::request(
        rig.http,
        "DELETE",
        "/components/dlt645/1.0.0",
        Some(ADMIN),
        None,
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused
            .to_string()
            .contains("does not speak dlt645, which devices meter use"),
        "{refused}"
    );
    drop(meter);
    let stopped = Instant::now();
    let deadline = stopped + Duration::from_secs(10);
    while rig.state("meter").await["state"] != "offline" {
        assert!(Instant::now() < deadline, "the meter never went offline");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        stopped.elapsed() >= Duration::from_millis(1500),
        "offline only once its lease ran out"
    );
    let since = rig.subscriber.messages().len();
    rig.subscriber
        .wait_until(Duration::from_secs(5), "more PLC reports", |m| {
            m[since..].iter().filter(|m| m.topic == PLC).count() >= 5
        })
        .await;
    engine.assert_running();
    assert_eq!(engine.pid(), pid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_meters_share_a_serial_line_once_their_protocol_is_uploaded() {
    let wasm = dlt645();
    let line = SerialPair::start();
    let meter =
        |address: &str, voltage: f64| json!({"address": address, "values": {"02010100": voltage}});
    let _meters = Dlt645Meter::serial(
        &line.b,
        &json!({"meters": [meter("000000000001", 229.7), meter("000000000002", 231.4)]}),
    );
    let rig = Rig::start("protocol-serial").await;
    let file = rig.dir.join("devices.yaml");
    std::fs::write(&file, rig.gateway().yaml()).expect("config");
    let mut engine = Engine::start_with(&rig.dir, &file);
    let pid = engine.pid();
    rig.subscriber
        .until_value(PLC, 7.0, "the PLC reports")
        .await;
    let (status, uploaded) = upload(rig.http, "/components/dlt645/1.0.0?kind=codec", &wasm).await;
    assert_eq!(status, 200, "{uploaded}");

    // Two meters on one line, each by its address, added by a file edit.
    let on_line = |id: &str, address: &str| {
        Device::on(id, "dlt645")
            .channel("serialPort", line.a.display().to_string())
            .channel("meterAddress", address)
            .channel("readTimeoutMs", 500)
            .tag(Tag::new("ua", "02010100", "FLOAT64", 300))
    };
    let since = rig.subscriber.messages().len();
    let edited = rig
        .gateway()
        .device(on_line("m1", "000000000001"))
        .device(on_line("m2", "000000000002"));
    std::fs::write(&file, edited.yaml()).expect("config");
    let (status, reload) = Engine::request(rig.http, "POST", "/reload", Some(ADMIN), None).await;
    assert_eq!(status, 200, "{reload}");
    assert_eq!(reload["devices"]["added"], json!(["m1", "m2"]), "{reload}");
    let seen = rig
        .subscriber
        .wait_until(Duration::from_secs(20), "both meters' voltages", |m| {
            has_values(m, "P/m1/property/post", &[("ua", 229.7)])
                && has_values(m, "P/m2/property/post", &[("ua", 231.4)])
        })
        .await;
    let gap = longest_gap_ms(&seen[since..]);
    assert!(gap < 1000, "the PLC kept its 200 ms period: {gap} ms");
    engine.assert_running();
    assert_eq!(engine.pid(), pid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codec_that_cannot_say_what_it_speaks_or_misbehaves_checking_a_channel_is_refused() {
    let rig = Rig::start("protocol-hostile").await;
    let _engine = Engine::start(&rig.dir, &rig.gateway().yaml());
    rig.subscriber
        .until_value(PLC, 7.0, "the PLC reports")
        .await;

    // `describe` never returns: the CPU budget stops it, the upload is refused.
    let (status, refused) = upload(
        rig.http,
        "/components/endless/1.0.0?kind=codec",
        &test_component("endless_codec"),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    let said = refused.to_string();
    assert!(
        said.contains("codec `endless` cannot say what it speaks") && said.contains("`describe`"),
        "{said}"
    );

    let (status, uploaded) = upload(
        rig.http,
        "/components/hostile/1.0.0?kind=codec",
        &test_component("hostile_codec"),
    )
    .await;
    assert_eq!(status, 200, "{uploaded}");
    for (mode, words) in [("trap", "trapped"), ("loop", "CPU"), ("memory", "memory")] {
        let push = Device::tcp("h", "hostile", 1)
            .channel("mode", mode)
            .tag(Tag::new("x", "1", "UINT16", 1000))
            .json();
        let (status, refused) = Engine::request(
            rig.http,
            "PUT",
            "/devices/h/config",
            Some(ADMIN),
            Some(&push),
        )
        .await;
        assert_eq!(
            (status, refused["status"].as_str()),
            (422, Some("REJECTED")),
            "{mode}: {refused}"
        );
        let said = refused["problems"][0]["message"].as_str().unwrap_or("");
        assert!(
            said.contains("component `hostile`") && said.contains(words),
            "{mode}: {refused}"
        );
    }
    let since = rig.subscriber.messages().len();
    let seen = rig
        .subscriber
        .wait_until(Duration::from_secs(5), "more PLC reports", |m| {
            m[since..].iter().filter(|m| m.topic == PLC).count() >= 5
        })
        .await;
    assert!(longest_gap_ms(&seen[since..]) < 1000);
}
