//! Three engines on one PostgreSQL with one device configuration: thirty Modbus
//! devices served by a peer in this test, which knows from the sockets which
//! engine process sends each request. Every device is polled by exactly one
//! engine; one engine SIGKILLed loses its devices to the others within one
//! ownership lease and one renewal tick; started again, it takes its share
//! back. No device is ever polled by two engines at once, no offline alarm is
//! raised twice, no report number repeats.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::config::{Device, Gateway, Tag};
use crate::support::engine::{Engine, scratch_dir};
use crate::support::mqtt::Subscriber;
use crate::support::peers::{Mosquitto, free_port};
use crate::support::postgres::Postgres;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const DEVICES: usize = 30;
/// The default ownership lease (10 s) plus one renewal tick (a third of it),
/// with the first round after the takeover: the failover the docs promise.
/// (With it scaled down to 4-6 s and the devices' `stateTimeout` to 2 s, an
/// orphan now and then reached its new engine without an offline alarm on a
/// loaded machine; left for the issue that makes the platform's view true.)
const FAILOVER: Duration = Duration::from_secs(15);
/// Requests for one device from two engines closer than this count as the
/// device being polled by both at once (each polls it every 200 ms).
const TOGETHER: Duration = Duration::from_millis(300);

fn device_id(i: usize) -> String {
    format!("dev{i:02}")
}

/// Who polls what: every request the peer answered, by device and engine.
#[derive(Default)]
struct Polls {
    /// Engine name by PID (an engine started again has a new PID).
    engines: HashMap<u32, String>,
    /// (device, engine) -> times of its requests.
    requests: BTreeMap<(usize, String), Vec<Instant>>,
    /// Requests for one device from two engines at once.
    overlaps: Vec<String>,
    /// The engine holding each open connection to the devices, by (its port,
    /// the device's port), as the last scan of the sockets found it.
    sockets: HashMap<(u16, u16), String>,
}

impl Polls {
    fn record(&mut self, device: usize, engine: &str, at: Instant) {
        for ((d, other), times) in &self.requests {
            if *d == device
                && other != engine
                // Either way round: a request is recorded once its engine
                // is known, which can be after a later one of another.
                && times
                    .iter()
                    .any(|t| at.max(*t).duration_since(at.min(*t)) < TOGETHER)
            {
                self.overlaps.push(format!(
                    "{} polled by {other} and {engine} within {TOGETHER:?}",
                    device_id(device)
                ));
            }
        }
        self.requests
            .entry((device, engine.to_owned()))
            .or_default()
            .push(at);
    }

    /// The engines that polled each device since `since`.
    fn pollers_since(&self, since: Instant) -> Vec<HashSet<String>> {
        let mut pollers = vec![HashSet::new(); DEVICES];
        for ((device, engine), times) in &self.requests {
            if times.last().is_some_and(|t| *t >= since) {
                pollers[*device].insert(engine.clone());
            }
        }
        pollers
    }

    /// When `engine`'s first request for `device` at or after `since` came.
    fn first_since(&self, device: usize, since: Instant, not: &str) -> Option<Instant> {
        self.requests
            .iter()
            .filter(|((d, engine), _)| *d == device && engine != not)
            .filter_map(|(_, times)| times.iter().find(|t| **t >= since).copied())
            .min()
    }
}

/// Scans the engines' sockets every few milliseconds on a thread of its own,
/// until the test lets `polls` go: one pass reads each engine's descriptors and
/// the kernel's socket list once, however many connections there are, and
/// leaves the runtime's threads to answer the requests.
fn scan_sockets(polls: &Arc<Mutex<Polls>>) {
    let polls = Arc::downgrade(polls);
    std::thread::spawn(move || {
        while let Some(polls) = polls.upgrade() {
            let engines = polls.lock().expect("polls").engines.clone();
            let sockets = engine_sockets(&engines);
            polls.lock().expect("polls").sockets = sockets;
            drop(polls);
            std::thread::sleep(Duration::from_millis(5));
        }
    });
}

