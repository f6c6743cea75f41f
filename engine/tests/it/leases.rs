//! Lease-based state with real processes: a pymodbus device killed and brought
//! back, the engine restarted in between, the state API and maintenance.

use std::time::Duration;

use crate::support::config::{Device, Gateway, Tag};
use crate::support::engine::{Engine, scratch_dir};
use crate::support::mqtt::{Message, Subscriber};
use crate::support::peers::{Mosquitto, PyModbus, free_port};
use serde_json::{Value, json};

/// The engine's config; with `SLUICE_TEST_POSTGRES` set (as `cargo xtask test`
/// does for its second run of the store tests) its state is on PostgreSQL.
fn config(modbus: u16, mqtt: u16, http: u16) -> String {
    let gateway = Gateway::new(&format!("leases-{http}"), mqtt)
        .http(http, "operator-secret")
        .set("perDeviceTimeoutMs", 500)
        .set("backoff", json!({ "baseMs": 100, "maxMs": 300 }))
        .set("lease.scanIntervalMs", 500)
        .device(
            Device::modbus("meter", modbus)
                .set("deviceNum", "M1")
                .set("stateTimeout", 2)
                .channel("readTimeoutMs", 300)
                .tag(Tag::new("a", "40001", "UINT16", 200)),
        );
    match crate::common::TestDatabase::new(&format!("leases-{http}")) {
        crate::common::TestDatabase::Postgres(url) => gateway
            .set("store", json!({ "kind": "postgres", "url": url }))
            .yaml(),
        crate::common::TestDatabase::Redb(_) => gateway.yaml(),
    }
}

async fn get(http: u16, path: &str) -> Value {
    let body = Engine::http_get(http, path, Some("operator-secret"))
        .await
        .unwrap_or_else(|| panic!("GET {path}"));
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
}

/// Sends a PUT with a JSON body; returns the status code and body.
async fn put(http: u16, path: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
    Engine::request(http, "PUT", path, token, Some(body)).await
}

/// The device's online events, each transition once: after a crash the WAL
/// delivers at least once, so an event whose acknowledgement was not yet on disk
/// arrives again, byte for byte.
fn distinct_online_events(messages: &[Message]) -> usize {
    let mut payloads: Vec<&[u8]> = messages
        .iter()
        .filter(|m| m.topic == "P/M1/event/post/device-online")
        .map(|m| m.payload.as_slice())
        .collect();
    payloads.sort_unstable();
    payloads.dedup();
    payloads.len()
}

