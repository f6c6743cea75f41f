//! Helpers the engine benches share: scratch directories, the `sluice` binary as
//! a child process, plain HTTP/1.1 over a socket, `/metrics` figures and the
//! embedded MQTT broker with a counting drain.
#![allow(dead_code)]

#[path = "../../tests/it/support/config.rs"]
pub mod config;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use sluice::broker::EmbeddedBroker;
use sluice::sim::{SimHandle, Simulator};
use tokio::runtime::Runtime;

/// Longest wait for the engine to have polled every device once.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(90);

pub fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text:?} is not a non-negative integer")),
        Err(_) => default,
    }
}

/// A free loopback address (bound then released for the engine to take).
pub fn free_local_address() -> SocketAddr {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind a free port");
    listener.local_addr().expect("local address")
}

/// A scratch directory removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let dir = std::env::temp_dir().join(format!(
            "sluice-bench-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `sluice run` as a child process, killed on every exit path (drop).
pub struct Engine {
    child: Child,
    log: PathBuf,
    pub http: SocketAddr,
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Engine {
    pub fn start(dir: &Path, config: &str, http: SocketAddr) -> Self {
        Self::start_with_args(dir, config, http, &[])
    }

    /// Like [`Engine::start`], with more arguments for `sluice run`.
    pub fn start_with_args(dir: &Path, config: &str, http: SocketAddr, extra: &[String]) -> Self {
        let config_path = dir.join("devices.yaml");
        std::fs::write(&config_path, config).expect("write the engine config");
        let log = dir.join("engine.log");
        let file = std::fs::File::create(&log).expect("create the engine log");
        // `SLUICE_BENCH_ENGINE` runs another build of the engine (a saved
        // copy of an earlier one, for a before/after pair in one sitting).
        let binary = std::env::var_os("SLUICE_BENCH_ENGINE").map_or_else(
            || env!("CARGO_BIN_EXE_sluice").into(),
            std::path::PathBuf::from,
        );
        let child = Command::new(binary)
            .args(["run", "--config"])
            .arg(&config_path)
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .current_dir(dir)
            .spawn()
            .expect("start the sluice binary");
        Self { child, log, http }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last lines of the engine's log, for failure messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Panics (with the log) if the engine has exited.
    pub fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "sluice exited with {status}; log tail:\n{}",
                self.log_tail()
            );
        }
    }

    pub fn metrics(&mut self) -> Metrics {
        self.assert_running();
        match http_get(self.http, "/metrics") {
            Ok(body) => Metrics::parse(&body),
            Err(error) => panic!("GET /metrics: {error}; log tail:\n{}", self.log_tail()),
        }
    }

    /// Waits until the engine answers `/metrics`.
    pub fn wait_up(&mut self) {
        let start = Instant::now();
        while http_get(self.http, "/metrics").is_err() {
            self.assert_running();
            assert!(
                start.elapsed() < STARTUP_TIMEOUT,
                "the engine did not answer within {STARTUP_TIMEOUT:?}; log tail:\n{}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until every one of `devices` devices answered a round.
    pub fn wait_all_online(&mut self, devices: usize, poll: Duration) -> Duration {
        let start = Instant::now();
        let mut last = String::from("no answer from /metrics yet");
        loop {
            self.assert_running();
            if let Ok(body) = http_get(self.http, "/metrics") {
                let m = Metrics::parse(&body);
                if m.devices == devices && m.online == devices {
                    return start.elapsed();
                }
                last = format!("{} of {devices} devices online", m.online);
            }
            if start.elapsed() > STARTUP_TIMEOUT {
                panic!(
                    "the engine did not poll every device within {STARTUP_TIMEOUT:?} ({last}); \
                     log tail:\n{}",
                    self.log_tail()
                );
            }
            std::thread::sleep(poll);
        }
    }
}

/// `GET path` over HTTP/1.1 with a raw socket; the body of a 200 answer.
pub fn http_get(address: SocketAddr, path: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5))
        .map_err(|e| format!("connect {address}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("send: {e}"))?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8(raw).map_err(|e| format!("not UTF-8: {e}"))?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| "no end of headers".to_owned())?;
    let status = head.lines().next().unwrap_or_default();
    if !status.contains(" 200 ") {
        return Err(format!("answer {status:?}"));
    }
    let chunked = head.lines().any(|line| {
        let line = line.to_ascii_lowercase();
        line.starts_with("transfer-encoding:") && line.contains("chunked")
    });
    if chunked {
        dechunk(body)
    } else {
        Ok(body.to_owned())
    }
}

/// Decodes a chunked HTTP/1.1 body.
fn dechunk(mut rest: &str) -> Result<String, String> {
    let mut out = String::new();
    loop {
        let (size, after) = rest
            .split_once("\r\n")
            .ok_or_else(|| "truncated chunk size".to_owned())?;
        let size = usize::from_str_radix(size.split(';').next().unwrap_or_default().trim(), 16)
            .map_err(|e| format!("chunk size {size:?}: {e}"))?;
        if size == 0 {
            return Ok(out);
        }
        let chunk = after
            .get(..size)
            .ok_or_else(|| "truncated chunk".to_owned())?;
        out.push_str(chunk);
        rest = after.get(size + 2..).unwrap_or_default();
    }
}

/// The figures this bench reads from `/metrics`, summed over devices.
#[derive(Debug, Default, Clone)]
pub struct Metrics {
    pub rounds: f64,
    pub skipped: f64,
    pub failed: f64,
    pub round_seconds_sum: f64,
    pub round_count: f64,
    pub published: f64,
    pub dropped: f64,
    /// Devices listed with a `sluice_device_online` gauge.
    pub devices: usize,
    /// Of those, the ones whose last round answered.
    pub online: usize,
}

impl Metrics {
    pub fn parse(body: &str) -> Self {
        let mut sums: HashMap<&str, f64> = HashMap::new();
        let mut m = Self::default();
        for line in body.lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.trim().parse::<f64>() else {
                continue;
            };
            let name = series.split('{').next().unwrap_or_default();
            if name == "sluice_device_online" {
                m.devices += 1;
                if value >= 1.0 {
                    m.online += 1;
                }
            }
            *sums.entry(name).or_default() += value;
        }
        let sum = |name: &str| sums.get(name).copied().unwrap_or(0.0);
        m.rounds = sum("sluice_rounds_total");
        m.skipped = sum("sluice_rounds_skipped_total");
        m.failed = sum("sluice_rounds_failed_total");
        m.round_seconds_sum = sum("sluice_round_seconds_sum");
        m.round_count = sum("sluice_round_seconds_count");
        m.published = sum("sluice_mqtt_published_total");
        m.dropped = sum("sluice_mqtt_dropped_total");
        m
    }
}

/// The bench's MQTT broker, with a thread that drains and counts what it receives
/// and keeps the last payload.
pub struct Broker {
    pub address: SocketAddr,
    received: Arc<AtomicU64>,
    /// Messages on `.../property/post` topics.
    reports: Arc<AtomicU64>,
    last: Arc<Mutex<Vec<u8>>>,
    /// Every topic reports came on.
    topics: Arc<Mutex<std::collections::HashSet<String>>>,
    /// Publish lags of reports (ms from the values' read to their arrival),
    /// while recording; and, for each, ms from the report's `timestamp` (when
    /// the engine made it) to its arrival.
    lags: Arc<Mutex<Option<Lags>>>,
    _process: Option<MosquittoProcess>,
}

/// Lags being kept: from the values' read, and from the report's making.
#[derive(Default)]
struct Lags {
    read: Vec<i64>,
    made: Vec<i64>,
}

/// What a report says of when its values were read.
#[derive(serde::Deserialize)]
struct Stamped {
    values: Vec<ReadAt>,
    timestamp: Option<i64>,
}

#[derive(serde::Deserialize)]
struct ReadAt {
    ts: i64,
}

/// Milliseconds since the Unix epoch.
pub fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Waits until `address` takes connections. The embedded broker binds its
/// port on a thread of its own: the simulator's thousand listeners, opened
/// next, could otherwise be given that port first (it was free a moment
/// before), and the engine would greet a Modbus simulator with its CONNECT.
fn wait_listening(address: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the MQTT broker does not listen on {address}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Where the messages the broker took come from, for the drain to count.
enum Source {
    Embedded(EmbeddedBroker),
    Mosquitto(mpsc::Receiver<(String, Vec<u8>)>),
}

impl Source {
    fn recv(&self) -> Option<(String, Vec<u8>)> {
        match self {
            Self::Embedded(broker) => broker.messages().recv().ok(),
            Self::Mosquitto(messages) => messages.recv().ok(),
        }
    }
}

/// A Mosquitto process (`SLUICE_BENCH_BROKER=mosquitto`), stopped on drop.
struct MosquittoProcess {
    child: Child,
    _dir: Scratch,
}

impl Drop for MosquittoProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts Mosquitto on `address` (anonymous, in memory, 1,000 messages in
/// flight a client as the embedded broker allows) and a client of this
/// process subscribed to everything, whose messages the returned receiver gives.
fn start_mosquitto(address: SocketAddr) -> (MosquittoProcess, mpsc::Receiver<(String, Vec<u8>)>) {
    let dir = Scratch::new("mosquitto");
    let config = dir.0.join("mosquitto.conf");
    std::fs::write(
        &config,
        format!(
            "listener {} {}\nallow_anonymous true\npersistence false\nset_tcp_nodelay true\n\
             max_inflight_messages 1000\nmax_queued_messages 100000\nuser root\n",
            address.port(),
            address.ip()
        ),
    )
    .expect("write mosquitto.conf");
    let child = Command::new("mosquitto")
        .arg("-c")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("mosquitto is not installed (scripts/setup-peers.sh)");
    let process = MosquittoProcess { child, _dir: dir };
    wait_listening(address);
    let (sender, messages) = mpsc::channel();
    std::thread::Builder::new()
        .name("bench-mqtt-watch".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the watching client");
            rt.block_on(async move {
                let mut options = rumqttc::MqttOptions::new(
                    "bench-watch",
                    address.ip().to_string(),
                    address.port(),
                );
                options
                    .set_keep_alive(Duration::from_secs(30))
                    .set_max_packet_size(1 << 20, 1 << 20);
                let (client, mut events) = rumqttc::AsyncClient::new(options, 100);
                if client
                    .subscribe("#", rumqttc::QoS::AtMostOnce)
                    .await
                    .is_err()
                {
                    return;
                }
                while let Ok(event) = events.poll().await {
                    if let rumqttc::Event::Incoming(rumqttc::Incoming::Publish(publish)) = event
                        && sender
                            .send((publish.topic, publish.payload.to_vec()))
                            .is_err()
                    {
                        return;
                    }
                }
            });
        })
        .expect("spawn the watching client");
    (process, messages)
}

impl Broker {
    /// The embedded broker, or Mosquitto with `SLUICE_BENCH_BROKER=mosquitto`.
    pub fn start() -> Self {
        let address = free_local_address();
        let (source, process) = match std::env::var("SLUICE_BENCH_BROKER").as_deref() {
            Ok("mosquitto") => {
                let (process, messages) = start_mosquitto(address);
                (Source::Mosquitto(messages), Some(process))
            }
            Ok("embedded") | Err(_) => {
                let broker = EmbeddedBroker::start(address).expect("start the MQTT broker");
                wait_listening(address);
                (Source::Embedded(broker), None)
            }
            Ok(other) => panic!("SLUICE_BENCH_BROKER={other:?}: embedded or mosquitto"),
        };
        let received = Arc::new(AtomicU64::new(0));
        let reports = Arc::new(AtomicU64::new(0));
        let last = Arc::new(Mutex::new(Vec::new()));
        let topics = Arc::new(Mutex::new(std::collections::HashSet::new()));
        let lags: Arc<Mutex<Option<Lags>>> = Arc::new(Mutex::new(None));
        let (counter, keep, seen, lagged) = (
            Arc::clone(&received),
            Arc::clone(&last),
            Arc::clone(&topics),
            Arc::clone(&lags),
        );
        let report_counter = Arc::clone(&reports);
        std::thread::Builder::new()
            .name("bench-mqtt-drain".into())
            .spawn(move || {
                while let Some((topic, payload)) = source.recv() {
                    counter.fetch_add(1, Ordering::Relaxed);
                    if topic.ends_with("/property/post") {
                        report_counter.fetch_add(1, Ordering::Relaxed);
                        if let Ok(mut lags) = lagged.lock()
                            && let Some(lags) = lags.as_mut()
                            && let Ok(report) = serde_json::from_slice::<Stamped>(&payload)
                            && let Some(first) = report.values.first()
                        {
                            let now = wall_ms();
                            lags.read.push(now - first.ts);
                            lags.made.extend(report.timestamp.map(|made| now - made));
                        }
                        if let Ok(mut last) = keep.lock() {
                            *last = payload;
                        }
                        if let Ok(mut seen) = seen.lock()
                            && !seen.contains(&topic)
                        {
                            seen.insert(topic);
                        }
                    }
                }
            })
            .expect("spawn the MQTT drain thread");
        Self {
            address,
            received,
            reports,
            last,
            topics,
            lags,
            _process: process,
        }
    }

    /// Starts keeping the publish lag of every report from now on.
    pub fn record_lags(&self) {
        if let Ok(mut lags) = self.lags.lock() {
            *lags = Some(Lags::default());
        }
    }

    /// The lags kept since [`Broker::record_lags`], in ms; stops keeping them.
    pub fn take_lags(&self) -> Vec<i64> {
        self.take_both_lags().0
    }

    /// The lags kept since [`Broker::record_lags`], and those from each
    /// report's making (its `timestamp`) to its arrival, in ms; stops keeping them.
    pub fn take_both_lags(&self) -> (Vec<i64>, Vec<i64>) {
        let lags = self
            .lags
            .lock()
            .ok()
            .and_then(|mut lags| lags.take())
            .unwrap_or_default();
        (lags.read, lags.made)
    }

    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// Reports (`.../property/post`) received.
    pub fn reports(&self) -> u64 {
        self.reports.load(Ordering::Relaxed)
    }

    /// Whether a report came on `topic`.
    pub fn seen(&self, topic: &str) -> bool {
        self.topics.lock().is_ok_and(|t| t.contains(topic))
    }

    /// The last report received, as text.
    pub fn last(&self) -> String {
        self.last
            .lock()
            .map(|p| String::from_utf8_lossy(&p).into_owned())
            .unwrap_or_default()
    }
}

/// One HTTP/1.1 request with a bearer token and a body; the status and body.
pub fn http_request(
    address: SocketAddr,
    method: &str,
    path: &str,
    token: &str,
    body: &[u8],
) -> Result<(u16, String), String> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5))
        .map_err(|e| format!("connect {address}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body))
        .map_err(|e| format!("send: {e}"))?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| "no end of headers".to_owned())?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status in {head:?}"))?;
    Ok((status, body.to_owned()))
}