/// Every open TCP connection of the `engines` (pid -> name): its ports, and
/// the engine.
fn engine_sockets(engines: &HashMap<u32, String>) -> HashMap<(u16, u16), String> {
    let mut owners: HashMap<String, String> = HashMap::new();
    for (pid, name) in engines {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(link) = std::fs::read_link(fd.path()) {
                let link = link.to_string_lossy();
                if let Some(inode) = link
                    .strip_prefix("socket:[")
                    .and_then(|l| l.strip_suffix(']'))
                {
                    owners.insert(inode.to_owned(), name.clone());
                }
            }
        }
    }
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let port = |field: &str| u16::from_str_radix(field.rsplit(':').next()?, 16).ok();
            // A closed connection's row (TIME_WAIT) has inode 0 and no owner.
            let engine = owners.get(*fields.get(9)?)?;
            Some((
                (port(fields.get(1)?)?, port(fields.get(2)?)?),
                engine.clone(),
            ))
        })
        .collect()
}

/// The engine at the far end of `stream`, waiting for the scans up to `wait`.
async fn engine_of(stream: &TcpStream, polls: &Mutex<Polls>, wait: Duration) -> Option<String> {
    let far = stream.peer_addr().ok()?.port();
    let near = stream.local_addr().ok()?.port();
    let asked = Instant::now();
    loop {
        if let Some(engine) = polls.lock().expect("polls").sockets.get(&(far, near)) {
            return Some(engine.clone());
        }
        if asked.elapsed() >= wait {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Answers one connection: holding registers read as the device's number,
/// anything else refused; each request is recorded under its engine.
async fn serve(mut stream: TcpStream, device: usize, polls: Arc<Mutex<Polls>>) {
    let mut engine = None;
    loop {
        let mut header = [0u8; 7];
        if stream.read_exact(&mut header).await.is_err() {
            return;
        }
        let length = usize::from(u16::from_be_bytes([header[4], header[5]]));
        let mut pdu = vec![0u8; length.saturating_sub(1)];
        if stream.read_exact(&mut pdu).await.is_err() {
            return;
        }
        let at = Instant::now();
        // Looked for while the engine waits for the answer, so its socket is
        // surely open (an engine that gives the device up, or is killed,
        // closes it soon after): a few scans, far inside its timeout.
        if engine.is_none() {
            engine = engine_of(&stream, &polls, Duration::from_millis(100)).await;
        }
        let answer = match pdu.as_slice() {
            [3, _, _, _, count] => {
                let count = usize::from(*count).min(125);
                let mut answer = vec![3, (count * 2) as u8];
                for _ in 0..count {
                    answer.extend_from_slice(&(device as u16).to_be_bytes());
                }
                answer
            }
            [function, ..] => vec![function | 0x80, 1],
            [] => return,
        };
        let mut frame = header[..4].to_vec();
        frame.extend_from_slice(&((answer.len() + 1) as u16).to_be_bytes());
        frame.push(header[6]);
        frame.extend_from_slice(&answer);
        if stream.write_all(&frame).await.is_err() {
            return;
        }
        // Not found yet (a loaded machine): answered first, as an engine
        // waiting past its read timeout would drop the connection, then
        // looked for longer.
        if engine.is_none() {
            engine = engine_of(&stream, &polls, Duration::from_secs(5)).await;
        }
        let name = engine.clone().unwrap_or_else(|| "unknown".to_owned());
        polls.lock().expect("polls").record(device, &name, at);
    }
}

/// The thirty devices' ports.
async fn peer(polls: &Arc<Mutex<Polls>>) -> Vec<u16> {
    let mut ports = Vec::new();
    for device in 0..DEVICES {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        ports.push(listener.local_addr().expect("addr").port());
        let polls = Arc::clone(polls);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, device, Arc::clone(&polls)));
            }
        });
    }
    ports
}

