//! TLS with certificates the test makes with `openssl`. MQTT against
//! Mosquitto's TLS listener: the broker checked against `tls.caFile`, mutual
//! TLS with a client certificate, and the failures a platform engineer meets
//! (a broker certificate for another name, a client certificate of another
//! CA) named in `/health` while the engine stays up and connects once the
//! files are fixed, without a restart. HTTPS for the API, whose certificate
//! follows its files.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::config::{Device, Gateway, Tag};
use crate::support::engine::{Engine, scratch_dir};
use crate::support::mqtt::Subscriber;
use crate::support::peers::{Certificates, Mosquitto, free_port};

const ADMIN: &str = "admin-token";
const TOPIC: &str = "P/d/property/post";

/// A gateway reporting one simulated register to the broker's TLS port.
fn gateway(tls_port: u16, http: u16, sim: u16, tls: Value) -> String {
    Gateway::without_client_id(0)
        .set("mqtt.brokerUrl", format!("mqtts://127.0.0.1:{tls_port}"))
        .set("mqtt.tls", tls)
        .set("backoff.baseMs", 200)
        .set("backoff.maxMs", 500)
        .http(http, ADMIN)
        .device(Device::modbus("d", sim).tag(Tag::new("t", "40001", "UINT16", 200)))
        .yaml()
}

