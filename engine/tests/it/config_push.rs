//! Device configurations pushed by the platform on `config/push` (real
//! Mosquitto) and with `PUT /devices/{id}/config`: a push changes its one device
//! live and is in force after a restart; a broken one is refused with every
//! problem at its JSON path and changes nothing; a later file edit of a pushed
//! device is a conflict, and withdrawing the push applies the file again; a
//! tenant pushes only its own devices.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::config::{Device, Gateway, Tag, Tenant};
use crate::support::engine::{Engine, scratch_dir};
use crate::support::mqtt::{OPERATOR_KEY, Subscriber, reports, write_operator_key};
use crate::support::peers::{Mosquitto, Peer, free_port};
use serde_json::{Value, json};
use sluice::sim::{SimHandle, Simulator};

const ADMIN: &str = "admin-token";

/// A `devices` entry polling register 40001 of the simulator on `port` every
/// 100 ms, scaled by `factor`, of tenant `tenant`.
fn device(id: &str, port: u16, factor: u32, tenant: u32) -> Device {
    Device::modbus(id, port)
        .set("tenantId", tenant)
        .tag(Tag::new("t", "40001", "UINT16", 100).set("factor", factor))
}

/// The same device as a pushed JSON document.
fn pushed(port: u16, factor: u32, request_id: &str) -> Value {
    json!({
        "requestId": request_id,
        "tenantId": 1,
        "channels": [{
            "channelId": "main", "protocol": "modbus-tcp", "host": "127.0.0.1", "port": port,
            "tags": [{ "key": "t", "address": "40001", "dataType": "UINT16", "periodMs": 100, "factor": factor }]
        }]
    })
}

struct Rig {
    sims: Vec<(Simulator, SimHandle)>,
    broker: Peer,
    platform: Subscriber,
    http: u16,
    dir: PathBuf,
    file: PathBuf,
}

impl Rig {
    async fn start(name: &str) -> Self {
        let mut sims = Vec::new();
        for value in [11, 22] {
            let (sim, handle) = crate::support::sim::simulator(10, Duration::ZERO).await;
            sim.set_holding(0, &[value]);
            sims.push((sim, handle));
        }
        let broker = Mosquitto::start();
        let platform = Subscriber::connect(broker.port()).await;
        let dir = scratch_dir(name);
        write_operator_key(&dir);
        let file = dir.join("devices.yaml");
        Self {
            sims,
            broker,
            platform,
            http: free_port(),
            dir,
            file,
        }
    }

    fn port(&self, i: usize) -> u16 {
        self.sims[i].1.local_addr().port()
    }

    /// Writes the file: devices a (tenant 1) and b (tenant 2 or `b_tenant`), b
    /// scaled by `b_factor`.
    fn write(&self, b_factor: u32, b_tenant: u32) {
        let text = Gateway::without_client_id(self.broker.port())
            .http(self.http, ADMIN)
            .operator_key()
            .tenant(Tenant::new(1, "one").set("tokens", json!(["token-one"])))
            .tenant(Tenant::new(2, "two").set("tokens", json!(["token-two"])))
            .device(device("a", self.port(0), 1, 1))
            .device(device("b", self.port(1), b_factor, b_tenant))
            .yaml();
        std::fs::write(&self.file, text).expect("config");
    }

    fn engine(&self) -> Engine {
        Engine::start_with(&self.dir, &self.file)
    }

    async fn until_value(&self, id: &str, value: f64) {
        let topic = format!("P/{id}/property/post");
        self.platform
            .until_value(&topic, value, &format!("{id} = {value}"))
            .await;
    }

    async fn push_reply(&self, request_id: &str) -> Value {
        let id = request_id.to_owned();
        let replies = self
            .platform
            .wait_until(
                Duration::from_secs(20),
                &format!("the reply to {id}"),
                |m| {
                    m.iter().any(|m| {
                        m.topic.ends_with("/config/push/reply")
                            && m.json()["requestId"] == id.as_str()
                    })
                },
            )
            .await;
        replies
            .iter()
            .find(|m| {
                m.topic.ends_with("/config/push/reply") && m.json()["requestId"] == id.as_str()
            })
            .map(crate::support::mqtt::Message::json)
            .expect("reply")
    }

    /// Pushes `payload` on `config/push` of device `id`, signed with the operator's key.
    async fn push(&self, id: &str, payload: &Value) {
        let topic = format!("P/{id}/config/push");
        self.platform
            .publish_signed(&topic, payload, OPERATOR_KEY)
            .await;
    }

    async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        Engine::request(self.http, "GET", path, Some(token), None).await
    }
}

