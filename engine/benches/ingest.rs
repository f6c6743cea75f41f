//! Devices that publish by themselves, at equal load: what a message costs
//! the engine (read from its device broker, decoded by the built-in `json`,
//! the default pipeline, WAL on, one BATCH report) against what it costs
//! Node-RED doing the same (mqtt in, a JSON node, a function node mapping the
//! fields into the same report, mqtt out), on the same stream.
//!
//! `cargo bench -p sluice --bench ingest`. D devices (`SLUICE_BENCH_DEVICES`,
//! 1,000) each publish R messages a second (`SLUICE_BENCH_RATE`, 20) of ten
//! numbers and the time they were sent (`ts`), as JSON on `devices/D{n}/up`
//! with QoS 1, from publishers in this process to the embedded broker in this
//! process (both outside every figure). Each side is measured alone over
//! `SLUICE_BENCH_SECONDS` (30) after a warm-up; then the stream stops and
//! what is still in flight drains, and every message must have become a
//! report (lost = sent - reported). The lag is from a message's `ts` to its
//! report at the broker (the engine stamps samples with `ts`: the decoder's
//! `timestamp` setting). The broker's own lag is measured first: the stream
//! published straight onto the report topics (one hop; a report takes two);
//! then a plain client subscribed to every device's topic as the engine is,
//! doing nothing, while the broker carries as many reports: the broker's own
//! part of the first hop.
//!
//! Then the swap (`SLUICE_BENCH_SWAP_RATE` messages a second, 5,000; `0` leaves
//! it out): a new version of the decoder uploaded half-way through a window,
//! and every message must have become exactly one report.
//!
//! `SLUICE_BENCH_BROKER=mosquitto` runs the stream through Mosquitto instead
//! of the embedded broker; `SLUICE_BENCH_ENGINE` runs another `sluice` binary;
//! `SLUICE_BENCH_GROUP_COMMIT_MS` sets the WAL's `groupCommitMs`;
//! `SLUICE_BENCH_ENGINE_THREADS` the engine's `workerThreads` (1, its default); `SLUICE_BENCH_NODE_RED`
//! as in the polling bench (`0` leaves Node-RED out).
#![allow(clippy::print_stdout)]

mod common;
mod node_red;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{
    Broker, Engine, Scratch, clock_ticks, cpu_ticks, env_u64, free_local_address, memory_kib,
    quantile,
};
use rumqttc::{AsyncClient, MqttOptions, QoS};

/// Publisher connections the stream is spread over.
const PUBLISHERS: usize = 4;
/// How often each publisher sends the messages that fell due (each device at
/// its own phase, `due`): often, so the stream comes spread, not in bursts.
const TICK: Duration = Duration::from_millis(5);
/// Longest wait for what is in flight to arrive once the stream stopped.
const DRAIN: Duration = Duration::from_secs(30);
const ADMIN: &str = "bench-admin-token";

/// The stream: devices, messages a second each, and where it goes.
#[derive(Debug, Clone, Copy)]
struct Stream {
    devices: usize,
    rate: u64,
    target: Target,
}

impl Stream {
    fn per_second(self) -> u64 {
        self.devices as u64 * self.rate
    }
}

/// What one side did over its window and the drain after it.
struct Side {
    name: &'static str,
    sent: u64,
    /// Reports that reached the broker in the window: the messages handled.
    handled: u64,
    reported: u64,
    secs: f64,
    cpu_percent: f64,
    rss_mib: f64,
    lags: Vec<i64>,
    /// From a report's making (its `timestamp`: when the engine read the
    /// message) to its arrival at the broker.
    made_lags: Vec<i64>,
    /// Lags seen meanwhile by a [`Listener`] of some of the device topics.
    beside_lags: Vec<i64>,
}

impl Side {
    fn print(&self) {
        let mut lags = self.lags.clone();
        lags.sort_unstable();
        println!(
            "{:>9}  {:>9.0}  {:>9.0}  {:>9}  {:>6.1}  {:>10.1}  {:>7.1}  {:>6.0}/{:>4.0}/{:>4.0}",
            self.name,
            self.sent as f64 / self.secs,
            self.handled as f64 / self.secs,
            self.sent.saturating_sub(self.reported),
            self.cpu_percent,
            self.us_per_message(),
            self.rss_mib,
            quantile(&lags, 0.5),
            quantile(&lags, 0.9),
            quantile(&lags, 0.99),
        );
    }