async fn broker_error(http: u16, words: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let health = Engine::health(http, ADMIN).await;
        let said = health["broker"]["lastError"].as_str().unwrap_or("");
        if said.contains(words) {
            assert_eq!(health["broker"]["connected"], false, "{health}");
            return health;
        }
        assert!(Instant::now() < deadline, "no `{words}` in {health}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_reports_and_a_wrong_client_certificate_is_named_then_fixed_without_a_restart() {
    let certs = Certificates::make("mtls");
    let (broker, tls_port) = Mosquitto::start_tls(&certs, "trusted", true);
    let subscriber = Subscriber::connect(broker.port()).await;
    let (sim, handle) = crate::support::sim::simulator(10, Duration::ZERO).await;
    sim.set_holding(0, &[42]);
    let http = free_port();
    let dir = scratch_dir("mtls");
    // The engine's certificate files, which the test puts in place as it runs.
    let (cert, key) = (dir.join("gw.pem"), dir.join("gw.key"));
    let tls = serde_json::json!({
        "caFile": certs.path("ca.pem"), "certFile": "gw.pem", "keyFile": "gw.key",
    });
    let sim_port = handle.local_addr().port();
    let mut engine = Engine::start(&dir, &gateway(tls_port, http, sim_port, tls));
    let pid = engine.pid();
    // No files yet: said, and tried again.
    broker_error(http, "gw.pem: No such file").await;
    std::fs::copy(certs.dir.join("intruder.pem"), &cert).expect("cert");
    std::fs::copy(certs.dir.join("intruder.key"), &key).expect("key");
    // A client certificate of another CA: the broker refuses it, and says so.
    broker_error(
        http,
        "TLS handshake failed: the broker refused the client certificate",
    )
    .await;
    assert!(subscriber.on(TOPIC).is_empty());
    // The right certificate, picked up at the next reconnect.
    std::fs::copy(certs.dir.join("client.pem"), &cert).expect("cert");
    std::fs::copy(certs.dir.join("client.key"), &key).expect("key");
    subscriber
        .until_value(TOPIC, 42.0, "reports over mutual TLS")
        .await;
    let health = Engine::health(http, ADMIN).await;
    assert_eq!(health["broker"]["connected"], true, "{health}");
    // `openssl -days 2`: the certificate ends in two days, less a little.
    assert_eq!(health["broker"]["clientCertificateDaysLeft"], 1, "{health}");
    let metrics = Engine::http_get(http, "/metrics", Some(ADMIN))
        .await
        .expect("metrics");
    assert!(
        metrics.contains("sluice_mqtt_client_certificate_days_left 1"),
        "{metrics}"
    );
    engine.assert_running();
    assert_eq!(engine.pid(), pid);

    // Without a certificate of its own the broker will not have the engine.
    let http = free_port();
    let tls = serde_json::json!({ "caFile": certs.path("ca.pem") });
    let _alone = Engine::start(
        &scratch_dir("mtls-none"),
        &gateway(tls_port, http, sim_port, tls),
    );
    broker_error(http, "certificate required").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_broker_is_checked_against_the_ca_and_its_name() {
    let certs = Certificates::make("tls-server");
    // A broker whose certificate is for another name: refused, named.
    let (stranger, stranger_port) = Mosquitto::start_tls(&certs, "stranger", false);
    let (sim, handle) = crate::support::sim::simulator(10, Duration::ZERO).await;
    sim.set_holding(0, &[7]);
    let sim_port = handle.local_addr().port();
    let http = free_port();
    let tls = serde_json::json!({ "caFile": certs.path("ca.pem") });
    let mut engine = Engine::start(
        &scratch_dir("tls-name"),
        &gateway(stranger_port, http, sim_port, tls.clone()),
    );
    broker_error(http, "name mismatch").await;
    engine.assert_running();
    drop(engine);
    drop(stranger);

    // A broker whose certificate has lapsed: refused, named.
    let (lapsed, lapsed_port) = Mosquitto::start_tls(&certs, "lapsed", false);
    let http = free_port();
    let engine = Engine::start(
        &scratch_dir("tls-lapsed"),
        &gateway(lapsed_port, http, sim_port, tls.clone()),
    );
    broker_error(http, "expired").await;
    drop(engine);
    drop(lapsed);

    // Without the CA, the system's roots do not know the test's CA.
    let (broker, tls_port) = Mosquitto::start_tls(&certs, "trusted", false);
    let subscriber = Subscriber::connect(broker.port()).await;
    let http = free_port();
    let engine = Engine::start(
        &scratch_dir("tls-issuer"),
        &gateway(tls_port, http, sim_port, serde_json::json!({})),
    );
    broker_error(http, "unknown issuer").await;
    drop(engine);

    // With it: the broker is trusted, reports flow.
    let http = free_port();
    let _engine = Engine::start(
        &scratch_dir("tls-ok"),
        &gateway(tls_port, http, sim_port, tls),
    );
    subscriber.until_value(TOPIC, 7.0, "reports over TLS").await;
}

/// `curl` of `https://127.0.0.1:PORT/health`, trusting the test's CA: its
/// exit status and what it printed.
fn curl_health(certs: &Certificates, http: u16) -> (i32, String) {
    let out = std::process::Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "5", "--cacert"])
        .arg(certs.dir.join("ca.pem"))
        .arg(format!("https://127.0.0.1:{http}/health"))
        .output()
        .expect("curl runs");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_speaks_https_and_its_certificate_follows_its_files() {
    let certs = Certificates::make("https");
    let broker = Mosquitto::start();
    let dir = scratch_dir("https");
    let (cert, key) = (dir.join("api.pem"), dir.join("api.key"));
    // First a certificate for another name.
    std::fs::copy(certs.dir.join("stranger.pem"), &cert).expect("cert");
    std::fs::copy(certs.dir.join("stranger.key"), &key).expect("key");
    let http = free_port();
    let config = Gateway::new("gw-https", broker.port())
        .http(http, ADMIN)
        .set(
            "http.tls",
            serde_json::json!({ "certFile": "api.pem", "keyFile": "api.key" }),
        )
        .yaml();
    let mut engine = Engine::start(&dir, &config);
    let deadline = Instant::now() + Duration::from_secs(15);
    let refused = loop {
        let (code, said) = curl_health(&certs, http);
        // 7: not listening yet.
        if code != 7 {
            break (code, said);
        }
        assert!(Instant::now() < deadline, "the API never listened: {said}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_ne!(
        refused.0, 0,
        "a certificate for another name: {}",
        refused.1
    );
    // Plain HTTP on the HTTPS port gets no answer.
    let head = "GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    let plain = tokio::time::timeout(Duration::from_secs(5), async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", http))
            .await
            .expect("connect");
        let _ = stream.write_all(head.as_bytes()).await;
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        answer
    })
    .await
    .expect("closed in time");
    assert!(!String::from_utf8_lossy(&plain).contains("engine"));
    // The certificate for 127.0.0.1 in the files: served from the next
    // handshake, no restart.
    std::fs::copy(certs.dir.join("trusted.pem"), &cert).expect("cert");
    std::fs::copy(certs.dir.join("trusted.key"), &key).expect("key");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (code, said) = curl_health(&certs, http);
        if code == 0 {
            assert!(said.contains("\"engine\":\"running\""), "{said}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new certificate was never served: {said}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    engine.assert_running();
}

/// The base64 SHA-256 of the public key of the certificate `pem`, as
/// Chromium's `--ignore-certificate-errors-spki-list` takes it: that one
/// key trusted, nothing else.
fn spki_pin(pem: &std::path::Path) -> String {
    let script = format!(
        "openssl x509 -pubkey -noout -in '{}' | openssl pkey -pubin -outform der | \
         openssl dgst -sha256 -binary | base64",
        pem.display()
    );
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_works_over_https_in_a_browser() {
    use crate::support::browser::Browser;
    let certs = Certificates::make("https-console");
    let broker = Mosquitto::start();
    let (sim, handle) = crate::support::sim::simulator(10, Duration::ZERO).await;
    sim.set_holding(0, &[21]);
    let dir = scratch_dir("https-console");
    let http = free_port();
    let config = Gateway::new("gw-https-console", broker.port())
        .http(http, ADMIN)
        .set(
            "http.tls",
            serde_json::json!({
                "certFile": certs.path("trusted.pem"),
                "keyFile": certs.path("trusted.key"),
            }),
        )
        .device(
            Device::modbus("boiler", handle.local_addr().port())
                .tag(Tag::new("temp", "40001", "UINT16", 200)),
        )
        .yaml();
    let _engine = Engine::start(&dir, &config);
    let deadline = Instant::now() + Duration::from_secs(15);
    while curl_health(&certs, http).0 != 0 {
        assert!(
            Instant::now() < deadline,
            "the API never answered over HTTPS"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let pin = spki_pin(&certs.dir.join("trusted.pem"));
    let browser = Browser::start_with(
        &dir,
        &[format!("--ignore-certificate-errors-spki-list={pin}")],
    )
    .await;
    browser.goto(&format!("https://127.0.0.1:{http}/")).await;
    browser.fill("#token", ADMIN).await;
    browser.click("#signin-submit").await;
    browser
        .until_present("#devices-table", "the device list over HTTPS")
        .await;
    // The live stream comes over TLS too.
    let temp = "tr[data-device='boiler'] .values-cell span[data-key='temp']";
    browser
        .until_text(temp, "a live value", |t| t.ends_with("= 21"))
        .await;
    let scheme = browser
        .eval("return window.location.protocol;", vec![])
        .await;
    assert_eq!(scheme, "https:");
}

/// `sluice check` reads the TLS files as a connect would: a missing CA file
/// and a lapsed client certificate are problems at the `tls` they belong to;
/// good files pass.
#[test]
fn check_reads_the_tls_files() {
    let certs = Certificates::make("tls-check");
    let dir = scratch_dir("tls-check-config");
    let check = |tls: Value, http_tls: Value| {
        let config = Gateway::without_client_id(0)
            .set("mqtt.brokerUrl", "mqtts://127.0.0.1:8883")
            .set("mqtt.tls", tls)
            .http(free_port(), ADMIN)
            .set("http.tls", http_tls)
            .device(Device::modbus("d", 502).tag(Tag::new("t", "40001", "UINT16", 200)))
            .yaml();
        let file = dir.join("gateway.yaml");
        std::fs::write(&file, config).expect("config written");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("check")
            .arg(&file)
            .output()
            .expect("sluice check runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let https = serde_json::json!({ "certFile": certs.path("trusted.pem"), "keyFile": certs.path("trusted.key") });
    let good = serde_json::json!({
        "caFile": certs.path("ca.pem"),
        "certFile": certs.path("client.pem"),
        "keyFile": certs.path("client.key"),
    });
    let (code, said) = check(good, https.clone());
    assert_eq!(code, Some(0), "{said}");

    let lapsed = serde_json::json!({
        "caFile": certs.path("missing-ca.pem"),
        "certFile": certs.path("lapsed-client.pem"),
        "keyFile": certs.path("lapsed-client.key"),
    });
    let (code, said) = check(lapsed, https.clone());
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains("collector.mqtt.tls: TLS certificate file")
            && said.contains("missing-ca.pem"),
        "{said}"
    );
    let lapsed = serde_json::json!({
        "caFile": certs.path("ca.pem"),
        "certFile": certs.path("lapsed-client.pem"),
        "keyFile": certs.path("lapsed-client.key"),
    });
    let (code, said) = check(lapsed, https);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("lapsed-client.pem: expired"), "{said}");

    let wrong_key = serde_json::json!({ "certFile": certs.path("trusted.pem"), "keyFile": certs.path("client.key") });
    let (code, said) = check(
        serde_json::json!({ "caFile": certs.path("ca.pem") }),
        wrong_key,
    );
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("collector.http.tls: "), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_broker_over_tls_takes_the_uplinks_tls_settings() {
    let certs = Certificates::make("tls-devices");
    let (broker, tls_port) = Mosquitto::start_tls(&certs, "trusted", false);
    let client = Subscriber::connect(broker.port()).await;
    let http = free_port();
    let config = Gateway::without_client_id(0)
        .set("mqtt.brokerUrl", format!("mqtts://127.0.0.1:{tls_port}"))
        .set(
            "mqtt.tls",
            serde_json::json!({ "caFile": certs.path("ca.pem") }),
        )
        .http(http, ADMIN)
        .device(
            Device::mqtt("meter", "meters/{deviceNum}/up", 1000)
                .channel("broker", format!("mqtts://127.0.0.1:{tls_port}"))
                .tag(Tag::pushed("kwh", "/kwh", "UINT32")),
        )
        .yaml();
    let mut engine = Engine::start(&scratch_dir("tls-devices"), &config);
    // Sent (on the plain listener) until the engine's device connection,
    // over TLS, has subscribed and its report comes back over the TLS uplink.
    let deadline = Instant::now() + Duration::from_secs(20);
    let report = loop {
        let reported = client
            .messages()
            .into_iter()
            .find(|m| m.topic == "P/meter/property/post");
        if let Some(report) = reported {
            break report.json();
        }
        assert!(Instant::now() < deadline, "no report over TLS");
        client
            .publish("meters/meter/up", &serde_json::json!({ "kwh": 1234 }))
            .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(report["values"][0]["value"], 1234, "{report}");
    engine.assert_running();
}
