//! Upgrades. `fixtures/upgrade-0.1.0/sluice.redb` is a data directory's
//! database written by release 0.1.0 (before files carried a state format):
//! a gateway polling one meter with its broker down, stopped with its reports
//! in the WAL. This engine reads it: the reports go out first, numbering goes
//! on after them, the file is stamped with the state format.
//! `fixtures/upgrade-format-2/sluice.redb` was written by the last engine of
//! state format 2 (lease rows keyed without their tenant): a meter of tenant
//! 7 and its driver, online, stopped cleanly. This engine finds both rows
//! under their tenant. A file stamped with a newer state format is refused
//! with a message and left byte for byte as it was.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::config::{Device, Gateway, Tag};
use crate::support::engine::{Engine, scratch_dir};
use crate::support::mqtt::Subscriber;
use crate::support::peers::{Mosquitto, PyModbus, free_port, project_root};
use redb::ReadableDatabase;
use serde_json::json;
use sluice::store::{FORMAT_KEY, STATE_FORMAT, STATE_META};

const TOPIC: &str = "P/M1/property/post";

/// A data directory holding the 0.1.0 database; the test's scratch dir.
fn previous_release(name: &str) -> PathBuf {
    with_fixture(name, "upgrade-0.1.0")
}

/// A scratch dir whose data directory holds the database of `fixture`.
fn with_fixture(name: &str, fixture: &str) -> PathBuf {
    let dir = scratch_dir(name);
    let data = dir.join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    std::fs::copy(
        project_root().join(format!("engine/tests/fixtures/{fixture}/sluice.redb")),
        data.join("sluice.redb"),
    )
    .expect("the fixture");
    dir
}

/// The configuration the fixture was written with, its peers moved.
fn config(modbus: u16, mqtt: u16) -> String {
    Gateway::new("upgrade-fixture", mqtt)
        .device(
            Device::modbus("meter", modbus)
                .set("deviceNum", "M1")
                .channel("readTimeoutMs", 1000)
                .tag(Tag::new("volts", "40001", "UINT16", 500).set("factor", 0.1))
                .tag(Tag::new("state", "40002", "UINT16", 500)),
        )
        .yaml()
}

fn format_of(file: &Path) -> Option<u64> {
    let db = redb::Database::create(file).expect("the database opens");
    let read = db.begin_read().expect("read");
    let table = read.open_table(STATE_META).ok()?;
    table.get(FORMAT_KEY).expect("get").map(|v| v.value())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_previous_release_wal_and_state_are_read() {
    let started_ms = sluice::clock::now_ms();
    let dir = previous_release("upgrade-read");
    let modbus = PyModbus::start(&json!({ "hr": { "0": [2400, 1] } }));
    let broker = Mosquitto::start();
    let host = Subscriber::connect(broker.port()).await;
    let mut engine = Engine::start(&dir, &config(modbus.port(), broker.port()));
    let messages = host
        .wait_until(
            Duration::from_secs(20),
            "the old reports and new ones",
            |m| {
                m.iter()
                    .filter(|m| m.topic == TOPIC)
                    .any(|m| m.json()["timestamp"].as_i64() >= Some(started_ms))
            },
        )
        .await;
    let reports: Vec<serde_json::Value> = messages
        .iter()
        .filter(|m| m.topic == TOPIC)
        .map(|m| m.json())
        .collect();
    let old: Vec<&serde_json::Value> = reports
        .iter()
        .filter(|r| r["timestamp"].as_i64() < Some(started_ms))
        .collect();
    assert!(old.len() >= 3, "the WAL's reports: {reports:?}");
    let seqs: Vec<u64> = old
        .iter()
        .map(|r| r["seq"].as_u64().expect("seq"))
        .collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "in order, none lost"
    );
    assert_eq!(old[0]["values"][0]["value"], json!(230.5), "{}", old[0]);
    let new = reports
        .iter()
        .find(|r| r["timestamp"].as_i64() >= Some(started_ms))
        .expect("a new report");
    assert_eq!(
        new["seq"].as_u64(),
        Some(seqs.len() as u64 + 1),
        "numbering goes on after the old reports"
    );
    assert_eq!(new["values"][0]["value"], json!(240.0));
    engine.kill();
    assert_eq!(
        format_of(&dir.join("data/sluice.redb")),
        Some(STATE_FORMAT),
        "stamped"
    );
}