async fn wait_state(http: u16, want: &str, within: Duration) -> Value {
    let deadline = std::time::Instant::now() + within;
    loop {
        let state = get(http, "/devices/meter/state").await;
        if state["state"] == want {
            return state;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not {want} within {within:?}: {state}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_device_goes_offline_within_its_lease_and_comes_back_across_a_restart() {
    let map = json!({ "hr": { "0": [7] } });
    let mut modbus = PyModbus::start(&map);
    let port = modbus.port();
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect(broker.port()).await;
    let http = free_port();
    let dir = scratch_dir("leases");
    let text = config(port, broker.port(), http);
    let mut engine = Engine::start(&dir, &text);

    let online = wait_state(http, "online", Duration::from_secs(15)).await;
    assert_eq!(online["timeoutSeconds"], 2);
    assert_eq!(online["timeoutSource"], "device");
    assert_eq!(online["parent"], "modbus_tcp");
    assert!(online["leaseVersion"].as_u64().expect("version") >= 1);
    assert!(
        online["expireTime"].as_i64().expect("expire")
            > online["lastHeartbeat"].as_i64().expect("heartbeat")
    );
    subscriber
        .wait_until(Duration::from_secs(5), "the online event", |m| {
            m.iter().any(|m| m.topic == "P/M1/event/post/device-online")
        })
        .await;

    // The device dies: offline within its lease (2 s) plus one scan tick (0.5 s),
    // with a retained status and a device-offline event.
    modbus.kill();
    let killed = std::time::Instant::now();
    let offline = wait_state(http, "offline", Duration::from_secs(10)).await;
    assert!(
        killed.elapsed() < Duration::from_millis(2500 + 1500),
        "took {:?}",
        killed.elapsed()
    );
    assert_eq!(offline["lastState"], "online");
    let messages = subscriber
        .wait_until(Duration::from_secs(5), "offline status and event", |m| {
            m.iter()
                .any(|m| m.topic == "P/M1/event/post/device-offline")
                && m.iter()
                    .any(|m| m.topic == "P/M1/status/post" && m.json()["status"] == "offline")
        })
        .await;
    let event = messages
        .iter()
        .find(|m| m.topic == "P/M1/event/post/device-offline")
        .expect("event")
        .json();
    assert_eq!(
        (event["id"].clone(), event["lastState"].clone()),
        (json!("meter"), json!("online"))
    );
    let listed = get(http, "/states?type=device&state=offline").await;
    assert_eq!(
        listed["states"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );

    // The engine restarts while the device is down: still offline, no spurious flap.
    engine.kill();
    let mut engine = Engine::start(&dir, &text);
    tokio::time::sleep(Duration::from_secs(2)).await;
    engine.assert_running();
    let after_restart = get(http, "/devices/meter/state").await;
    assert_eq!(after_restart["state"], "offline", "{after_restart}");
    let onlines = distinct_online_events(&subscriber.on("P/M1/event/post/device-online"));
    assert_eq!(onlines, 1, "no online event while the device is down");

    // The device comes back: online again, with its event.
    let _modbus = PyModbus::restart_on(port, &map);
    wait_state(http, "online", Duration::from_secs(15)).await;
    subscriber
        .wait_until(Duration::from_secs(5), "the second online event", |m| {
            distinct_online_events(m) >= 2
        })
        .await;
    let driver = get(http, "/drivers/modbus_tcp/state").await;
    assert_eq!(
        driver["state"], "online",
        "the driver heartbeats itself: {driver}"
    );
    assert_eq!(driver["timeoutSeconds"], 45);

    // An operator puts the device into maintenance and back; a token is required.
    let (status, _) = put(
        http,
        "/devices/meter/state",
        None,
        &json!({"state": "maintain"}),
    )
    .await;
    assert_eq!(status, 401);
    let (status, body) = put(
        http,
        "/devices/meter/state",
        Some("operator-secret"),
        &json!({"state": "maintain"}),
    )
    .await;
    assert_eq!(
        (status, body["state"].clone()),
        (200, json!("maintain")),
        "{body}"
    );
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        get(http, "/devices/meter/state").await["state"],
        "maintain",
        "heartbeats keep maintenance"
    );
    let (status, _) = put(
        http,
        "/devices/meter/state",
        Some("operator-secret"),
        &json!({"state": "fault"}),
    )
    .await;
    assert_eq!(status, 400);
    let (status, body) = put(
        http,
        "/devices/meter/state",
        Some("operator-secret"),
        &json!({"state": "online"}),
    )
    .await;
    assert_eq!((status, body["state"].clone()), (200, json!("online")));
    let (status, _) = put(
        http,
        "/devices/nobody/state",
        Some("operator-secret"),
        &json!({"state": "online"}),
    )
    .await;
    assert_eq!(status, 404);
    // A protocol driver goes into maintenance and back the same way.
    for wanted in ["maintain", "online"] {
        let (status, body) = put(
            http,
            "/drivers/modbus_tcp/state",
            Some("operator-secret"),
            &json!({ "state": wanted }),
        )
        .await;
        assert_eq!(
            (status, body["state"].clone()),
            (200, json!(wanted)),
            "{body}"
        );
    }
    let unknown = Engine::http_get(http, "/states?type=robot", Some("operator-secret"))
        .await
        .expect("answer");
    assert!(unknown.contains("unknown type"), "{unknown}");
}

/// Polls `GET path` as `token` until `done` holds for its body.
/// The alarms a token sees with this rule.
async fn alarms_of(http: u16, token: &str, rule: &str) -> Vec<Value> {
    let (_, body) = Engine::request(http, "GET", "/alarms", Some(token), None).await;
    let alarms = body["alarms"].as_array().cloned().unwrap_or_default();
    alarms
        .into_iter()
        .filter(|a| a["ruleKey"] == rule)
        .collect()
}

/// Two tenants on one codec (seed 000's key is tenant, type, id): each has a
/// driver row and a driver status of its own. Stopping one tenant's device
/// server takes that tenant's device offline and alarms that tenant only;
/// an operator's maintenance of one tenant's driver leaves the other's be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tenants_on_one_codec_keep_their_own_driver_rows_and_alarms() {
    use crate::support::config::{HOMES_TOKEN, PLANT_TOKEN, Tenant};
    const ADMIN: &str = "operator-secret";
    let (_plant_sim, plant_server) = crate::support::sim::simulator(10, Duration::ZERO).await;
    let (_homes_sim, homes_server) = crate::support::sim::simulator(10, Duration::ZERO).await;
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect(broker.port()).await;
    let http = free_port();
    let device = |id: &str, tenant: u32, port: u16| {
        Device::modbus(id, port)
            .set("tenantId", tenant)
            .set("stateTimeout", 2)
            .channel("readTimeoutMs", 300)
            .tag(Tag::new("t", "40001", "UINT16", 200))
    };
    let gateway = Gateway::new(&format!("tenant-drivers-{http}"), broker.port())
        .http(http, ADMIN)
        .set("perDeviceTimeoutMs", 500)
        .set("backoff", json!({ "baseMs": 100, "maxMs": 300 }))
        .set("lease.scanIntervalMs", 300)
        .tenant(Tenant::new(1, "plant").set("tokens", json!([PLANT_TOKEN])))
        .tenant(Tenant::new(2, "homes").set("tokens", json!([HOMES_TOKEN])))
        .device(device("pump", 1, plant_server.local_addr().port()))
        .device(device("fan", 2, homes_server.local_addr().port()));
    let text = match crate::common::TestDatabase::new(&format!("tenant-drivers-{http}")) {
        crate::common::TestDatabase::Postgres(url) => gateway
            .set("store", json!({ "kind": "postgres", "url": url }))
            .yaml(),
        crate::common::TestDatabase::Redb(_) => gateway.yaml(),
    };
    let _engine = Engine::start(&scratch_dir("tenant-drivers"), &text);

    for device in ["pump", "fan"] {
        let path = format!("/devices/{device}/state");
        Engine::until_get(http, &path, ADMIN, |b| b["state"] == "online").await;
    }
    // A driver row, and a retained status, per tenant.
    let drivers = Engine::until_get(http, "/states?type=driver&state=online", ADMIN, |b| {
        b["states"].as_array().is_some_and(|s| s.len() == 2)
    })
    .await;
    let rows: Vec<(Value, Value)> = drivers["states"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| (r["tenantId"].clone(), r["id"].clone()))
        .collect();
    assert_eq!(
        rows,
        [
            (json!(1), json!("modbus_tcp")),
            (json!(2), json!("modbus_tcp"))
        ]
    );
    for tenant in [1, 2] {
        let topic = format!("driver/{tenant}/modbus_tcp/status/post");
        subscriber
            .wait_until(Duration::from_secs(10), &topic, |m| {
                m.iter()
                    .any(|m| m.topic == topic && m.json()["status"] == "online")
            })
            .await;
    }
    // The admin says whose driver; a tenant reads its own.
    let (status, body) =
        Engine::request(http, "GET", "/drivers/modbus_tcp/state", Some(ADMIN), None).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().is_some_and(|e| e.contains("1, 2")),
        "{body}"
    );
    let homes = Engine::until_get(http, "/drivers/modbus_tcp/state", HOMES_TOKEN, |_| true).await;
    assert_eq!(homes["tenantId"], 2, "{homes}");
    let (status, _) = Engine::request(
        http,
        "GET",
        "/drivers/modbus_tcp/state?tenantId=1",
        Some(HOMES_TOKEN),
        None,
    )
    .await;
    assert_eq!(status, 404, "another tenant's driver");

    // The plant's device server stops: its device goes offline and only the
    // plant gets DEVICE_OFFLINE; the homes' device and both drivers go on.
    plant_server.shutdown().await;
    Engine::until_get(http, "/devices/pump/state", ADMIN, |b| {
        b["state"] == "offline"
    })
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while alarms_of(http, PLANT_TOKEN, "DEVICE_OFFLINE")
        .await
        .is_empty()
    {
        assert!(std::time::Instant::now() < deadline, "no DEVICE_OFFLINE");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let offline = alarms_of(http, PLANT_TOKEN, "DEVICE_OFFLINE").await;
    assert_eq!(
        (
            offline.len(),
            &offline[0]["deviceId"],
            &offline[0]["tenantId"]
        ),
        (1, &json!("pump"), &json!(1))
    );
    assert!(
        alarms_of(http, HOMES_TOKEN, "DEVICE_OFFLINE")
            .await
            .is_empty()
    );
    assert_eq!(get(http, "/devices/fan/state").await["state"], "online");
    let online = get(http, "/states?type=driver&state=online").await;
    assert_eq!(
        online["states"].as_array().map(Vec::len),
        Some(2),
        "{online}"
    );

    // Maintenance of the plant's driver leaves the homes' driver online.
    let maintain = json!({ "state": "maintain" });
    let (status, _) = put(http, "/drivers/modbus_tcp/state", Some(ADMIN), &maintain).await;
    assert_eq!(status, 400, "whose driver is not said");
    let (status, body) = put(
        http,
        "/drivers/modbus_tcp/state?tenantId=1",
        Some(ADMIN),
        &maintain,
    )
    .await;
    assert_eq!(
        (status, &body["state"], &body["tenantId"]),
        (200, &json!("maintain"), &json!(1)),
        "{body}"
    );
    let homes = get(http, "/drivers/modbus_tcp/state?tenantId=2").await;
    assert_eq!(homes["state"], "online", "{homes}");
    subscriber
        .wait_until(Duration::from_secs(5), "the plant driver's status", |m| {
            m.iter().any(|m| {
                m.topic == "driver/1/modbus_tcp/status/post" && m.json()["status"] == "maintain"
            })
        })
        .await;
    assert!(
        subscriber
            .on("driver/2/modbus_tcp/status/post")
            .iter()
            .all(|m| m.json()["status"] == "online")
    );
}