    /// CPU per message handled (a report out): a side that falls behind the
    /// stream is not credited with the messages it did not get to.
    fn us_per_message(&self) -> f64 {
        self.cpu_percent / 100.0 / (self.handled as f64 / self.secs) * 1e6
    }
}

fn device_num(i: usize) -> String {
    format!("D{i:05}")
}

/// The engine's configuration: every device on the bench's broker, read by `json`.
fn engine_config(
    stream: Stream,
    mqtt: SocketAddr,
    http: SocketAddr,
    dir: &std::path::Path,
) -> String {
    let mut text = format!(
        "collector:\n  workerThreads: {threads}\n  mqtt:\n    brokerUrl: tcp://{mqtt}\n    clientId: ingest-bench\n  \
         http:\n    listen: {http}\n    adminToken: {ADMIN}\n  wal:\n    dir: {}\n{commit}  lease:\n    scanIntervalMs: 1000\n\
         devices:\n",
        dir.join("data").display(),
        threads = env_u64("SLUICE_BENCH_ENGINE_THREADS", 1).max(1),
        commit = match std::env::var("SLUICE_BENCH_GROUP_COMMIT_MS") {
            Ok(ms) => format!("    groupCommitMs: {ms}\n"),
            Err(_) => String::new(),
        },
    );
    let tags: String = (0..10)
        .map(|t| format!("          - {{ key: t{t}, address: /t{t}, dataType: FLOAT64 }}\n"))
        .collect();
    for i in 0..stream.devices {
        text.push_str(&format!(
            "  - deviceId: {num}\n    productId: BENCH\n    deviceNum: {num}\n    channels:\n      \
             - channelId: up\n        protocol: mqtt\n        topic: devices/{{deviceNum}}/up\n        \
             reportPeriodMs: 1000\n        maxMessagesPerSecond: {max}\n        timestamp: /ts\n        tags:\n{tags}",
            num = device_num(i),
            max = stream.rate * 4,
        ));
    }
    text
}

/// Where the stream goes: to the devices' topics, for a subscriber to
/// report; or straight to the report topics, the broker's own lag.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Target {
    Devices,
    Reports,
}

/// Publishes the stream until `stop`; counts what it sent in `sent`.
fn publish(
    rt: &tokio::runtime::Runtime,
    mqtt: SocketAddr,
    stream: Stream,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
) {
    for k in 0..PUBLISHERS {
        let (stop, sent) = (Arc::clone(&stop), Arc::clone(&sent));
        rt.spawn(async move {
            let mut options = MqttOptions::new(
                format!("bench-{:?}-{k}", stream.target),
                mqtt.ip().to_string(),
                mqtt.port(),
            );
            options
                .set_keep_alive(Duration::from_secs(30))
                .set_inflight(1000)
                .set_request_channel_capacity(10_000);
            let (client, mut events) = AsyncClient::new(options, 10_000);
            tokio::spawn(async move { while events.poll().await.is_ok() {} });
            let mine: Vec<usize> = (k..stream.devices).step_by(PUBLISHERS).collect();
            // Messages each of this publisher's devices has sent so far.
            let mut done = vec![0u64; mine.len()];
            let start = Instant::now();
            let mut ticker = tokio::time::interval(TICK);
            while !stop.load(Ordering::Relaxed) {
                ticker.tick().await;
                let periods = start.elapsed().as_secs_f64() * stream.rate as f64;
                for (&i, done) in mine.iter().zip(done.iter_mut()) {
                    let due = due(periods, i, stream.devices);
                    for round in *done..due {
                        let ts = common::wall_ms();
                        let values: String = (0..10)
                            .map(|t| format!(",\"t{t}\":{}.{}", round % 1000, (i + t) % 10))
                            .collect();
                        let (topic, payload) = match stream.target {
                            Target::Devices => (
                                format!("devices/{}/up", device_num(i)),
                                format!("{{\"ts\":{ts}{values}}}"),
                            ),
                            Target::Reports => (
                                format!("BENCH/{}/property/post", device_num(i)),
                                format!("{{\"values\":[{{\"ts\":{ts}}}]}}"),
                            ),
                        };
                        if client
                            .publish(topic, QoS::AtLeastOnce, false, payload)
                            .await
                            .is_err()
                        {
                            return;
                        }
                        sent.fetch_add(1, Ordering::Relaxed);
                    }
                    *done = due;
                }
            }
        });
    }
}