/// One configuration for all engines; only the HTTP port differs between
/// the files, as it would between hosts.
fn config(url: &str, mqtt: u16, http: u16, ports: &[u16]) -> String {
    let gateway = Gateway::new("plant", mqtt)
        .http(http, "operator-secret")
        .set("perDeviceTimeoutMs", 500)
        .set("backoff", json!({ "baseMs": 100, "maxMs": 300 }))
        .set("lease.scanIntervalMs", 500)
        .set("store", json!({ "kind": "postgres", "url": url }));
    let devices = ports.iter().enumerate().map(|(i, port)| {
        Device::modbus(&device_id(i), *port)
            .set("stateTimeout", 5)
            .channel("readTimeoutMs", 300)
            .tag(Tag::new("a", "40001", "UINT16", 200))
    });
    devices.fold(gateway, Gateway::device).yaml()
}

struct Node {
    name: String,
    dir: PathBuf,
    http: u16,
    engine: Option<Engine>,
}

impl Node {
    fn start(&mut self, config: &str, polls: &Mutex<Polls>) {
        let path = self.dir.join("devices.yaml");
        std::fs::write(&path, config).expect("config");
        let engine = Engine::start_with_args(&self.dir, &path, &["--node-id", &self.name]);
        polls
            .lock()
            .expect("polls")
            .engines
            .insert(engine.pid(), self.name.clone());
        self.engine = Some(engine);
    }
}

/// Waits (bounded) until every device was polled by exactly one engine in the
/// last two seconds; returns who polls each.
async fn settled(polls: &Mutex<Polls>, within: Duration, what: &str) -> Vec<String> {
    let deadline = Instant::now() + within;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let since = Instant::now() - Duration::from_secs(2);
        let pollers = polls.lock().expect("polls").pollers_since(since);
        if pollers.iter().all(|p| p.len() == 1) {
            return pollers
                .into_iter()
                .map(|p| p.into_iter().next().unwrap_or_default())
                .collect();
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not settled within {within:?}: {pollers:?}"
        );
    }
}

fn share(owners: &[String]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for owner in owners {
        *counts.entry(owner.clone()).or_default() += 1;
    }
    counts
}

/// Waits (bounded) until every device is polled by exactly one engine and
/// `engines` engines poll `DEVICES / engines` each; returns who polls each.
async fn balanced(
    polls: &Mutex<Polls>,
    engines: usize,
    within: Duration,
    what: &str,
) -> Vec<String> {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let owners = settled(polls, left, what).await;
        let counts = share(&owners);
        if counts.len() == engines && counts.values().all(|n| *n == DEVICES / engines) {
            return owners;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not balanced: {counts:?}"
        );
    }
}

/// `GET /devices`: each device's owner as the engine reports it.
async fn listed_owners(http: u16) -> Vec<String> {
    let (status, body) =
        Engine::request(http, "GET", "/devices", Some("operator-secret"), None).await;
    assert_eq!(status, 200, "{body}");
    let devices = body["devices"].as_array().expect("devices");
    assert_eq!(devices.len(), DEVICES, "{body}");
    devices
        .iter()
        .map(|d| d["owner"].as_str().unwrap_or("none").to_owned())
        .collect()
}

/// The DEVICE_OFFLINE alarms in the shared database, by device.
fn offline_alarms(pg: &Postgres, database: &str) -> BTreeMap<String, usize> {
    let rows = pg.query(
        database,
        "SELECT body->>'deviceId' FROM sluice_record
         WHERE kind = 'alarm' AND body->>'ruleKey' = 'DEVICE_OFFLINE'",
    );
    let mut counts = BTreeMap::new();
    for device in rows {
        *counts.entry(device).or_default() += 1;
    }
    counts
}

