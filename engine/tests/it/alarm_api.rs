//! The alarm API of a running engine: a pymodbus device whose value crosses a
//! pipeline threshold, device events posted by two tenants, delivery to
//! Mosquitto, a lease alarm when the device dies, and persistence across a
//! restart.

use std::time::{Duration, Instant};

use crate::support::config::{
    BOILER_PIPELINE, Gateway, HOMES_TOKEN, PLANT_TOKEN, Tag, two_tenants,
};
use crate::support::engine::{Engine, scratch_dir};
use crate::support::mqtt::Subscriber;
use crate::support::peers::{Mosquitto, PyModbus, free_port};
use serde_json::{Value, json};

const ADMIN: &str = "operator-secret";
const PLANT: &str = PLANT_TOKEN;
const HOMES: &str = HOMES_TOKEN;

fn config(modbus: u16, mqtt: u16, http: u16, nobody: u16) -> String {
    let gateway = Gateway::new(&format!("alarms-{http}"), mqtt)
        .http(http, ADMIN)
        .set("perDeviceTimeoutMs", 500)
        .set("mqtt.topicPrefix", "site")
        .set("backoff", json!({ "baseMs": 100, "maxMs": 300 }))
        .set("lease.scanIntervalMs", 300)
        .set("alarms.escalateAfterSec", 3600);
    two_tenants(gateway, (modbus, nobody), |boiler| {
        boiler
            .set("stateTimeout", 2)
            .tag(Tag::new("temp", "40001", "UINT16", 200))
    })
    .yaml()
}

async fn call(
    http: u16,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    Engine::request(http, method, path, token, body.as_ref()).await
}

