//! Modbus RTU end to end against pymodbus: tunnelled through TCP (every type and
//! byte order of the TCP tests, exceptions, a CRC corrupted in flight by a proxy)
//! and on a serial line made by socat (three units sharing it, one of them dead:
//! the other two keep their period).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::config::{Device, Gateway, Tag};
use crate::support::engine::{ADMIN_TOKEN, Engine, scratch_dir};
use crate::support::mqtt::{Message, Subscriber};
use crate::support::peers::{Mosquitto, Peer, PyModbus, SerialPair, free_port};
use crate::support::registers::{RegisterTable, last_report, values_by_key};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The engine's configuration; a unit that stops answering on a line is asked
/// again after the collector's backoff (`baseMs`, `maxMs`).
fn config(mqtt: u16, http: u16, (base_ms, max_ms): (u32, u32)) -> Gateway {
    Gateway::new(&format!("sluice-rtu-{http}"), mqtt)
        .http(http, ADMIN_TOKEN)
        .set("perDeviceTimeoutMs", 2000)
        .set("reportMode", "BATCH")
        .set("backoff", json!({ "baseMs": base_ms, "maxMs": max_ms }))
        .set("lease.scanIntervalMs", 200)
}

/// Device `id` on the serial line `tty` (19200 baud, no parity).
fn serial(id: &str, tty: &Path) -> Device {
    Device::on(id, "modbus-rtu")
        .channel("serialPort", tty.display().to_string())
        .channel("baudRate", 19200)
        .channel("parity", "N")
}

/// A TCP proxy that flips a bit in the next `corrupt` answers it carries back.
struct Corrupter {
    port: u16,
    corrupt: Arc<AtomicUsize>,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Corrupter {
    async fn start(target: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let corrupt = Arc::new(AtomicUsize::new(0));
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, a, s) = (
            Arc::clone(&corrupt),
            Arc::clone(&accepted),
            Arc::clone(&stop),
        );
        tokio::spawn(async move {
            while !s.load(Ordering::Relaxed) {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                a.fetch_add(1, Ordering::Relaxed);
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)).await else {
                    continue;
                };
                tokio::spawn(carry(client, server, Arc::clone(&c)));
            }
        });
        Self {
            port,
            corrupt,
            accepted,
            stop,
        }
    }
}

impl Drop for Corrupter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

async fn carry(client: TcpStream, server: TcpStream, corrupt: Arc<AtomicUsize>) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
    });
    let mut buffer = [0u8; 512];
    loop {
        let n = match server_read.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let take = corrupt.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
            left.checked_sub(1)
        });
        if take.is_ok() {
            // A bit flipped in the last byte: the CRC no longer matches.
            buffer[n - 1] ^= 0x01;
        }
        if client_write.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}

fn reports<'m>(messages: &'m [Message], topic: &str) -> Vec<&'m Message> {
    messages.iter().filter(|m| m.topic == topic).collect()
}

/// A meter `P1/D1` at unit 3 reading `table` through the channel of `meter`
/// (its protocol and where it reaches); returns the engine and its subscriber
/// once its report checks out against the table.
async fn table_checks_out(
    table: &RegisterTable,
    meter: Device,
    broker: &Peer,
    dir: &str,
) -> (Engine, Subscriber) {
    let subscriber = Subscriber::connect(broker.port()).await;
    let meter = meter
        .set("productId", "P1")
        .set("deviceNum", "D1")
        .channel("unitId", 3)
        .channel("readTimeoutMs", 1000)
        .tags(table.tags.iter().cloned());
    let dir = scratch_dir(dir);
    let config = config(broker.port(), free_port(), (100, 400))
        .device(meter)
        .yaml();
    let mut engine = Engine::start(&dir, &config);
    let messages = subscriber
        .wait_until(Duration::from_secs(20), "two reports", |m| {
            reports(m, METER).len() >= 2
        })
        .await;
    engine.assert_running();
    table.check(&last_report(&messages, METER).expect("a report"));
    (engine, subscriber)
}