/// The lease rows of a format-2 file are found under their tenant: the
/// meter's row as it was left, the driver's renewed on (its version goes on
/// from the file's, where a new row would start at 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_rows_of_the_last_format_are_found_under_their_tenant() {
    let started_ms = sluice::clock::now_ms();
    let dir = with_fixture("upgrade-format-2", "upgrade-format-2");
    let http = free_port();
    // The meter's port has nothing behind it: nothing renews its row.
    let meter = Device::modbus("meter", free_port())
        .set("deviceNum", "M1")
        .set("tenantId", 7)
        .channel("readTimeoutMs", 1000)
        .tag(Tag::new("volts", "40001", "UINT16", 500).set("factor", 0.1));
    let config = Gateway::new("upgrade-tenants", free_port())
        .http(http, "fixture-admin")
        .tenant(crate::support::config::Tenant::new(7, "plant"))
        .device(meter)
        .yaml();
    let engine = Engine::start(&dir, &config);
    let get = async |path: &str| {
        let (status, body) = Engine::request(http, "GET", path, Some("fixture-admin"), None).await;
        assert_eq!(status, 200, "{path}: {body}");
        body
    };
    let meter = get("/devices/meter/state").await;
    assert_eq!(meter["tenantId"], 7, "{meter}");
    assert!(
        meter["leaseVersion"].as_u64() >= Some(4)
            && meter["lastHeartbeat"].as_i64() < Some(started_ms),
        "the file's row: {meter}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let driver = loop {
        let driver = get("/drivers/modbus_tcp/state?tenantId=7").await;
        if driver["lastHeartbeat"].as_i64() >= Some(started_ms) {
            break driver;
        }
        assert!(Instant::now() < deadline, "not renewed: {driver}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        driver["leaseVersion"].as_u64() >= Some(2) && driver["state"] == "online",
        "renewed on from the file's row: {driver}"
    );
    let drivers = get("/states?type=driver").await;
    assert_eq!(
        drivers["states"].as_array().map(Vec::len),
        Some(1),
        "one driver row, not a new one beside the file's: {drivers}"
    );
    drop(engine);
    assert_eq!(
        format_of(&dir.join("data/sluice.redb")),
        Some(STATE_FORMAT),
        "stamped"
    );
}

#[test]
fn a_newer_state_format_is_refused_and_left_untouched() {
    let dir = previous_release("upgrade-newer");
    let file = dir.join("data/sluice.redb");
    {
        let db = redb::Database::create(&file).expect("the database opens");
        let write = db.begin_write().expect("write");
        write
            .open_table(STATE_META)
            .expect("table")
            .insert(FORMAT_KEY, STATE_FORMAT + 1)
            .expect("insert");
        write.commit().expect("commit");
    }
    let before = std::fs::read(&file).expect("the file");
    std::fs::write(dir.join("gateway.yaml"), config(free_port(), free_port())).expect("config");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["run", "--config", "gateway.yaml"])
        .current_dir(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sluice starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        assert!(
            Instant::now() < deadline,
            "sluice kept running on a newer format"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().expect("output");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{said}");
    assert!(
        said.contains(&format!(
            "the database schema is at version {}, newer than this engine knows ({STATE_FORMAT}): upgrade the engine",
            STATE_FORMAT + 1
        )),
        "{said}"
    );
    assert_eq!(std::fs::read(&file).expect("the file"), before, "untouched");
    assert!(
        !dir.join("data").read_dir().expect("data").any(|e| e
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .contains("damaged")),
        "not set aside"
    );
}
