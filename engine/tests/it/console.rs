//! The operator console in headless Chromium, against a running engine with a
//! pymodbus device and Mosquitto: live values, an alarm appearing without a
//! reload and handled through the server's own actions, a write sent from the
//! form and read back on the peer, a refused upload, and a tenant who sees only
//! its own devices. Screenshots of the main views go to
//! `target/console-screenshots/`.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::support::browser::Browser;
use crate::support::config::{BOILER_PIPELINE, Gateway, HOMES_TOKEN, Tag, two_tenants};
use crate::support::engine::{Engine, scratch_dir};
use crate::support::mqtt::Subscriber;
use crate::support::peers::{Mosquitto, PyModbus, free_port, project_root};
use serde_json::{Value, json};
use tokio_modbus::client::tcp;
use tokio_modbus::prelude::*;

const ADMIN: &str = "console-admin-secret";
const HOMES: &str = HOMES_TOKEN;

fn config(modbus: u16, mqtt: u16, http: u16, nobody: u16) -> String {
    let gateway = Gateway::new(&format!("console-{http}"), mqtt)
        .http(http, ADMIN)
        .set("perDeviceTimeoutMs", 500)
        .set("lease.scanIntervalMs", 300);
    two_tenants(gateway, (modbus, nobody), |boiler| {
        boiler.tag(Tag::new("temp", "40001", "UINT16", 200)).tag(
            Tag::new("setpoint", "40002", "UINT16", 200)
                .set("access", "RW")
                .set("readback", true)
                .set("min", 0)
                .set("max", 500),
        )
    })
    .yaml()
}