/// Messages device `i` of `devices` has fallen due for after `periods` of its
/// reporting period: each device keeps its own phase, spread evenly over the
/// period as a fleet's free-running clocks are, so the stream comes as a
/// steady trickle, not as every device at once.
fn due(periods: f64, i: usize, devices: usize) -> u64 {
    let phase = i as f64 / devices as f64;
    (periods + 1.0 - phase) as u64
}

/// Runs the stream against a subscriber process `pid` (the engine or Node-RED):
/// a warm-up, the window (CPU, memory, lags), then the drain.
fn run_side(
    name: &'static str,
    rt: &tokio::runtime::Runtime,
    broker: &Broker,
    stream: Stream,
    pid: u32,
    seconds: u64,
    beside: Option<&Listener>,
) -> Side {
    let hz = clock_ticks();
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let reports_before = broker.reports();
    publish(
        rt,
        broker.address,
        stream,
        Arc::clone(&stop),
        Arc::clone(&sent),
    );
    std::thread::sleep(Duration::from_secs(3));
    broker.record_lags();
    if let Some(listener) = beside {
        listener.record();
    }
    let pid_text = pid.to_string();
    let (s0, r0, c0, t0) = (
        sent.load(Ordering::Relaxed),
        broker.reports(),
        cpu_ticks(&pid_text),
        Instant::now(),
    );
    let mut rss = Vec::new();
    while t0.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_millis(500));
        rss.push(memory_kib(pid).0);
    }
    let (s1, r1, c1, secs) = (
        sent.load(Ordering::Relaxed),
        broker.reports(),
        cpu_ticks(&pid_text),
        t0.elapsed().as_secs_f64(),
    );
    let (lags, made_lags) = broker.take_both_lags();
    let beside_lags = beside.map(Listener::take).unwrap_or_default();
    stop.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(200));
    let total = sent.load(Ordering::Relaxed);
    let deadline = Instant::now() + DRAIN;
    while broker.reports() - reports_before < total && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    rss.sort_unstable();
    // Every message of the run (warm-up and drain included) must have become
    // a report: what is missing is lost, counted against the window.
    let lost = total.saturating_sub(broker.reports() - reports_before);
    Side {
        name,
        sent: s1 - s0,
        handled: r1 - r0,
        reported: (s1 - s0).saturating_sub(lost),
        secs,
        cpu_percent: (c1 - c0) as f64 / hz / secs * 100.0,
        rss_mib: rss.get(rss.len() / 2).copied().unwrap_or(0) as f64 / 1024.0,
        lags,
        made_lags,
        beside_lags,
    }
}