/// Starts one listening socket per device on a shared simulator.
pub fn serve(rt: &Runtime, sim: &Simulator, devices: usize) -> Vec<SimHandle> {
    rt.block_on(async {
        let mut handles = Vec::with_capacity(devices);
        for _ in 0..devices {
            handles.push(
                sim.serve((Ipv4Addr::LOCALHOST, 0).into())
                    .await
                    .expect("simulator listens"),
            );
        }
        handles
    })
}

/// Clock ticks per second for `/proc/PID/stat` times.
pub fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse::<f64>().ok())
        .filter(|&hz| hz > 0.0)
        .unwrap_or(100.0)
}

/// utime + stime of a process (`self` or a pid), in clock ticks.
pub fn cpu_ticks(pid: &str) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap_or_else(|e| panic!("reading /proc/{pid}/stat: {e}"));
    // Fields after the command name (which may contain spaces) start at field 3.
    let (_, rest) = stat
        .rsplit_once(')')
        .expect("/proc/PID/stat has a command name");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 here.
    let field = |i: usize| -> u64 {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .expect("utime/stime in /proc/PID/stat")
    };
    field(11) + field(12)
}

/// (VmRSS, VmHWM) of a process, in KiB.
pub fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("reading /proc/{pid}/status: {e}"));
    let get = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|line| line.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{key} in /proc/{pid}/status"))
    };
    (get("VmRSS:"), get("VmHWM:"))
}

/// The `q` quantile (0..1) of `sorted`, in ms.
pub fn quantile(sorted: &[i64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let at = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[at.min(sorted.len() - 1)] as f64
}