/// Polls `GET path` as the admin until `done` holds for the body.
async fn wait_api(http: u16, path: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = Engine::request(http, "GET", path, Some(ADMIN), None).await;
        if status == 200 && done(&body) {
            return body;
        }
        assert!(Instant::now() < deadline, "{what}: {status} {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sets holding register `address` of the peer, as another Modbus client would.
async fn set_register(modbus: u16, address: u16, value: u16) {
    let mut client = tcp::connect_slave(([127, 0, 0, 1], modbus).into(), Slave(1))
        .await
        .expect("connect to the peer");
    client
        .write_single_register(address, value)
        .await
        .expect("transport")
        .expect("a normal answer");
    let _ = client.disconnect().await;
}

fn screenshots() -> PathBuf {
    project_root().join("target/console-screenshots")
}

/// The actions the server allows on alarm `id` now.
async fn server_actions(http: u16, id: u64) -> BTreeSet<String> {
    let (_, body) = Engine::request(
        http,
        "GET",
        &format!("/alarms/{id}/actions"),
        Some(ADMIN),
        None,
    )
    .await;
    serde_json::from_value(body["actions"].clone()).expect("actions")
}

/// The buttons the page shows for the alarm on screen.
async fn buttons(browser: &Browser) -> BTreeSet<String> {
    browser
        .attributes("#alarm-actions button", "data-action")
        .await
        .into_iter()
        .collect()
}

/// Clicks `action` with a note and a name, and waits for the state it leads to.
async fn act(browser: &Browser, action: &str, by: &str, state: &str) {
    browser
        .fill("#alarm-note", &format!("{action} by {by}"))
        .await;
    browser.fill("#alarm-by", by).await;
    browser
        .click(&format!("#alarm-actions button[data-action='{action}']"))
        .await;
    browser
        .until_text("#alarm-state-value", &format!("{action} applied"), |t| {
            t == state
        })
        .await;
    browser
        .until_text("#alarm-result", "the new state shown", |t| {
            t.contains(&format!("now {state}"))
        })
        .await;
}

/// Opens the console's page `hash` and waits until `css` shows on it.
async fn open(browser: &Browser, http: u16, hash: &str, css: &str) {
    browser
        .goto(&format!("http://127.0.0.1:{http}/{hash}"))
        .await;
    browser.until_present(css, hash).await;
}

async fn sign_in(browser: &Browser, http: u16, token: &str) {
    browser.goto(&format!("http://127.0.0.1:{http}/")).await;
    browser.fill("#token", token).await;
    browser.click("#signin-submit").await;
    browser
        .until_present("#devices-table", "the device list after sign-in")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_live_devices_and_handles_alarms_commands_and_uploads() {
    let started = std::time::SystemTime::now();
    let modbus = PyModbus::start(&json!({ "hr": { "0": [20, 0] } }));
    let broker = Mosquitto::start();
    let http = free_port();
    let dir = scratch_dir("console");
    let pipelines = dir.join("pipelines");
    std::fs::create_dir_all(&pipelines).expect("pipelines dir");
    std::fs::write(pipelines.join("with-alarms.yaml"), BOILER_PIPELINE).expect("pipeline");
    let text = config(modbus.port(), broker.port(), http, free_port());
    let engine = Engine::start_with_pipelines(&dir, &text, &pipelines);
    wait_api(http, "/devices", "the API", |_| true).await;
    let browser = Browser::start(&dir).await;
    let shots = screenshots();

    // The page, its assets embedded; a wrong token is refused with the server's reason.
    browser.goto(&format!("http://127.0.0.1:{http}/")).await;
    browser.fill("#token", "guess").await;
    browser.click("#signin-submit").await;
    browser
        .until_text("#signin-error", "a wrong token refused", |t| {
            t.contains("unknown token")
        })
        .await;
    browser.fill("#token", ADMIN).await;
    browser.click("#signin-submit").await;
    browser
        .until_present("#devices-table", "the device list")
        .await;

    // Live values: the register changes on the peer, the list follows.
    let temp = "tr[data-device='boiler'] .values-cell span[data-key='temp']";
    browser
        .until_text(temp, "the first value", |t| t.ends_with("= 20"))
        .await;
    browser
        .eval("window.notReloaded = true; return 1;", vec![])
        .await;
    set_register(modbus.port(), 0, 42).await;
    browser
        .until_text(temp, "the changed value", |t| t.ends_with("= 42"))
        .await;
    browser
        .until_text(
            "tr[data-device='boiler'] .state-cell",
            "the boiler online",
            |t| t == "online",
        )
        .await;
    browser
        .until_text(
            "tr[data-device='boiler'] .connection-cell",
            "its connection",
            |t| t == "ONLINE",
        )
        .await;
    browser
        .until_text(
            "tr[data-device='boiler'] .since-cell",
            "since when it is online",
            |t| t.starts_with("since "),
        )
        .await;
    let (_, listed) = Engine::request(http, "GET", "/devices", Some(ADMIN), None).await;
    let since = listed["devices"][0]["stateSince"].as_i64();
    let started_ms = i64::try_from(
        started
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("ms");
    assert!(
        since.is_some_and(|s| s >= started_ms - 1000),
        "the boiler's state since {since:?}, the test began at {started_ms}: {listed}"
    );
    browser.screenshot(&shots, "devices").await;

    // An alarm raised by the threshold appears in the open list by itself.
    open(&browser, http, "#alarms", "#alarms-table").await;
    browser
        .eval("window.notReloaded = true; return 1;", vec![])
        .await;
    assert!(browser.texts("#alarms-table tbody tr").await.is_empty());
    set_register(modbus.port(), 0, 95).await;
    let row = browser
        .until_text("#alarms-table tbody tr", "the raised alarm", |t| {
            t.contains("BOILER_HOT")
        })
        .await;
    assert!(row.contains("boiler"), "{row}");
    assert_eq!(
        browser
            .eval("return window.notReloaded === true;", vec![])
            .await,
        json!(true),
        "the page was reloaded"
    );
    let pushed = wait_api(
        http,
        "/alarms?ruleKey=BOILER_HOT",
        "the alarm pushed",
        |b| b["alarms"][0]["state"] == "PUSHED",
    )
    .await;
    let id = pushed["alarms"][0]["id"].as_u64().expect("alarm id");
    browser
        .until_text("#pending-badge", "the pending count", |t| t == "1")
        .await;
    browser.screenshot(&shots, "alarms").await;

    // Back to normal: the list marks it recovered; it stays PUSHED (a person
    // closes alarms).
    set_register(modbus.port(), 0, 20).await;
    wait_api(
        http,
        "/alarms?ruleKey=BOILER_HOT",
        "the alarm cleared",
        |b| !b["alarms"][0]["clearedAt"].is_null(),
    )
    .await;
    open(&browser, http, "#devices", "#devices-table").await;
    open(&browser, http, "#alarms", "#alarms-table").await;
    let row = browser
        .until_text(
            &format!("tr[data-alarm='{id}']"),
            "the recovered mark",
            |t| t.contains("recovered"),
        )
        .await;
    assert!(row.contains("PUSHED"), "{row}");

    // Its buttons are the server's actions; each action asks for a note, shows
    // the new state, and the history says who did it.
    browser.click(&format!("tr[data-alarm='{id}']")).await;
    browser
        .until_text("#alarm-state-value", "the alarm page", |t| t == "PUSHED")
        .await;
    assert_eq!(buttons(&browser).await, server_actions(http, id).await);
    act(&browser, "confirm", "Alice", "CONFIRMED").await;
    assert_eq!(buttons(&browser).await, server_actions(http, id).await);
    act(&browser, "handle", "Bob", "HANDLED").await;
    assert_eq!(buttons(&browser).await, server_actions(http, id).await);
    act(&browser, "close", "Carol", "CLOSED").await;
    assert_eq!(buttons(&browser).await, server_actions(http, id).await);
    let actors = browser.texts("#alarm-history .actor").await;
    for who in ["admin/Alice", "admin/Bob", "admin/Carol"] {
        assert!(actors.iter().any(|a| a == who), "{who} in {actors:?}");
    }
    let notes = browser.texts("#alarm-history td:last-child").await;
    assert!(notes.iter().any(|n| n == "handle by Bob"), "{notes:?}");
    browser.screenshot(&shots, "alarm").await;

    // A command from the form, its input built from the tag's type and range,
    // writes the register; the peer has it.
    browser
        .goto(&format!("http://127.0.0.1:{http}/#device/boiler"))
        .await;
    browser.select("#command-key", "setpoint").await;
    let bounds = browser
        .eval(
            "const i = document.getElementById('command-value'); return [i.type, i.min, i.max, i.step];",
            vec![],
        )
        .await;
    assert_eq!(bounds, json!(["number", "0", "500", "1"]));
    browser.fill("#command-value", "321").await;
    browser.click("#command-send").await;
    let sent = browser
        .until_text("#command-result", "the command created", |t| {
            t.starts_with("Command #")
        })
        .await;
    let command: u64 = sent
        .trim_start_matches("Command #")
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a command id in {sent:?}"));
    wait_api(
        http,
        &format!("/commands/{command}"),
        "the command acknowledged",
        |c| c["status"] == "ACKED",
    )
    .await;
    browser
        .until_text("#command-result", "the form following the command", |t| {
            t.ends_with("ACKED")
        })
        .await;
    let written = PyModbus::writes(&modbus);
    assert!(
        written
            .iter()
            .any(|w| w["address"] == 1 && w["values"] == json!([321])),
        "the peer's writes: {written:?}"
    );
    browser
        .until_text(
            ".device-values tr[data-key='setpoint'] .value-cell",
            "the value read back",
            |t| t == "321",
        )
        .await;
    browser.screenshot(&shots, "device").await;
    browser
        .goto(&format!("http://127.0.0.1:{http}/#command/{command}"))
        .await;
    browser
        .until_text("#command-status", "the command page", |t| t == "ACKED")
        .await;
    browser.screenshot(&shots, "command").await;
    browser
        .goto(&format!("http://127.0.0.1:{http}/#commands"))
        .await;
    browser
        .until_text(
            &format!("#commands-table tr[data-command='{command}']"),
            "the command listed with its status",
            |t| t.contains("setpoint") && t.contains("ACKED"),
        )
        .await;

    // A refused upload shows the server's own message.
    let garbage = dir.join("not-a-component.wasm");
    std::fs::write(&garbage, b"\"this is not a component\"").expect("garbage file");
    let (status, refused) = Engine::request(
        http,
        "PUT",
        "/components/scale/9.9.9?kind=stage",
        Some(ADMIN),
        Some(&json!("this is not a component")),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    let message = refused["error"].as_str().expect("a message").to_owned();
    open(&browser, http, "#components", "#components-table").await;
    browser.fill("#upload-name", "scale").await;
    browser.fill("#upload-version", "9.9.9").await;
    browser.select("#upload-kind", "stage").await;
    browser
        .fill("#upload-file", &garbage.display().to_string())
        .await;
    browser.click("#upload-submit").await;
    browser
        .until_text("#component-result", "the refusal", |t| t == message)
        .await;
    browser.screenshot(&shots, "components").await;
    browser
        .goto(&format!("http://127.0.0.1:{http}/#health"))
        .await;
    browser
        .until_text("#health-broker", "the broker connected", |t| {
            t.contains("Connectedtrue")
        })
        .await;
    browser.screenshot(&shots, "health").await;

    // A tenant sees its own device only, not the other tenant's, even by address.
    browser.click("#signout").await;
    sign_in(&browser, http, HOMES).await;
    let listed = browser
        .attributes("#devices-table tr[data-device]", "data-device")
        .await;
    assert_eq!(listed, vec!["flat-7".to_owned()]);
    browser
        .goto(&format!("http://127.0.0.1:{http}/#device/boiler"))
        .await;
    browser
        .until_text("main .error", "another tenant's device", |t| {
            t.contains("no device `boiler`")
        })
        .await;
    open(&browser, http, "#alarms", "#alarms-table").await;
    assert!(browser.texts("#alarms-table tbody tr").await.is_empty());
    assert_eq!(
        browser
            .eval(
                "return document.getElementById('nav-components').hidden;",
                vec![]
            )
            .await,
        json!(true)
    );
    drop(browser);
    drop(engine);
}

/// `(ts, value)` of every published value of tag `key` on `topic`.
fn published(subscriber: &Subscriber, topic: &str, key: &str) -> Vec<(i64, f64)> {
    subscriber
        .on(topic)
        .iter()
        .flat_map(|m| m.json()["values"].as_array().cloned().unwrap_or_default())
        .filter(|v| v["key"] == key)
        .filter_map(|v| Some((v["ts"].as_i64()?, v["value"].as_f64()?)))
        .collect()
}

/// The points drawn on the trend chart of tag `key`: `(ts, value)`.
async fn drawn(browser: &Browser, key: &str) -> Vec<(i64, f64)> {
    let points = browser
        .eval(
            "return [...document.querySelectorAll(`svg.trend[data-key='${arguments[0]}'] circle.trend-point`)]
               .map((c) => [Number(c.dataset.ts), Number(c.dataset.value)]);",
            vec![json!(key)],
        )
        .await;
    serde_json::from_value(points).expect("pairs")
}

/// Waits until the chart of `key` has drawn `value`.
async fn until_drawn(browser: &Browser, key: &str, value: f64) -> Vec<(i64, f64)> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let points = drawn(browser, key).await;
        if points.iter().any(|(_, v)| *v == value) {
            return points;
        }
        assert!(Instant::now() < deadline, "{value} drawn: {points:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What an operator looks at: a sign-in link, values rounded with their
/// units, a mark on a device with an open alarm, and each numeric tag's
/// trend, whose points are exactly values the engine published on MQTT (live
/// ones and, after a reload, the hour the server kept).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_rounds_with_units_marks_alarms_and_draws_the_published_values() {
    let ratio = 1.234_567_8_f32.to_bits();
    let modbus =
        PyModbus::start(&json!({ "hr": { "0": [215, ratio >> 16, ratio & 0xffff, 1234] } }));
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect(broker.port()).await;
    let http = free_port();
    let dir = scratch_dir("console-trends");
    let pipelines = dir.join("pipelines");
    std::fs::create_dir_all(&pipelines).expect("pipelines dir");
    std::fs::write(pipelines.join("with-alarms.yaml"), BOILER_PIPELINE).expect("pipeline");
    let gateway = Gateway::new(&format!("console-trends-{http}"), broker.port())
        .http(http, ADMIN)
        .set("perDeviceTimeoutMs", 500);
    let text = two_tenants(gateway, (modbus.port(), free_port()), |boiler| {
        boiler
            .tag(
                Tag::new("temp", "40001", "INT16", 200)
                    .set("factor", 0.1)
                    .set("unit", "°C"),
            )
            .tag(Tag::new("ratio", "40002", "FLOAT32", 200).set("byteOrder", "ABCD"))
            .tag(
                Tag::new("level", "40004", "UINT16", 200)
                    .set("factor", 0.01)
                    .set("precision", 1)
                    .set("unit", "m"),
            )
    })
    .yaml();
    let engine = Engine::start_with_pipelines(&dir, &text, &pipelines);
    wait_api(http, "/devices", "the API", |_| true).await;
    let browser = Browser::start(&dir).await;
    let topic = "P/B1/property/post";

    // The link signs in; the token leaves the address at once.
    browser
        .goto(&format!("http://127.0.0.1:{http}/#token={ADMIN}"))
        .await;
    browser
        .until_present("#devices-table", "the device list from the link")
        .await;
    let kept = browser
        .eval(
            "return [location.hash, sessionStorage.getItem('sluice.token')];",
            vec![],
        )
        .await;
    assert_eq!(kept, json!(["#devices", ADMIN]));

    // Rounded (the tag's precision, else four significant digits), with units;
    // the value as published in the title.
    let cell = |key: &str| format!("tr[data-device='boiler'] .values-cell span[data-key='{key}']");
    browser
        .until_text(&cell("temp"), "the temperature", |t| t == "temp = 21.5 °C")
        .await;
    browser
        .until_text(&cell("ratio"), "the ratio", |t| t == "ratio = 1.235")
        .await;
    browser
        .until_text(&cell("level"), "the level", |t| t == "level = 12.3 m")
        .await;
    let titles = browser.attributes(&cell("ratio"), "title").await;
    assert!(titles[0].starts_with("1.2345677"), "{titles:?}");

    // The trend: each point drawn is a value published on MQTT, live ones too.
    open(
        &browser,
        http,
        "#device/boiler",
        "svg.trend[data-key='temp']",
    )
    .await;
    until_drawn(&browser, "temp", 21.5).await;
    for raw in [230, 245] {
        set_register(modbus.port(), 0, raw).await;
        until_drawn(&browser, "temp", f64::from(raw) / 10.0).await;
    }
    let sent = published(&subscriber, topic, "temp");
    let points = drawn(&browser, "temp").await;
    for point in &points {
        assert!(
            sent.contains(point),
            "{point:?} drawn, not published: {sent:?}"
        );
    }
    browser.screenshot(&screenshots(), "trends").await;

    // Opened again, the chart starts from the hour the server kept.
    browser.eval("location.reload(); return 1;", vec![]).await;
    browser
        .until_present(
            "svg.trend[data-key='temp'] circle.trend-point",
            "the kept hour",
        )
        .await;
    let (_, trend) = Engine::request(http, "GET", "/devices/boiler/trend", Some(ADMIN), None).await;
    let kept: Vec<(i64, f64)> =
        serde_json::from_value(trend["tags"][0]["points"].clone()).expect("points");
    assert_eq!(trend["tags"][0]["key"], "temp", "{trend}");
    assert!(!kept.is_empty(), "{trend}");
    let sent = published(&subscriber, topic, "temp");
    for point in &kept {
        assert!(sent.contains(point), "{point:?} kept, not published");
    }
    let points = drawn(&browser, "temp").await;
    for point in &kept {
        assert!(
            points.contains(point),
            "{point:?} kept, not drawn: {points:?}"
        );
    }

    // An open alarm marks its device in the list, and only that one.
    set_register(modbus.port(), 0, 950).await;
    wait_api(http, "/devices", "the alarm counted", |b| {
        b["devices"].as_array().is_some_and(|d| {
            d.iter()
                .any(|d| d["deviceId"] == "boiler" && d["openAlarms"] == 1)
        })
    })
    .await;
    open(&browser, http, "#devices", "#devices-table").await;
    browser
        .until_present("tr[data-device='boiler'] .alarm-mark", "the alarm mark")
        .await;
    assert!(
        browser
            .texts("tr[data-device='flat-7'] .alarm-mark")
            .await
            .is_empty()
    );
    browser.screenshot(&screenshots(), "devices-marked").await;
    drop(browser);
    drop(engine);
}