/// Where the meter of [`table_checks_out`] reports.
const METER: &str = "P1/D1/property/post";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rtu_over_tcp_decodes_every_type_and_rides_out_a_corrupted_crc() {
    let table = RegisterTable::every_type_and_order();
    let modbus = PyModbus::rtu_over_tcp(&table.map, &[3]);
    let proxy = Corrupter::start(modbus.port()).await;
    let broker = Mosquitto::start();
    let meter = Device::tcp("meter-1", "modbus-rtu-over-tcp", proxy.port);
    let (engine, subscriber) = table_checks_out(&table, meter, &broker, "rtu-over-tcp").await;
    let topic = METER;

    // Corrupted answers: those rounds' tags are BAD, the connection is kept (the
    // line is drained, not reopened) and the values come back.
    let before = reports(&subscriber.messages(), topic).len();
    proxy.corrupt.store(2, Ordering::Relaxed);
    let messages = subscriber
        .wait_until(
            Duration::from_secs(20),
            "reports after the corruption",
            |m| reports(m, topic).len() >= before + 6,
        )
        .await;
    let after: Vec<Value> = reports(&messages, topic)[before..]
        .iter()
        .map(|m| m.json())
        .collect();
    let bad_rounds = after
        .iter()
        .filter(|r| values_by_key(r).get("i16").is_some_and(|(_, q)| q == "BAD"))
        .count();
    assert!(bad_rounds >= 1, "a corrupted round reports BAD: {after:?}");
    table.check(after.last().expect("a report"));
    assert_eq!(proxy.corrupt.load(Ordering::Relaxed), 0, "both corrupted");
    assert_eq!(
        proxy.accepted.load(Ordering::Relaxed),
        1,
        "the tunnel was never reopened"
    );
    let log = engine.log();
    assert!(
        log.contains("CRC"),
        "the corruption is named in the log:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serial_line_decodes_every_type_and_byte_order() {
    let line = SerialPair::start();
    let table = RegisterTable::every_type_and_order();
    let _modbus = PyModbus::serial(&line.b, &table.map, &[3]);
    let broker = Mosquitto::start();
    let meter = serial("meter-1", &line.a);
    table_checks_out(&table, meter, &broker, "rtu-serial-types").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_units_share_a_serial_line_and_a_dead_one_stalls_no_other() {
    let line = SerialPair::start();
    let map = serde_json::json!({ "hr": { "0": [41, 42] } });
    let modbus = PyModbus::serial(&line.b, &map, &[1, 2]);
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect(broker.port()).await;
    let http = free_port();
    let device = |unit: u8| {
        serial(&format!("unit-{unit}"), &line.a)
            .set("deviceNum", format!("U{unit}"))
            .channel("channelId", "rs485")
            .channel("unitId", unit)
            .channel("readTimeoutMs", 300)
            .tag(Tag::new("level", "40001", "UINT16", 500))
            .tag(Tag::new("flow", "40002", "UINT16", 500))
    };
    let config = [1, 2, 3]
        .map(device)
        .into_iter()
        .fold(config(broker.port(), http, (1000, 8000)), Gateway::device);
    let dir = scratch_dir("rtu-serial");
    let mut engine = Engine::start(&dir, &config.yaml());
    subscriber
        .wait_until(Duration::from_secs(20), "both live units report", |m| {
            !reports(m, "P/U1/property/post").is_empty()
                && !reports(m, "P/U2/property/post").is_empty()
        })
        .await;
    // Over four seconds the live units keep their 500 ms period: unit 3, silent,
    // is asked again only after a backoff (1 s, 2 s, 4 s ...), so the line is
    // theirs but for one 300 ms timeout now and then.
    let start = Instant::now();
    let counted = |m: &[Message], topic: &str| reports(m, topic).len();
    let (u1, u2) = {
        let m = subscriber.messages();
        (
            counted(&m, "P/U1/property/post"),
            counted(&m, "P/U2/property/post"),
        )
    };
    tokio::time::sleep(Duration::from_secs(4)).await;
    let messages = subscriber.messages();
    let elapsed = start.elapsed().as_secs_f64();
    for (topic, before) in [("P/U1/property/post", u1), ("P/U2/property/post", u2)] {
        let stamps: Vec<i64> = reports(&messages, topic)[before..]
            .iter()
            .map(|m| m.json()["timestamp"].as_i64().expect("timestamp"))
            .collect();
        let mut gaps: Vec<i64> = stamps.windows(2).map(|w| w[1] - w[0]).collect();
        gaps.sort_unstable();
        assert!(
            stamps.len() as f64 >= elapsed / 0.5 * 0.7,
            "{topic}: {} reports in {elapsed:.1} s at a 500 ms period",
            stamps.len()
        );
        // Most rounds a period apart; none waits longer than the dead unit's one
        // timeout (300 ms) on top.
        let median = gaps[gaps.len() / 2];
        let longest = gaps[gaps.len() - 1];
        assert!(median <= 560, "{topic}: gaps {gaps:?} ms");
        assert!(longest <= 500 + 300 + 150, "{topic}: gaps {gaps:?} ms");
        let report = last_report(&messages, topic).expect("a report");
        let values = values_by_key(&report);
        assert_eq!(values["level"], (serde_json::json!(41), "GOOD".to_owned()));
        assert_eq!(values["flow"], (serde_json::json!(42), "GOOD".to_owned()));
    }
    // The dead unit reports its tags BAD each round (asked or in its backoff);
    // the others are online on the one line, which stays open.
    let report = last_report(&messages, "P/U3/property/post").expect("unit 3 reports");
    assert!(
        values_by_key(&report).values().all(|(_, q)| q == "BAD"),
        "{report}"
    );
    let (_, health) = Engine::request(http, "GET", "/health", Some(ADMIN_TOKEN), None).await;
    assert_eq!(health["devices"]["online"], 2, "{health}");
    assert_eq!(
        health["connections"]["ONLINE"], 1,
        "one open line: {health}"
    );
    engine.assert_running();
    drop(modbus);
}
