//! Leases kept for collectors outside the engine (STATE-8): heartbeats over
//! `POST /heartbeats` and signed MQTT messages, expiring, alarming and read
//! back like the engine's own rows; what the engine collects itself, and
//! another tenant's entities, refused. Run on redb and, in the xtask's second
//! run, on PostgreSQL.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::config::{Device, Gateway, Tag, Tenant};
use crate::support::engine::{Engine, scratch_dir};
use crate::support::mqtt::{Subscriber, signed};
use crate::support::peers::{Mosquitto, free_port};

const ADMIN: &str = "operator-secret";
const PLANT: &str = "plant-token-0123456789";
const HOMES: &str = "homes-token-0123456789";
const HOMES_KEY: &str = "homes-downlink-key-0123456789abcdef";

/// Tenants 1 (`plant`, with device `plc` on a port where nothing answers) and
/// 2 (`homes`, signing with its downlink key); leases scanned every 200 ms.
fn config(mqtt: u16, http: u16, nobody: u16) -> String {
    let gateway = Gateway::new(&format!("outside-{http}"), mqtt)
        .http(http, ADMIN)
        .set("lease.scanIntervalMs", 200)
        .tenant(Tenant::new(1, "plant").set("tokens", json!([PLANT])))
        .tenant(
            Tenant::new(2, "homes")
                .set("tokens", json!([HOMES]))
                .set("downlinkKeyFile", "homes.key"),
        )
        .device(
            Device::modbus("plc", nobody)
                .set("tenantId", 1)
                .tag(Tag::new("a", "40001", "UINT16", 1000)),
        );
    match crate::common::TestDatabase::new(&format!("outside-{http}")) {
        crate::common::TestDatabase::Postgres(url) => gateway
            .set("store", json!({ "kind": "postgres", "url": url }))
            .yaml(),
        crate::common::TestDatabase::Redb(_) => gateway.yaml(),
    }
}

async fn post(http: u16, token: &str, heartbeats: Value) -> (u16, Value) {
    let body = json!({ "heartbeats": heartbeats });
    Engine::request(http, "POST", "/heartbeats", Some(token), Some(&body)).await
}

/// The meter's heartbeats as its collector sends them: a 2 s lease, announced
/// as `M/7`.
fn meter(state: &str) -> Value {
    json!([
        { "type": "driver", "id": "opcua", "state": "online" },
        { "type": "device", "id": "meter-7", "parent": "opcua", "state": state,
          "timeout": 2, "productId": "M", "deviceNum": "7" },
    ])
}