/// A plain MQTT client subscribed to device topics (QoS 1, 100 filters a
/// SUBSCRIBE, as the engine subscribes) that only notes each message's lag
/// from its `ts` while recording.
struct Listener {
    client: AsyncClient,
    lags: Arc<std::sync::Mutex<Vec<i64>>>,
    recording: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Listener {
    fn start(rt: &tokio::runtime::Runtime, broker: &Broker, id: &str, topics: &[String]) -> Self {
        let lags = Arc::new(std::sync::Mutex::new(Vec::<i64>::new()));
        let recording = Arc::new(AtomicBool::new(false));
        let mut options =
            MqttOptions::new(id, broker.address.ip().to_string(), broker.address.port());
        options.set_keep_alive(Duration::from_secs(30));
        let (client, mut events) = AsyncClient::new(options, 100);
        let task = {
            let (lags, recording) = (Arc::clone(&lags), Arc::clone(&recording));
            rt.spawn(async move {
                while let Ok(event) = events.poll().await {
                    if let rumqttc::Event::Incoming(rumqttc::Incoming::Publish(message)) = event
                        && recording.load(Ordering::Relaxed)
                        && let Ok(sent) = serde_json::from_slice::<Sent>(&message.payload)
                        && let Ok(mut lags) = lags.lock()
                    {
                        lags.push(common::wall_ms() - sent.ts);
                    }
                }
            })
        };
        rt.block_on(async {
            for chunk in topics.chunks(100) {
                let filters = chunk
                    .iter()
                    .map(|t| rumqttc::SubscribeFilter::new(t.clone(), QoS::AtLeastOnce));
                client.subscribe_many(filters).await.expect("subscribe");
            }
        });
        std::thread::sleep(Duration::from_secs(1));
        Self {
            client,
            lags,
            recording,
            task,
        }
    }

    fn record(&self) {
        self.recording.store(true, Ordering::Relaxed);
    }

    /// The lags noted since [`Listener::record`], sorted; stops noting them.
    fn take(&self) -> Vec<i64> {
        self.recording.store(false, Ordering::Relaxed);
        let mut lags = self
            .lags
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default();
        lags.sort_unstable();
        lags
    }

    fn stop(self, rt: &tokio::runtime::Runtime) {
        rt.block_on(async {
            let _ = self.client.disconnect().await;
        });
        self.task.abort();
    }
}

fn device_topics(stream: Stream, every: usize) -> Vec<String> {
    (0..stream.devices)
        .step_by(every)
        .map(|i| format!("devices/{}/up", device_num(i)))
        .collect()
}

/// A [`Listener`] of every device's topic, alone, while the broker also
/// carries a report for each message as it would with the engine: the lag
/// from a message's `ts` to its arrival at such a subscriber is the broker's
/// part of the engine's first hop.
fn client_side(rt: &tokio::runtime::Runtime, broker: &Broker, stream: Stream, seconds: u64) {
    let listener = Listener::start(rt, broker, "bench-client", &device_topics(stream, 1));
    let stop_stream = Arc::new(AtomicBool::new(false));
    publish(
        rt,
        broker.address,
        stream,
        Arc::clone(&stop_stream),
        Arc::new(AtomicU64::new(0)),
    );
    // The reports the engine would publish meanwhile, for the broker to carry too.
    let reports = Stream {
        target: Target::Reports,
        ..stream
    };
    publish(
        rt,
        broker.address,
        reports,
        Arc::clone(&stop_stream),
        Arc::new(AtomicU64::new(0)),
    );
    std::thread::sleep(Duration::from_secs(3));
    listener.record();
    std::thread::sleep(Duration::from_secs(seconds));
    let lags = listener.take();
    stop_stream.store(true, Ordering::Relaxed);
    listener.stop(rt);
    std::thread::sleep(Duration::from_secs(1));
    println!(
        "   client  {:>9.0}  {:>9.0}  {:>9}  {:>6}  {:>10}  {:>7}  {:>6.0}/{:>4.0}/{:>4.0}",
        stream.per_second(),
        lags.len() as f64 / seconds as f64,
        "-",
        "-",
        "-",
        "-",
        quantile(&lags, 0.5),
        quantile(&lags, 0.9),
        quantile(&lags, 0.99),
    );
    println!(
        "  (client: a subscriber of every device's topic that does nothing; its lag is the broker's)"
    );
}

/// What a device message says of when it was sent.
#[derive(serde::Deserialize)]
struct Sent {
    ts: i64,
}

fn engine_side(
    rt: &tokio::runtime::Runtime,
    broker: &Broker,
    stream: Stream,
    seconds: u64,
) -> Side {
    let scratch = Scratch::new("ingest-engine");
    let http = free_local_address();
    let config = engine_config(stream, broker.address, http, &scratch.0);
    let mut engine = Engine::start(&scratch.0, &config, http);
    engine.wait_up();
    // Its subscriptions are made once its device broker connection is up.
    std::thread::sleep(Duration::from_secs(2));
    // A listener of every tenth device's topic beside the engine: the broker's
    // first hop under the same load and on the same CPUs as the engine's.
    let listener = Listener::start(rt, broker, "bench-beside", &device_topics(stream, 10));
    let side = run_side(
        "engine",
        rt,
        broker,
        stream,
        engine.pid(),
        seconds,
        Some(&listener),
    );
    listener.stop(rt);
    engine.assert_running();
    if side.reported == 0 {
        println!(
            "  the engine reported nothing; its log's tail:\n{}",
            engine.log_tail()
        );
    }
    let metrics = common::http_get(http, "/metrics").unwrap_or_default();
    let dropped: f64 = metrics
        .lines()
        .filter(|l| {
            l.starts_with("sluice_device_messages_total") && l.contains("outcome=\"dropped\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    if dropped > 0.0 {
        println!("  (the engine dropped {dropped} messages over devices' rates)");
    }
    side
}

fn node_red_side(
    rt: &tokio::runtime::Runtime,
    broker: &Broker,
    stream: Stream,
    seconds: u64,
) -> Option<Side> {
    let install = match node_red::install() {
        Ok(install) => install,
        Err(reason) => {
            println!("node-red: left out: {reason}");
            return None;
        }
    };
    let scratch = Scratch::new("ingest-node-red");
    let flow = node_red::ingest_flow(broker.address);
    let peer = node_red::NodeRed::start(&install, &scratch.0, &flow, free_local_address());
    std::thread::sleep(Duration::from_secs(8));
    Some(run_side(
        "node-red",
        rt,
        broker,
        stream,
        peer.pid(),
        seconds,
        None,
    ))
}

/// A new version of `json` (the same bytes, another version) uploaded half-way
/// through a window of `rate` messages a second: every message one report.
fn swap_side(rt: &tokio::runtime::Runtime, broker: &Broker, rate: u64, seconds: u64) {
    let stream = Stream {
        devices: 250,
        rate: rate / 250,
        target: Target::Devices,
    };
    let scratch = Scratch::new("ingest-swap");
    let http = free_local_address();
    let config = engine_config(stream, broker.address, http, &scratch.0);
    let mut engine = Engine::start(&scratch.0, &config, http);
    engine.wait_up();
    std::thread::sleep(Duration::from_secs(2));
    let wasm = sluice::runtime::BUILTIN
        .iter()
        .find(|b| b.name == "json")
        .and_then(|b| b.wasm.inflate("json").ok())
        .expect("the built-in json decoder");
    let uploader = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(3 + seconds / 2));
        common::http_request(
            http,
            "PUT",
            "/components/json/2.0.0?kind=decoder",
            ADMIN,
            &wasm,
        )
    });
    let side = run_side("swap", rt, broker, stream, engine.pid(), seconds, None);
    let uploaded = uploader.join().expect("the upload");
    engine.assert_running();
    println!(
        "swap at {:.0} messages/s: upload {:?}; {} sent in the window, {} lost or decoded twice over the run",
        side.sent as f64 / side.secs,
        uploaded.map(|(status, _)| status),
        side.sent,
        side.sent - side.reported
    );
}