async fn get(http: u16, path: &str, token: &str) -> Value {
    let (status, body) = call(http, "GET", path, Some(token), None).await;
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

/// Polls `GET path` (as `token`) until `done` holds for the body.
async fn wait_get(
    http: u16,
    path: &str,
    token: &str,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (status, body) = call(http, "GET", path, Some(token), None).await;
        if status == 200 && done(&body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: last answer {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn with_rule<'a>(body: &'a Value, rule: &str) -> Option<&'a Value> {
    body["alarms"]
        .as_array()?
        .iter()
        .find(|a| a["ruleKey"] == rule)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alarms_from_samples_events_and_leases_through_the_api() {
    let mut modbus = PyModbus::start(&json!({ "hr": { "0": [95], "1": [0] } }));
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect(broker.port()).await;
    let http = free_port();
    let dir = scratch_dir("alarm-api");
    let pipelines = dir.join("pipelines");
    std::fs::create_dir_all(&pipelines).expect("pipelines dir");
    std::fs::write(pipelines.join("with-alarms.yaml"), BOILER_PIPELINE).expect("pipeline");
    let text = config(modbus.port(), broker.port(), http, free_port());
    let mut engine = Engine::start_with_pipelines(&dir, &text, &pipelines);

    // A sample above the threshold raises an alarm, delivered to the broker and
    // PUSHED once acknowledged.
    let hot = wait_get(
        http,
        "/alarms?ruleKey=BOILER_HOT",
        ADMIN,
        "the threshold alarm, pushed",
        |b| with_rule(b, "BOILER_HOT").is_some_and(|a| a["state"] == "PUSHED"),
    )
    .await;
    let hot = with_rule(&hot, "BOILER_HOT").expect("alarm").clone();
    assert_eq!(
        (hot["deviceId"].as_str(), hot["tenantId"].as_u64()),
        (Some("boiler"), Some(1))
    );
    assert_eq!(hot["source"], "rule");
    let hot_id = hot["id"].as_u64().expect("id");
    subscriber
        .wait_until(
            Duration::from_secs(5),
            "the alarm on the alarm topic",
            |m| {
                m.iter()
                    .any(|m| m.topic == "site/alarm/post" && m.json()["alarm"]["id"] == hot_id)
            },
        )
        .await;

    // Tokens: none or a wrong one is 401; another tenant's alarm is 404.
    assert_eq!(call(http, "GET", "/alarms", None, None).await.0, 401);
    assert_eq!(
        call(http, "GET", "/alarms", Some("guess"), None).await.0,
        401
    );
    let path = format!("/alarms/{hot_id}");
    assert_eq!(call(http, "GET", &path, Some(HOMES), None).await.0, 404);
    assert_eq!(
        call(http, "POST", &format!("{path}/confirm"), Some(HOMES), None)
            .await
            .0,
        404
    );
    assert_eq!(
        call(http, "GET", &format!("{path}/chain"), Some(HOMES), None)
            .await
            .0,
        404
    );
    assert!(
        get(http, "/alarms", HOMES).await["alarms"]
            .as_array()
            .expect("list")
            .is_empty()
    );
    assert_eq!(get(http, &path, PLANT).await["id"], hot_id);

    // Device events: tenant 2 posts for its own device only.
    let sos = json!({ "deviceId": "flat-7", "type": "SOS", "eventId": "ev-1" });
    assert_eq!(
        call(http, "POST", "/events", Some(PLANT), Some(sos.clone()))
            .await
            .0,
        404
    );
    let (status, posted) = call(http, "POST", "/events", Some(HOMES), Some(sos.clone())).await;
    assert_eq!(status, 200, "{posted}");
    assert_eq!(posted["results"][0]["result"], "opened");
    let sos_id = posted["results"][0]["alarm"]["id"].as_u64().expect("id");
    let (_, again) = call(http, "POST", "/events", Some(HOMES), Some(sos)).await;
    assert_eq!(
        again["results"][0],
        json!({ "result": "duplicate", "alarmId": sos_id })
    );
    let coffee = json!({ "deviceId": "flat-7", "type": "COFFEE" });
    assert_eq!(
        call(http, "POST", "/events", Some(HOMES), Some(coffee))
            .await
            .0,
        422
    );

    // A transition outside the whitelist is refused with what is allowed.
    let sos_path = format!("/alarms/{sos_id}");
    let (status, refused) = call(
        http,
        "POST",
        &format!("{sos_path}/close"),
        Some(HOMES),
        None,
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["allowed"], json!(["confirm", "handle", "false"]));
    let (status, _) = call(
        http,
        "POST",
        &format!("{sos_path}/escalate"),
        Some(HOMES),
        None,
    )
    .await;
    assert_eq!(status, 400, "engine actions are not for people");
    let by = json!({ "by": "warden", "note": "on my way" });
    let (status, confirmed) = call(
        http,
        "POST",
        &format!("{sos_path}/confirm"),
        Some(HOMES),
        Some(by),
    )
    .await;
    assert_eq!(status, 200, "{confirmed}");
    assert_eq!(confirmed["state"], "CONFIRMED");
    assert_eq!(confirmed["confirmedBy"], "tenant:2/warden");
    let actions = get(http, &format!("{sos_path}/actions"), HOMES).await;
    assert_eq!(actions["actions"], json!(["handle", "false"]));
    let detail = get(http, &sos_path, HOMES).await;
    let history = detail["history"].as_array().expect("history");
    let last = history.last().expect("an entry");
    assert_eq!(
        (last["action"].as_str(), last["note"].as_str()),
        (Some("confirm"), Some("on my way"))
    );

    // A second SOS opens a new alarm; the confirmed one keeps its state, so the
    // new alarm's chain holds only itself.
    let sos2 = json!({ "deviceId": "flat-7", "type": "SOS", "eventId": "ev-2" });
    let (_, posted) = call(http, "POST", "/events", Some(HOMES), Some(sos2)).await;
    let sos2_id = posted["results"][0]["alarm"]["id"].as_u64().expect("id");
    assert_eq!(
        posted["results"][0]["previous"],
        json!({ "id": sos_id, "state": "CONFIRMED" })
    );
    let chain = get(http, &format!("/alarms/{sos2_id}/chain"), HOMES).await;
    assert_eq!(chain["alarms"].as_array().map(Vec::len), Some(1));
    // The seed's "acknowledged" (`ack`) is `confirm` by its other name.
    let (status, acked) = call(
        http,
        "POST",
        &format!("/alarms/{sos2_id}/ack"),
        Some(HOMES),
        None,
    )
    .await;
    assert_eq!(
        (status, acked["state"].as_str()),
        (200, Some("CONFIRMED")),
        "{acked}"
    );
    // A power-on clears nothing of an SOS.
    let power = json!({ "deviceId": "flat-7", "type": "POWER_ON" });
    let (_, cleared) = call(http, "POST", "/events", Some(HOMES), Some(power)).await;
    assert!(
        cleared["results"]
            .as_array()
            .expect("results")
            .iter()
            .all(|r| r["result"] == "nothing to clear")
    );
    assert!(get(http, &format!("/alarms/{sos2_id}"), HOMES).await["clearedAt"].is_null());
    let stats = get(http, "/alarms/stats", HOMES).await;
    assert_eq!(stats["pending"], 2);
    assert_eq!(stats["today"]["raised"], 2);

    // The device dies: its lease runs out and the lease event raises DEVICE_OFFLINE.
    modbus.kill();
    let offline = wait_get(
        http,
        "/alarms?deviceId=boiler",
        PLANT,
        "the offline alarm",
        |b| with_rule(b, "DEVICE_OFFLINE").is_some(),
    )
    .await;
    assert_eq!(
        with_rule(&offline, "DEVICE_OFFLINE").expect("alarm")["source"],
        "lease"
    );
    let health = get(http, "/health", ADMIN).await;
    assert_eq!(health["auditFailures"], 0);

    // A restart keeps every alarm, its state and its history (which also records
    // the release of its key to the second SOS).
    let before = get(http, &sos_path, HOMES).await;
    let changes: Vec<&str> = before["history"]
        .as_array()
        .expect("history")
        .iter()
        .filter_map(|r| r["change"].as_str())
        .collect();
    // (a push may come before the confirm, depending on the delivery timer)
    assert_eq!(changes.first(), Some(&"raise"));
    assert_eq!(changes.last(), Some(&"release"));
    engine.kill();
    let engine = Engine::start_with_pipelines(&dir, &text, &pipelines);
    let kept = wait_get(
        http,
        &sos_path,
        HOMES,
        "the confirmed alarm after a restart",
        |b| b["state"] == "CONFIRMED",
    )
    .await;
    assert_eq!(
        kept["history"].as_array().map(Vec::len),
        Some(changes.len())
    );
    let metrics = Engine::http_get(http, "/metrics", None)
        .await
        .expect("metrics");
    assert!(
        metrics.contains("sluice_alarm_audit_failures_total 0"),
        "{metrics}"
    );
    drop(engine);
}

/// Writes `speed` of `pump` (a request id and a value; deferrable) and waits
/// until the command ends in `status`.
async fn write_pump(http: u16, request_id: &str, value: u16, status: &str) {
    let write = json!({
        "deviceId": "pump", "key": "speed", "value": value,
        "requestId": request_id, "realtime": false,
    });
    let (created, command) = call(http, "POST", "/commands", Some(ADMIN), Some(write)).await;
    assert_eq!(created, 201, "{command}");
    let id = command["id"].as_u64().expect("id");
    wait_get(http, &format!("/commands/{id}"), ADMIN, status, |b| {
        b["status"] == status
    })
    .await;
}

/// The engine's own alarms of seed 003 §3.1 and §6.4, each raised by its
/// cause and cleared when the cause goes away: a device nobody answers for
/// ten connection attempts in a row (`CONNECTION_FAILED`), and a write that
/// gave up after its retries (`WRITE_FAILED`), cleared by its device's next
/// write that succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_connection_and_a_write_that_gave_up_are_alarmed_until_their_cause_ends() {
    let http = free_port();
    let port = free_port();
    let gateway = Gateway::new(&format!("engine-alarms-{http}"), free_port())
        .http(http, ADMIN)
        .set("perDeviceTimeoutMs", 500)
        .set("backoff", json!({ "baseMs": 20, "maxMs": 50 }))
        .set(
            "commands",
            json!({ "maxRetries": 1, "retryBaseMs": 50, "retryMaxMs": 100, "writeAttempts": 1 }),
        )
        .device(
            crate::support::config::Device::modbus("pump", port)
                .tag(Tag::new("speed", "40001", "UINT16", 100).set("access", "RW")),
        );
    let _engine = Engine::start(&scratch_dir("engine-alarms"), &gateway.yaml());
    let alarm = |body: &Value, rule: &str| with_rule(body, rule).cloned();
    let failed = wait_get(
        http,
        "/alarms?deviceId=pump",
        ADMIN,
        "CONNECTION_FAILED",
        |b| alarm(b, "CONNECTION_FAILED").is_some(),
    )
    .await;
    let connection = alarm(&failed, "CONNECTION_FAILED").expect("alarm");
    assert_eq!(connection["source"], "engine", "{connection}");
    assert!(connection["clearedAt"].is_null());
    // Nobody has heard from it: its state is unknown, not missing.
    let state = get(http, "/devices/pump/state", ADMIN).await;
    let cause = state["lastError"].as_str().unwrap_or_default().to_owned();
    assert!(cause.contains("refused"), "{state}");
    assert_eq!(
        state,
        json!({ "type": "device", "id": "pump", "state": "unknown", "tenantId": 0,
            "lastError": cause, "connections": state["connections"] })
    );
    let listed = get(http, "/devices", ADMIN).await;
    assert_eq!(listed["devices"][0]["state"], "unknown", "{listed}");
    let (status, _) = call(http, "GET", "/devices/nobody/state", Some(ADMIN), None).await;
    assert_eq!(status, 404);

    // A write while nobody answers: retried once, then given up.
    write_pump(http, "w-1", 7, "TIMEOUT").await;
    let gave_up = wait_get(http, "/alarms?deviceId=pump", ADMIN, "WRITE_FAILED", |b| {
        alarm(b, "WRITE_FAILED").is_some()
    })
    .await;
    assert!(alarm(&gave_up, "WRITE_FAILED").expect("alarm")["clearedAt"].is_null());

    // The device comes: the connection alarm clears; its next write clears the other.
    let (_sim, _handle) = crate::support::sim::simulator_on(port, 10, Duration::ZERO).await;
    wait_get(
        http,
        "/alarms?deviceId=pump",
        ADMIN,
        "CONNECTION_FAILED cleared",
        |b| alarm(b, "CONNECTION_FAILED").is_some_and(|a| !a["clearedAt"].is_null()),
    )
    .await;
    write_pump(http, "w-2", 8, "ACKED").await;
    let cleared = wait_get(
        http,
        "/alarms?deviceId=pump",
        ADMIN,
        "WRITE_FAILED cleared",
        |b| alarm(b, "WRITE_FAILED").is_some_and(|a| !a["clearedAt"].is_null()),
    )
    .await;
    // Cleared, not closed: a person closes alarms.
    assert_eq!(
        alarm(&cleared, "WRITE_FAILED").expect("alarm")["state"],
        "NEW"
    );
}

/// A device that answers but refuses a request in ten rounds in a row (an
/// address it does not have) raises `PROTOCOL_ERROR`; an edit of the file
/// that drops the tag ends the refusals and clears it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_device_keeps_refusing_is_alarmed_until_it_stops() {
    let (_sim, handle) = crate::support::sim::simulator(10, Duration::ZERO).await;
    let http = free_port();
    let broker = free_port();
    let gateway = |beyond: bool| {
        let mut meter = crate::support::config::Device::modbus("meter", handle.local_addr().port())
            .tag(Tag::new("flow", "40001", "UINT16", 100));
        if beyond {
            meter = meter.tag(Tag::new("beyond", "40050", "UINT16", 100));
        }
        Gateway::new(&format!("refusals-{http}"), broker)
            .http(http, ADMIN)
            .device(meter)
            .yaml()
    };
    let dir = scratch_dir("refusals");
    let _engine = Engine::start(&dir, &gateway(true));
    let alarm = |body: &Value| with_rule(body, "PROTOCOL_ERROR").cloned();
    let raised = wait_get(
        http,
        "/alarms?deviceId=meter",
        ADMIN,
        "PROTOCOL_ERROR",
        |b| alarm(b).is_some(),
    )
    .await;
    let raised = alarm(&raised).expect("alarm");
    assert!(
        raised["message"]
            .as_str()
            .is_some_and(|m| m.contains("rounds in a row")),
        "{raised}"
    );
    std::fs::write(dir.join("devices.yaml"), gateway(false)).expect("the edit");
    wait_get(
        http,
        "/alarms?deviceId=meter",
        ADMIN,
        "PROTOCOL_ERROR cleared",
        |b| alarm(b).is_some_and(|a| !a["clearedAt"].is_null()),
    )
    .await;
}

/// A device whose silence is no alarm (`stateWhenExpired: unknown`, seed
/// 000's "to be confirmed") reads `unknown` when its lease ends, and its
/// tenant gets no `DEVICE_OFFLINE`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seldom_device_ends_unknown_and_raises_no_offline_alarm() {
    let mut modbus = PyModbus::start(&json!({ "hr": { "0": [5] } }));
    let http = free_port();
    let meter = crate::support::config::Device::modbus("meter", modbus.port())
        .set("stateTimeout", 1)
        .set("stateWhenExpired", "unknown")
        .tag(Tag::new("energy", "40001", "UINT16", 200));
    let gateway = Gateway::new(&format!("seldom-{http}"), free_port())
        .http(http, ADMIN)
        .set("perDeviceTimeoutMs", 300)
        .set("lease.scanIntervalMs", 200)
        .device(meter);
    let _engine = Engine::start(&scratch_dir("seldom"), &gateway.yaml());
    wait_get(http, "/devices/meter/state", ADMIN, "online", |b| {
        b["state"] == "online"
    })
    .await;
    modbus.kill();
    let ended = wait_get(http, "/devices/meter/state", ADMIN, "unknown", |b| {
        b["state"] == "unknown"
    })
    .await;
    assert_eq!(ended["lastState"], "online", "{ended}");
    let listed = wait_get(
        http,
        "/states?state=unknown",
        ADMIN,
        "listed unknown",
        |b| b["states"].as_array().is_some_and(|s| s.len() == 1),
    )
    .await;
    assert_eq!(listed["states"][0]["id"], "meter");
    let alarms = get(http, "/alarms?deviceId=meter", ADMIN).await;
    assert!(with_rule(&alarms, "DEVICE_OFFLINE").is_none(), "{alarms}");
}