/// The device-offline events published, by device.
fn offline_events(messages: &[crate::support::mqtt::Message]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for m in messages {
        if let Some(device) = m
            .topic
            .strip_prefix("P/")
            .and_then(|t| t.strip_suffix("/event/post/device-offline"))
        {
            *counts.entry(device.to_owned()).or_default() += 1;
        }
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_engines_share_thirty_devices_and_take_over_from_one_that_dies() {
    let pg = Postgres::start();
    let database = "plant";
    let url = pg.database(database);
    let broker = Mosquitto::start();
    let subscriber = Subscriber::connect_persistent(broker.port()).await;
    let polls = Arc::new(Mutex::new(Polls::default()));
    scan_sockets(&polls);
    let ports = peer(&polls).await;
    let mut nodes: Vec<Node> = (1..=3)
        .map(|i| Node {
            name: format!("engine-{i}"),
            dir: scratch_dir(&format!("shared-{i}")),
            http: free_port(),
            engine: None,
        })
        .collect();
    for node in &mut nodes {
        let text = config(&url, broker.port(), node.http, &ports);
        node.start(&text, &polls);
    }

    // 1. Every device is polled by exactly one engine, ten each.
    let owners = balanced(&polls, 3, Duration::from_secs(40), "three engines").await;
    assert_eq!(listed_owners(nodes[0].http).await, owners, "GET /devices");

    // 2. SIGKILL the third: its devices report again from the others in time.
    let victim = nodes[2].name.clone();
    let orphaned: Vec<usize> = (0..DEVICES).filter(|d| owners[*d] == victim).collect();
    if let Some(engine) = nodes[2].engine.as_mut() {
        engine.kill();
    }
    let killed = Instant::now();
    let owners = balanced(
        &polls,
        2,
        FAILOVER + Duration::from_secs(5),
        "after the kill",
    )
    .await;
    assert!(!owners.contains(&victim), "{owners:?}");
    let slowest = orphaned
        .iter()
        .map(|d| {
            let first = polls
                .lock()
                .expect("polls")
                .first_since(*d, killed, &victim)
                .expect("taken over");
            first.duration_since(killed)
        })
        .max()
        .unwrap_or_default();
    assert!(slowest <= FAILOVER, "failover took {slowest:?}");
    eprintln!("failover: the last orphaned device was polled again after {slowest:?}");
    // Their leases ran out meanwhile: offline once each, one alarm each,
    // whichever of the two engines' scans claimed the expiry.
    let deadline = Instant::now() + Duration::from_secs(10);
    let orphan_ids: Vec<String> = orphaned.iter().map(|d| device_id(*d)).collect();
    loop {
        let alarms = offline_alarms(&pg, database);
        let events = offline_events(&subscriber.messages());
        let done = orphan_ids
            .iter()
            .all(|d| alarms.contains_key(d) && events.contains_key(d));
        if done || Instant::now() > deadline {
            for d in &orphan_ids {
                assert_eq!(alarms.get(d), Some(&1), "offline alarms of {d}: {alarms:?}");
                assert_eq!(events.get(d), Some(&1), "offline events of {d}: {events:?}");
            }
            let others: Vec<_> = alarms.keys().filter(|d| !orphan_ids.contains(d)).collect();
            assert!(
                others.is_empty(),
                "devices that never lost their poller: {others:?}"
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // 3. Start it again: ownership settles at ten each once more.
    let text = config(&url, broker.port(), nodes[2].http, &ports);
    nodes[2].start(&text, &polls);
    let owners = balanced(&polls, 3, Duration::from_secs(40), "after the restart").await;
    for node in &nodes {
        assert_eq!(listed_owners(node.http).await, owners, "{}", node.name);
    }

    let overlaps = polls.lock().expect("polls").overlaps.clone();
    assert!(overlaps.is_empty(), "{overlaps:#?}");
    assert!(
        !polls
            .lock()
            .expect("polls")
            .requests
            .keys()
            .any(|(_, e)| e == "unknown"),
        "every request was traced to an engine"
    );
    // No report number was given twice: one content per (device, seq).
    let mut seen: HashMap<(String, i64), Value> = HashMap::new();
    let mut reports = 0;
    for m in subscriber.messages() {
        if !m.topic.ends_with("/property/post") {
            continue;
        }
        let json = m.json();
        let device = json["deviceNum"].as_str().expect("device").to_owned();
        let seq = json["seq"].as_i64().expect("seq");
        let stamp = json["timestamp"].clone();
        reports += 1;
        if let Some(before) = seen.insert((device.clone(), seq), stamp.clone()) {
            assert_eq!(before, stamp, "{device} seq {seq} given twice");
        }
    }
    assert!(reports > 1000, "{reports} reports");
    for node in &mut nodes {
        if let Some(engine) = node.engine.as_mut() {
            engine.assert_running();
        }
    }
}