fn main() {
    let stream = Stream {
        devices: env_u64("SLUICE_BENCH_DEVICES", 1000) as usize,
        rate: env_u64("SLUICE_BENCH_RATE", 20),
        target: Target::Devices,
    };
    let seconds = env_u64("SLUICE_BENCH_SECONDS", 30);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let broker = Broker::start();
    println!(
        "ingest: {} devices x {} messages/s = {} messages/s of 10 values, {seconds} s a side",
        stream.devices,
        stream.rate,
        stream.per_second()
    );
    println!(
        "     side  msgs/s in  handled/s       lost    CPU%  us/message  RSS MiB  lag p50/p90/p99 ms"
    );
    // The broker alone: the stream straight onto the report topics, one hop
    // where a report takes two (device to subscriber, subscriber to broker).
    let direct = Stream {
        target: Target::Reports,
        ..stream
    };
    let alone = run_side(
        "broker",
        &rt,
        &broker,
        direct,
        std::process::id(),
        seconds.min(10),
        None,
    );
    alone.print();
    println!("  (broker: this process's CPU, the publishers' and the broker's own)");
    client_side(&rt, &broker, stream, seconds.min(10));
    let engine = engine_side(&rt, &broker, stream, seconds);
    engine.print();
    let peer = node_red_side(&rt, &broker, stream, seconds);
    if let Some(peer) = &peer {
        peer.print();
        println!(
            "  engine / node-red: CPU per message {:.3}x (target <= 0.3x)",
            engine.us_per_message() / peer.us_per_message()
        );
    }
    let mut lags = engine.lags.clone();
    lags.sort_unstable();
    let mut made = engine.made_lags.clone();
    made.sort_unstable();
    println!(
        "  beside the engine, a listener of every tenth device's topic: lag p50/p90/p99 {:.0}/{:.0}/{:.0} ms",
        quantile(&engine.beside_lags, 0.5),
        quantile(&engine.beside_lags, 0.9),
        quantile(&engine.beside_lags, 0.99)
    );
    println!(
        "  engine: from reading a message to its report at the broker p50/p90/p99 {:.0}/{:.0}/{:.0} ms",
        quantile(&made, 0.5),
        quantile(&made, 0.9),
        quantile(&made, 0.99)
    );
    println!(
        "  targets: {} messages/s sustained with {} lost (target: 20,000, none); lag p99 {:.0} ms (target <= 20 ms)",
        (engine.sent as f64 / engine.secs).round(),
        engine.sent - engine.reported,
        quantile(&lags, 0.99)
    );
    let swap_rate = env_u64("SLUICE_BENCH_SWAP_RATE", 5000);
    if swap_rate > 0 {
        swap_side(&rt, &broker, swap_rate, seconds.min(20));
    }
}