/// Sequence numbers without a gap or a repeat.
fn assert_unbroken(path: &Path, seen: &[(i64, f64)]) {
    let mut seqs: Vec<i64> = seen.iter().map(|(seq, _)| *seq).collect();
    seqs.sort_unstable();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "{}: no seq lost or repeated: {seqs:?}",
        path.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_changes_its_one_device_live_and_is_in_force_after_a_restart() {
    let rig = Rig::start("push-live").await;
    rig.write(1, 1);
    let mut engine = rig.engine();
    rig.until_value("a", 11.0).await;
    rig.until_value("b", 22.0).await;

    rig.push("b", &pushed(rig.port(1), 2, "push-1")).await;
    let reply = rig.push_reply("push-1").await;
    assert_eq!(
        (
            reply["status"].as_str(),
            reply["changed"].as_bool(),
            reply["deviceId"].as_str()
        ),
        (Some("APPLIED"), Some(true), Some("b")),
        "{reply}\n{}",
        engine.log()
    );
    rig.until_value("b", 44.0).await;
    let (status, view) = rig.get("/devices/b", ADMIN).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["configSource"]["from"], "push", "{view}");
    assert_eq!(view["configSource"]["requestId"], "push-1", "{view}");
    assert_eq!(view["channels"][0]["tags"][0]["factor"], 2.0, "{view}");
    assert_eq!(
        rig.get("/devices/a", ADMIN).await.1["configSource"]["from"],
        "file"
    );

    // Device a was not touched: one connection, every seq, no round skipped.
    assert_eq!(rig.sims[0].0.accepted_connections(), 1);
    let seen = reports(&rig.platform.messages(), "P/a/property/post");
    assert_unbroken(&rig.file, &seen);
    let metrics = Engine::http_get(rig.http, "/metrics", None)
        .await
        .expect("metrics");
    assert!(
        metrics.contains("sluice_rounds_skipped_total{device=\"a\"} 0"),
        "{metrics}"
    );

    // The same push again: in force already, nothing rebuilt.
    rig.push("b", &pushed(rig.port(1), 2, "push-2")).await;
    let again = rig.push_reply("push-2").await;
    assert_eq!(
        (again["status"].as_str(), again["changed"].as_bool()),
        (Some("APPLIED"), Some(false)),
        "{again}"
    );

    // After a restart the pushed configuration is in force over the file.
    engine.kill();
    let _engine = rig.engine();
    let before = reports(&rig.platform.messages(), "P/b/property/post").len();
    rig.platform
        .wait_until(Duration::from_secs(20), "b reported again", |m| {
            reports(m, "P/b/property/post").len() > before + 2
        })
        .await;
    let latest = reports(&rig.platform.messages(), "P/b/property/post");
    assert_eq!(latest.last().map(|(_, v)| *v), Some(44.0));
    assert_eq!(
        rig.get("/devices/b", ADMIN).await.1["configSource"]["from"],
        "push"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_push_is_refused_with_every_problem_at_its_json_path_and_changes_nothing() {
    let rig = Rig::start("push-broken").await;
    rig.write(1, 1);
    let engine = rig.engine();
    rig.until_value("b", 22.0).await;

    // The file's checks: every problem at once, each at its path.
    let mut broken = pushed(rig.port(1), 2, "broken-1");
    broken["colour"] = json!("red");
    broken["deviceNum"] = json!("OTHER");
    broken["channels"][0]["tags"][0]["dataType"] = json!("INT99");
    rig.push("b", &broken).await;
    let reply = rig.push_reply("broken-1").await;
    assert_eq!(reply["status"], "REJECTED", "{reply}\n{}", engine.log());
    assert_eq!(reply["deviceId"], "b", "{reply}");
    let at = |reply: &Value, path: &str| {
        reply["problems"]
            .as_array()
            .and_then(|problems| problems.iter().find(|p| p["path"] == path))
            .and_then(|p| p["message"].as_str())
            .unwrap_or_else(|| panic!("no problem at {path}: {reply}"))
            .to_owned()
    };
    assert!(
        at(&reply, "$.deviceNum").contains("cannot change"),
        "{reply}"
    );
    assert!(at(&reply, "$.colour").contains("colour"), "{reply}");
    assert!(
        at(&reply, "$.channels[0].tags[0].dataType").contains("INT99"),
        "{reply}"
    );
    // The codec's checks, as `sluice run` makes them.
    let mut wrong_address = pushed(rig.port(1), 2, "broken-2");
    wrong_address["channels"][0]["tags"][0]["address"] = json!("99999");
    rig.push("b", &wrong_address).await;
    let reply = rig.push_reply("broken-2").await;
    assert_eq!(reply["status"], "REJECTED", "{reply}");
    assert!(
        at(&reply, "$.channels[0].tags[0].address").contains("99999"),
        "{reply}"
    );

    // Not a device, and unsigned: refused, and answered.
    rig.platform
        .publish("P/b/config/push", &json!("not a device"))
        .await;
    let answers = rig
        .platform
        .wait_until(Duration::from_secs(20), "three refusals", |m| {
            m.iter()
                .filter(|m| m.topic == "P/b/config/push/reply" && m.json()["status"] == "REJECTED")
                .count()
                >= 3
        })
        .await;
    assert!(answers.iter().any(|m| {
        m.topic == "P/b/config/push/reply"
            && m.json()["problems"][0]["message"]
                .as_str()
                .unwrap_or("")
                .starts_with("unsigned")
    }));

    // Nothing changed: b still runs from the file, unscaled, on its connection.
    let before = reports(&rig.platform.messages(), "P/b/property/post").len();
    rig.platform
        .wait_until(Duration::from_secs(10), "b polled on", |m| {
            reports(m, "P/b/property/post").len() > before + 2
        })
        .await;
    let latest = reports(&rig.platform.messages(), "P/b/property/post");
    assert_eq!(latest.last().map(|(_, v)| *v), Some(22.0));
    assert_eq!(rig.sims[1].0.accepted_connections(), 1);
    assert_eq!(
        rig.get("/devices/b", ADMIN).await.1["configSource"]["from"],
        "file"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_edit_of_a_pushed_device_is_a_conflict_until_the_push_is_withdrawn() {
    let rig = Rig::start("push-conflict").await;
    rig.write(1, 1);
    let _engine = rig.engine();
    rig.until_value("b", 22.0).await;
    let put = |token: &'static str, id: &'static str, body: Value| {
        let path = format!("/devices/{id}/config");
        async move { Engine::request(rig.http, "PUT", &path, Some(token), Some(&body)).await }
    };

    // Over HTTP with tenant 1's token: its own device b.
    let (status, answer) = put("token-one", "b", pushed(rig.port(1), 2, "http-1")).await;
    assert_eq!(
        (status, answer["status"].as_str()),
        (200, Some("APPLIED")),
        "{answer}"
    );
    rig.until_value("b", 44.0).await;

    // The file's entry of b is edited: a conflict; the push stays in force.
    rig.write(3, 1);
    let (status, reload) = Engine::request(rig.http, "POST", "/reload", Some(ADMIN), None).await;
    assert_eq!(status, 200, "{reload}");
    let conflicts = &reload["devices"]["conflicts"];
    assert_eq!(conflicts[0]["deviceId"], "b", "{reload}");
    assert_eq!(conflicts[0]["fileEdit"], "changed", "{reload}");
    let health: Value = serde_json::from_str(
        &Engine::http_get(rig.http, "/health", Some(ADMIN))
            .await
            .expect("health"),
    )
    .expect("json");
    assert_eq!(
        health["config"]["conflicts"][0]["deviceId"], "b",
        "{health}"
    );
    let (_, view) = rig.get("/devices/b", "token-one").await;
    assert_eq!(view["configSource"]["fileEdit"], "changed", "{view}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    rig.until_value("b", 44.0).await;

    // Withdrawn: the file's entry applies.
    let (status, withdrawn) = Engine::request(
        rig.http,
        "DELETE",
        "/devices/b/config",
        Some("token-one"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{withdrawn}");
    rig.until_value("b", 66.0).await;
    assert_eq!(
        rig.get("/devices/b", ADMIN).await.1["configSource"]["from"],
        "file"
    );
    let health: Value = serde_json::from_str(
        &Engine::http_get(rig.http, "/health", Some(ADMIN))
            .await
            .expect("health"),
    )
    .expect("json");
    assert_eq!(health["config"]["conflicts"], json!([]), "{health}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_pushes_only_its_own_devices_and_never_moves_one() {
    let rig = Rig::start("push-tenants").await;
    rig.write(1, 2);
    let _engine = rig.engine();
    rig.until_value("b", 22.0).await;
    let put = |token: &'static str, id: &'static str, body: Value| {
        let path = format!("/devices/{id}/config");
        async move { Engine::request(rig.http, "PUT", &path, Some(token), Some(&body)).await }
    };

    // b is tenant 2's: tenant 1 cannot push it.
    let (status, refused) = put("token-one", "b", pushed(rig.port(1), 2, "t1-b")).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["problems"][0]["path"], "$.deviceId", "{refused}");
    // Nor move its own device a to tenant 2.
    let mut moved = pushed(rig.port(0), 1, "t1-a");
    moved["tenantId"] = json!(2);
    let (status, refused) = put("token-one", "a", moved).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["problems"][0]["path"], "$.tenantId", "{refused}");
    // Tenant 2 sees b, not a.
    assert_eq!(rig.get("/devices/a", "token-two").await.0, 404);
    assert_eq!(rig.get("/devices/b", "token-two").await.0, 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    rig.until_value("b", 22.0).await;
    rig.until_value("a", 11.0).await;
}