/// Alarms of `rule` the token sees that are not cleared.
async fn open_alarms(http: u16, token: &str, rule: &str) -> Vec<Value> {
    let (_, body) = Engine::request(http, "GET", "/alarms", Some(token), None).await;
    body["alarms"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a["ruleKey"] == rule && a["clearedAt"].is_null())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reported_leases_expire_alarm_and_come_back_like_the_engines_own() {
    let broker = Mosquitto::start();
    let (http, nobody) = (free_port(), free_port());
    let dir = scratch_dir(&format!("outside-{http}"));
    std::fs::write(dir.join("homes.key"), format!("{HOMES_KEY}\n")).expect("key file");
    let mut engine = Engine::start(&dir, &config(broker.port(), http, nobody));
    let subscriber = Subscriber::connect(broker.port()).await;

    // A tenant reports its driver and a device; both read like rows of the engine's.
    let (status, body) = post(http, PLANT, meter("online")).await;
    assert_eq!((status, &body["accepted"]), (200, &json!(2)), "{body}");
    let row = Engine::until_get(http, "/devices/meter-7/state", PLANT, |b| {
        b["state"] == "online"
    })
    .await;
    assert_eq!(
        (&row["tenantId"], &row["parent"], &row["timeoutSeconds"]),
        (&json!(1), &json!("opcua"), &json!(2)),
        "{row}"
    );
    assert_eq!(row["timeoutSource"], "driver", "{row}");
    assert_eq!(row["extension"]["reportedBy"], "http", "{row}");
    let drivers = Engine::until_get(http, "/states?type=driver&tenantId=1", ADMIN, |b| {
        b["states"]
            .as_array()
            .is_some_and(|rows| rows.iter().any(|r| r["id"] == "opcua"))
    })
    .await;
    let opcua = drivers["states"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["id"] == "opcua"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (&opcua["timeoutSeconds"], &opcua["timeoutSource"]),
        (&json!(45), &json!("system")),
        "{opcua}"
    );
    subscriber
        .wait_until(Duration::from_secs(5), "the meter's status", |m| {
            m.iter()
                .any(|m| m.topic == "M/7/status/post" && m.json()["status"] == "online")
        })
        .await;

    // Silent past its lease, the meter goes offline and alarms its tenant only.
    Engine::until_get(http, "/devices/meter-7/state", PLANT, |b| {
        b["state"] == "offline"
    })
    .await;
    subscriber
        .wait_until(Duration::from_secs(5), "the meter's offline status", |m| {
            m.iter()
                .any(|m| m.topic == "M/7/status/post" && m.json()["status"] == "offline")
        })
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while open_alarms(http, PLANT, "DEVICE_OFFLINE").await.is_empty() {
        assert!(std::time::Instant::now() < deadline, "no DEVICE_OFFLINE");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let offline = open_alarms(http, PLANT, "DEVICE_OFFLINE").await;
    assert_eq!(
        (
            offline.len(),
            &offline[0]["deviceId"],
            &offline[0]["tenantId"]
        ),
        (1, &json!("meter-7"), &json!(1))
    );
    assert!(open_alarms(http, HOMES, "DEVICE_OFFLINE").await.is_empty());

    // Its next heartbeat brings it back and clears the alarm.
    let (status, _) = post(http, PLANT, meter("online")).await;
    assert_eq!(status, 200);
    Engine::until_get(http, "/devices/meter-7/state", PLANT, |b| {
        b["state"] == "online"
    })
    .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !open_alarms(http, PLANT, "DEVICE_OFFLINE").await.is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "DEVICE_OFFLINE not cleared"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // What the engine collects itself, and another tenant's, are refused;
    // nothing of a refused batch is taken.
    let refusals = [
        (
            HOMES,
            json!([{ "type": "driver", "id": "x", "state": "online", "tenantId": 1 }]),
            403,
        ),
        (
            HOMES,
            json!([{ "type": "device", "id": "plc", "parent": "x", "state": "online" }]),
            403,
        ),
        (
            PLANT,
            json!([{ "type": "device", "id": "plc", "parent": "x", "state": "online" }]),
            409,
        ),
        (
            PLANT,
            json!([
                { "type": "driver", "id": "never-taken", "state": "online" },
                { "type": "driver", "id": "modbus_tcp", "state": "online" },
            ]),
            409,
        ),
        (
            ADMIN,
            json!([{ "type": "device", "id": "d", "state": "online" }]),
            400,
        ),
    ];
    for (token, heartbeats, expected) in refusals {
        let (status, body) = post(http, token, heartbeats.clone()).await;
        assert_eq!(status, expected, "{heartbeats}: {body}");
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("heartbeats[")),
            "{body}"
        );
    }
    let (status, _) =
        Engine::request(http, "GET", "/drivers/never-taken/state", Some(ADMIN), None).await;
    assert_eq!(status, 404, "a refused batch renews nothing");

    // Over MQTT, signed with the homes' key: its driver in fault.
    let topic = "heartbeat/post/2";
    let batch = json!({
        "requestId": "hb-1",
        "heartbeats": [{ "type": "driver", "id": "bacnet", "state": "fault", "timeout": 30 }],
    });
    subscriber
        .publish_bytes(topic, signed(topic, &batch, HOMES_KEY))
        .await;
    let bacnet = Engine::until_get(http, "/drivers/bacnet/state", HOMES, |b| {
        b["state"] == "fault"
    })
    .await;
    assert_eq!(
        (&bacnet["tenantId"], &bacnet["extension"]["reportedBy"]),
        (&json!(2), &json!("mqtt")),
        "{bacnet}"
    );
    // Unsigned, or for tenant 1 under the homes' key: refused on the reply topic.
    subscriber.publish(topic, &batch).await;
    let plant_topic = "heartbeat/post/1";
    subscriber
        .publish_bytes(plant_topic, signed(plant_topic, &batch, HOMES_KEY))
        .await;
    let replies = subscriber
        .wait_until(Duration::from_secs(5), "two refusals", |m| {
            m.iter().filter(|m| m.topic.ends_with("/reply")).count() >= 2
        })
        .await;
    let reasons: Vec<(String, Value)> = replies
        .iter()
        .filter(|m| m.topic.ends_with("/reply"))
        .map(|m| (m.topic.clone(), m.json()))
        .collect();
    assert!(
        reasons
            .iter()
            .any(|(topic, reply)| topic == "heartbeat/post/2/reply"
                && reply["status"] == "REJECTED"
                && reply["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("unsigned"))),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|(topic, reply)| topic == "heartbeat/post/1/reply"
                && reply["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("no key of the operator or of tenant 1"))),
        "{reasons:?}"
    );
    engine.assert_running();
}
