//! Store and forward: what the write-ahead log costs, how fast a backlog drains,
//! and how much disk a value takes.
//!
//! `cargo bench -p sluice --bench wal`. Runs on a 2-worker tokio runtime; the WAL
//! lives in a scratch directory under `$TMPDIR` (the disk holding it is the disk
//! measured); Mosquitto (`/usr/sbin/mosquitto`, else `mosquitto` from PATH) runs
//! as a child process on a free 127.0.0.1 port, without persistence.
//!
//! Part 1, durable append: N reports of real report JSON (`sluice::report`, FLOAT
//! values) from D producer tasks (one per device) pushed as fast as the outbox
//! ring (10 000 messages, the engine's default) takes them into an `Outbox` over a
//! `RedbLog`, with group commit 20 ms (the default) and 0 ms; timed until
//! `stats().appended` reaches N. A producer that finds the ring nearly full waits
//! 1 ms instead of letting the overflow policy drop: the run checks nothing was
//! dropped. References on the same stream: the `Outbox` over `MemoryLog` (no
//! disk), and publishing without any WAL (one rumqttc `AsyncClient`, QoS 1,
//! inflight 100, to Mosquitto, timed until the last PUBACK). Each at 10 values per
//! report (N reports) and 100 values per report (N/10 reports). The CPU column is
//! this process's user + system time over wall time (200% = both cores; Mosquitto
//! not included).
//!
//! Part 1b, commit latency: one device pushes one report at a time and waits for
//! its commit before the next, at group commit 0 ms and 20 ms (up to 1000 reports
//! or 3 s each): the rate the WAL allows when nothing can be batched.
//!
//! Part 2, replay after an outage: M reports are committed to a `RedbLog` while no
//! broker runs; then Mosquitto starts and `Uplink::start` publishes the backlog;
//! timed from `Uplink::start` until the log is empty (every record acknowledged
//! and released). Nothing subscribes: Mosquitto only acknowledges.
//!
//! Part 3, size: the log's own byte count (encoded records) and the redb file's
//! allocated blocks, per value, after part 1's redb runs (the log still full), and
//! the file after the replay emptied the log.
//!
//! Every figure is the median of `SLUICE_BENCH_RUNS` runs, the variants interleaved.
//!
//! Environment (all optional): `SLUICE_BENCH_REPORTS` (200000),
//! `SLUICE_BENCH_DEVICES` (100), `SLUICE_BENCH_REPLAY_REPORTS` (100000; a tenth at
//! 100 values), `SLUICE_BENCH_RUNS` (3).
#![allow(clippy::print_stdout)]

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rumqttc::{AsyncClient, Event, Incoming, MqttOptions, Outgoing, QoS};
use sluice::config::{MqttConfig, OverflowPolicy};
use sluice::model::{Access, ByteOrder, DataType, Quality, Sample, TagSpec, Value};
use sluice::mqtt::{DeviceTopic, ReportHeader, Topics, payload};
use sluice::store::{FILE_NAME, Store};
use sluice::uplink::{Uplink, UplinkIdentity};
use sluice::wal::{MemoryLog, Message, MessageLog, Outbox, RedbLog};
use tokio::runtime::Runtime;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The engine's default `wal.ringCapacity`.
const RING_CAPACITY: usize = 10_000;
/// Publishes awaiting their PUBACK in the no-WAL baseline (as the uplink).
const INFLIGHT: u16 = 100;
/// Longest any timed phase may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// How long Mosquitto may take to listen.
const BROKER_START: Duration = Duration::from_secs(10);
/// Polling interval of the wait loops.
const POLL: Duration = Duration::from_millis(1);
const PRODUCT: &str = "P1";
const TS_MS: i64 = 1_700_000_000_000;

/// CPU seconds this process used so far (user + system, from `/proc/self/stat`,
/// in clock ticks of 1/100 s); 0 where procfs is missing.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    ticks as f64 / 100.0
}

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text:?} is not a non-negative integer")),
        Err(_) => default,
    }
}

/// A scratch directory under `$TMPDIR`, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("sluice-bench-wal-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A Mosquitto child process on a free port, killed on drop.
struct Broker {
    child: Child,
    port: u16,
    _dir: Scratch,
}

impl Broker {
    fn start() -> Self {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .expect("a free port on 127.0.0.1")
            .port();
        let dir = Scratch::new(&format!("mosquitto-{port}"));
        let config = dir.0.join("mosquitto.conf");
        // `user root`: started as root, Mosquitto would otherwise switch users.
        std::fs::write(
            &config,
            format!(
                "listener {port} 127.0.0.1\n\
                 allow_anonymous true\n\
                 persistence false\n\
                 max_queued_messages 1000000\n\
                 max_inflight_messages 0\n\
                 user root\n\
                 log_dest none\n"
            ),
        )
        .expect("write the Mosquitto config");
        let program = if Path::new("/usr/sbin/mosquitto").exists() {
            PathBuf::from("/usr/sbin/mosquitto")
        } else {
            PathBuf::from("mosquitto")
        };
        let child = Command::new(&program)
            .arg("-c")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("start {}: {e} (is mosquitto installed?)", program.display())
            });
        let broker = Self {
            child,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + BROKER_START;
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "Mosquitto does not listen on 127.0.0.1:{port} after {BROKER_START:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        broker
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The same reports, per device, in seq order.
struct Stream {
    values: usize,
    reports: usize,
    per_device: Vec<Vec<Message>>,
}

impl Stream {
    fn new(devices: usize, reports: usize, values: usize) -> Self {
        let tags: Vec<TagSpec> = (0..values)
            .map(|i| TagSpec {
                key: format!("tag{i:03}").into(),
                address: Default::default(),
                data_type: DataType::Float32,
                length: 0,
                byte_order: ByteOrder::Abcd,
                factor: 0.1,
                offset: 0.0,
                deadband: 0.0,
                access: Access::Read,
                settings: Vec::new(),
            })
            .collect();
        let per_device = (0..devices)
            .map(|d| {
                let device = format!("dev-{d:03}");
                let count = reports / devices + usize::from(d < reports % devices);
                let topic = Topics::new("").device(PRODUCT, &device, DeviceTopic::PropertyPost);
                (1..=count as u64)
                    .map(|seq| {
                        let ts_ms = TS_MS + seq as i64 * 1000;
                        let samples: Vec<Sample> = (0..values)
                            .map(|i| Sample {
                                tag: i as u32,
                                // A scaled register: 0.1 steps, as the `scale` stage makes.
                                value: Value::Float(
                                    ((seq as usize * 7 + i * 13 + d) % 10_000) as f64 * 0.1,
                                ),
                                quality: Quality::Good,
                                ts_ms,
                            })
                            .collect();
                        let header = ReportHeader {
                            product_id: PRODUCT,
                            device_num: &device,
                            timestamp_ms: ts_ms,
                            seq,
                            skipped: None,
                        };
                        let json = serde_json::to_vec(&payload(header, &samples, &tags, None))
                            .expect("a report serializes");
                        Message {
                            device: device.clone(),
                            seq,
                            topic: topic.clone(),
                            payload: json.into(),
                            retain: false,
                        }
                    })
                    .collect()
            })
            .collect();
        Self {
            values,
            reports,
            per_device,
        }
    }

    fn mean_payload(&self) -> f64 {
        let total: usize = self
            .per_device
            .iter()
            .flatten()
            .map(|m| m.payload.len())
            .sum();
        total as f64 / self.reports as f64
    }

    /// Every report, devices interleaved round-robin (the order polls produce).
    fn interleaved(&self) -> Vec<Message> {
        let longest = self.per_device.iter().map(Vec::len).max().unwrap_or(0);
        (0..longest)
            .flat_map(|i| self.per_device.iter().filter_map(move |d| d.get(i)))
            .cloned()
            .collect()
    }
}

/// An outbox with its committer running.
struct Running {
    outbox: Arc<Outbox>,
    shutdown: watch::Sender<bool>,
    committer: JoinHandle<()>,
}

impl Running {
    fn start(rt: &Runtime, log: Arc<dyn MessageLog>, group_commit: Duration) -> Self {
        let outbox = Outbox::with_log(log, OverflowPolicy::DropNewest, RING_CAPACITY, group_commit);
        let (shutdown, rx) = watch::channel(false);
        let committer = rt.spawn(Arc::clone(&outbox).run_committer(rx));
        Self {
            outbox,
            shutdown,
            committer,
        }
    }

    /// Pushes `stream` from one task per device; returns the time until every
    /// report was committed and the CPU seconds the process used meanwhile.
    fn fill(&self, rt: &Runtime, stream: &Stream) -> (Duration, f64) {
        let before = self.outbox.stats().appended.get();
        let target = before + stream.reports as u64;
        let inputs: Vec<Vec<Message>> = stream.per_device.clone();
        // Room for every producer to push once more without overflowing the ring.
        let room = RING_CAPACITY.saturating_sub(inputs.len()).max(1);
        let cpu = cpu_seconds();
        let start = Instant::now();
        let producers: Vec<JoinHandle<()>> = inputs
            .into_iter()
            .map(|messages| {
                let outbox = Arc::clone(&self.outbox);
                rt.spawn(async move {
                    for (i, message) in messages.into_iter().enumerate() {
                        while outbox.ring_len() >= room {
                            tokio::time::sleep(POLL).await;
                        }
                        outbox.push(message);
                        if i % 16 == 15 {
                            tokio::task::yield_now().await;
                        }
                    }
                })
            })
            .collect();
        let stats = self.outbox.stats();
        let elapsed = rt.block_on(async {
            loop {
                if stats.appended.get() >= target {
                    return (start.elapsed(), cpu_seconds() - cpu);
                }
                assert!(
                    start.elapsed() < RUN_TIMEOUT,
                    "only {} of {} reports committed after {RUN_TIMEOUT:?}",
                    stats.appended.get() - before,
                    stream.reports
                );
                tokio::time::sleep(POLL).await;
            }
        });
        rt.block_on(async {
            for producer in producers {
                producer.await.expect("a producer task panicked");
            }
        });
        let dropped = stats.dropped_newest.get() + stats.dropped_oldest.get();
        assert_eq!(
            dropped, 0,
            "the outbox dropped reports: the figures are void"
        );
        assert_eq!(stats.commit_errors.get(), 0, "WAL commits failed");
        elapsed
    }

    fn commits(&self) -> u64 {
        self.outbox.stats().commits.get()
    }

    fn stop(self, rt: &Runtime) {
        let _ = self.shutdown.send(true);
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(30), self.committer)
                .await
                .expect("the committer did not stop within 30 s")
                .expect("the committer panicked");
        });
    }
}

/// One durable (or memory) append run.
struct Append {
    seconds: f64,
    cpu_seconds: f64,
    commits: u64,
    log_bytes: u64,
    file_bytes: u64,
    file_allocated: u64,
}

fn append_redb(rt: &Runtime, stream: &Stream, group_commit: Duration) -> Append {
    let scratch = Scratch::new(&format!(
        "append-{}v-{}ms",
        stream.values,
        group_commit.as_millis()
    ));
    let store = Store::open(&scratch.0).expect("open the store");
    let log = Arc::new(RedbLog::open(&store, u64::MAX).expect("open the WAL"));
    let running = Running::start(rt, log, group_commit);
    let (elapsed, cpu_seconds) = running.fill(rt, stream);
    let commits = running.commits();
    let log_bytes = running.outbox.log().size().1;
    assert_eq!(running.outbox.log().size().0, stream.reports as u64);
    running.stop(rt);
    let file = scratch.0.join(FILE_NAME);
    let file_bytes = std::fs::metadata(&file).expect("the redb file").len();
    Append {
        seconds: elapsed.as_secs_f64(),
        cpu_seconds,
        commits,
        log_bytes,
        file_bytes,
        file_allocated: disk_bytes(&file),
    }
}

fn append_memory(rt: &Runtime, stream: &Stream, group_commit: Duration) -> Append {
    let log = Arc::new(MemoryLog::new(stream.reports));
    let running = Running::start(rt, log, group_commit);
    let (elapsed, cpu_seconds) = running.fill(rt, stream);
    let commits = running.commits();
    let log_bytes = running.outbox.log().size().1;
    running.stop(rt);
    Append {
        seconds: elapsed.as_secs_f64(),
        cpu_seconds,
        commits,
        log_bytes,
        file_bytes: 0,
        file_allocated: 0,
    }
}

/// Publishes `stream` with QoS 1 straight from memory, no WAL: seconds from the
/// first publish to the last PUBACK.
fn publish_direct(rt: &Runtime, port: u16, stream: &Stream) -> f64 {
    let messages = stream.interleaved();
    let total = messages.len();
    rt.block_on(async {
        let mut options = MqttOptions::new(
            format!("sluice-bench-direct-{}", std::process::id()),
            "127.0.0.1",
            port,
        );
        options
            .set_keep_alive(Duration::from_secs(60))
            .set_clean_session(true)
            .set_inflight(INFLIGHT)
            .set_request_channel_capacity(1000)
            .set_max_packet_size(1 << 20, 1 << 20);
        let (client, mut eventloop) = AsyncClient::new(options, 1000);
        let deadline = tokio::time::Instant::now() + RUN_TIMEOUT;
        loop {
            match tokio::time::timeout_at(deadline, eventloop.poll()).await {
                Ok(Ok(Event::Incoming(Incoming::ConnAck(_)))) => break,
                Ok(Ok(_)) => {}
                Ok(Err(error)) => panic!("cannot connect to Mosquitto: {error}"),
                Err(_) => panic!("no CONNACK from Mosquitto within {RUN_TIMEOUT:?}"),
            }
        }
        let start = Instant::now();
        let sender = client.clone();
        let publisher = tokio::spawn(async move {
            for message in messages {
                sender
                    .publish(message.topic, QoS::AtLeastOnce, false, message.payload)
                    .await
                    .expect("the client accepts the publish");
            }
        });
        let mut acked = 0;
        while acked < total {
            match tokio::time::timeout_at(deadline, eventloop.poll()).await {
                Ok(Ok(Event::Incoming(Incoming::PubAck(_)))) => acked += 1,
                Ok(Ok(_)) => {}
                Ok(Err(error)) => panic!("lost Mosquitto after {acked} PUBACKs: {error}"),
                Err(_) => panic!("only {acked} of {total} PUBACKs within {RUN_TIMEOUT:?}"),
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        publisher.await.expect("the publisher task panicked");
        let _ = client.try_disconnect();
        let bye = tokio::time::Instant::now() + Duration::from_secs(2);
        while let Ok(Ok(event)) = tokio::time::timeout_at(bye, eventloop.poll()).await {
            if matches!(event, Event::Outgoing(Outgoing::Disconnect)) {
                break;
            }
        }
        seconds
    })
}

/// Replay after an outage.
struct Replay {
    fill_seconds: f64,
    seconds: f64,
    cpu_seconds: f64,
    published: u64,
    acked: u64,
    log_bytes: u64,
    file_bytes_full: u64,
    file_bytes_empty: u64,
}

fn replay(rt: &Runtime, stream: &Stream) -> Replay {
    let scratch = Scratch::new(&format!("replay-{}v", stream.values));
    let store = Store::open(&scratch.0).expect("open the store");
    let log = Arc::new(RedbLog::open(&store, u64::MAX).expect("open the WAL"));
    let running = Running::start(rt, log, Duration::from_millis(20));
    // The outage: reports are committed while no broker runs.
    let fill_seconds = running.fill(rt, stream).0.as_secs_f64();
    let log_bytes = running.outbox.log().size().1;
    let file = scratch.0.join(FILE_NAME);
    let file_bytes_full = disk_bytes(&file);

    let broker = Broker::start();
    let config = MqttConfig {
        broker_port: broker.port,
        ..MqttConfig::default()
    };
    let client_id = format!("sluice-bench-replay-{}", std::process::id());
    let cpu = cpu_seconds();
    let start = Instant::now();
    let (uplink, publisher) = {
        let _context = rt.enter();
        Uplink::start(
            &config,
            UplinkIdentity {
                client_id: &client_id,
                edge_node_id: "",
                data_dir: std::path::Path::new("."),
                sole: true,
            },
            Arc::clone(&running.outbox),
            None,
            running.shutdown.subscribe(),
        )
    };
    let log = Arc::clone(running.outbox.log());
    let (seconds, cpu_seconds) = rt.block_on(async {
        loop {
            if log.size().0 == 0 {
                return (start.elapsed().as_secs_f64(), cpu_seconds() - cpu);
            }
            assert!(
                start.elapsed() < RUN_TIMEOUT,
                "{} of {} records still in the log after {RUN_TIMEOUT:?} (connected: {}, last error: {:?})",
                log.size().0,
                stream.reports,
                uplink.stats().connected(),
                uplink.stats().last_error()
            );
            tokio::time::sleep(POLL).await;
        }
    });
    let published = uplink.stats().published();
    let acked = uplink.stats().acked();
    running.stop(rt);
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), publisher)
            .await
            .expect("the publisher did not stop within 10 s")
            .expect("the publisher panicked");
    });
    drop(broker);
    let file_bytes_empty = disk_bytes(&file);
    Replay {
        fill_seconds,
        seconds,
        cpu_seconds,
        published,
        acked,
        log_bytes,
        file_bytes_full,
        file_bytes_empty,
    }
}

/// Bytes a file occupies on disk (allocated blocks: redb grows its file in steps,
/// and the file length counts space not yet written).
fn disk_bytes(path: &Path) -> u64 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .blocks()
        * 512
}

/// One report at a time from one device, each waiting for its commit before the
/// next is pushed: the commit latency (about one fsync when the group commit is
/// 0 ms). Returns reports and seconds; stops after `max` reports or `budget`.
fn one_at_a_time(
    rt: &Runtime,
    stream: &Stream,
    group_commit: Duration,
    max: usize,
    budget: Duration,
) -> (usize, f64) {
    let scratch = Scratch::new(&format!("latency-{}ms", group_commit.as_millis()));
    let store = Store::open(&scratch.0).expect("open the store");
    let log = Arc::new(RedbLog::open(&store, u64::MAX).expect("open the WAL"));
    let running = Running::start(rt, log, group_commit);
    let messages: Vec<Message> = stream.per_device[0].iter().take(max).cloned().collect();
    let outbox = Arc::clone(&running.outbox);
    let result = rt.block_on(async move {
        let start = Instant::now();
        let mut done = 0usize;
        for message in messages {
            // Nothing acknowledges it: it settles once written.
            let settled = outbox.push_settled(message);
            tokio::time::timeout(Duration::from_secs(10), settled.wait())
                .await
                .expect("no commit within 10 s");
            done += 1;
            if start.elapsed() >= budget {
                break;
            }
        }
        (done, start.elapsed().as_secs_f64())
    });
    running.stop(rt);
    result
}

/// The run with the median time.
fn median(mut runs: Vec<Append>) -> Append {
    runs.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
    runs.swap_remove(runs.len() / 2)
}

fn per_second(count: usize, seconds: f64) -> f64 {
    count as f64 / seconds
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

fn main() {
    let reports = env_usize("SLUICE_BENCH_REPORTS", 200_000).max(10);
    let devices = env_usize("SLUICE_BENCH_DEVICES", 100).max(1);
    let replay_reports = env_usize("SLUICE_BENCH_REPLAY_REPORTS", 100_000).max(10);
    let runs = env_usize("SLUICE_BENCH_RUNS", 3).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    println!(
        "WAL bench: {devices} devices, ring {RING_CAPACITY}, WAL under {}",
        std::env::temp_dir().display()
    );

    let zero = Duration::ZERO;
    let twenty = Duration::from_millis(20);
    let broker = Broker::start();
    let mut direct_rates = Vec::new();
    for (values, count) in [(10usize, reports), (100, reports / 10)] {
        let stream = Stream::new(devices, count, values);
        let n_values = (count * values) as f64;
        let mut direct = Vec::new();
        let mut variants: [Vec<Append>; 4] = Default::default();
        for _ in 0..runs {
            direct.push(publish_direct(&rt, broker.port, &stream));
            variants[0].push(append_redb(&rt, &stream, twenty));
            variants[1].push(append_redb(&rt, &stream, zero));
            variants[2].push(append_memory(&rt, &stream, twenty));
            variants[3].push(append_memory(&rt, &stream, zero));
        }
        direct.sort_by(f64::total_cmp);
        let direct = direct[direct.len() / 2];
        let direct_rate = per_second(count, direct);
        direct_rates.push((values, direct_rate));
        let names = [
            "redb WAL, group commit 20 ms",
            "redb WAL, group commit 0 ms",
            "memory ring, group commit 20 ms",
            "memory ring, group commit 0 ms",
        ];
        let medians: Vec<(&str, Append)> = names
            .into_iter()
            .zip(variants.into_iter().map(median))
            .collect();
        println!();
        println!(
            "== Part 1: append, {count} reports x {values} FLOAT values (payload {:.0} B mean), median of {runs}",
            stream.mean_payload()
        );
        println!(
            "{:<34} {:>11} {:>12} {:>8} {:>14} {:>8} {:>6}",
            "path", "reports/s", "values/s", "commits", "reports/commit", "vs MQTT", "CPU"
        );
        for (name, run) in &medians {
            let rate = per_second(count, run.seconds);
            println!(
                "{name:<34} {rate:>11.0} {:>12.0} {:>8} {:>14.0} {:>7.2}x {:>5.0}%",
                n_values / run.seconds,
                run.commits,
                count as f64 / run.commits.max(1) as f64,
                rate / direct_rate,
                100.0 * run.cpu_seconds / run.seconds
            );
        }
        println!(
            "{:<34} {direct_rate:>11.0} {:>12.0} {:>8} {:>14} {:>7.2}x",
            "MQTT QoS 1 publish, no WAL",
            n_values / direct,
            "-",
            "-",
            1.0
        );
        let memory = per_second(count, medians[3].1.seconds);
        println!(
            "ratios: redb 20 ms / memory ring 0 ms {:.2}, redb 0 ms / memory ring 0 ms {:.2}",
            per_second(count, medians[0].1.seconds) / memory,
            per_second(count, medians[1].1.seconds) / memory
        );
        println!("== Part 3: size, {values} values per report");
        for (name, run) in &medians[..2] {
            println!(
                "{name:<34} log {:.1} B/value ({:.1} MiB); redb file on disk {:.1} B/value ({:.1} MiB allocated, length {:.1} MiB)",
                run.log_bytes as f64 / n_values,
                mib(run.log_bytes),
                run.file_allocated as f64 / n_values,
                mib(run.file_allocated),
                mib(run.file_bytes)
            );
        }
        if values == 10 {
            println!("== Part 1b: one report at a time (each waits for its commit), 10 values");
            for group_commit in [zero, twenty] {
                let (done, seconds) =
                    one_at_a_time(&rt, &stream, group_commit, 1000, Duration::from_secs(3));
                println!(
                    "redb WAL, group commit {:>2} ms: {done} reports in {seconds:.2} s, {:.0} commits/s, {:.2} ms per report",
                    group_commit.as_millis(),
                    done as f64 / seconds,
                    1000.0 * seconds / done as f64
                );
            }
        }
    }
    drop(broker);

    for (values, count) in [(10usize, replay_reports), (100, replay_reports / 10)] {
        let stream = Stream::new(devices, count, values);
        let n_values = (count * values) as f64;
        let mut results: Vec<Replay> = (0..runs).map(|_| replay(&rt, &stream)).collect();
        results.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
        let result = results.swap_remove(results.len() / 2);
        let rate = per_second(count, result.seconds);
        let direct = direct_rates
            .iter()
            .find(|(v, _)| *v == values)
            .map_or(f64::NAN, |(_, r)| *r);
        println!();
        println!(
            "== Part 2: replay after an outage, {count} reports x {values} values (no subscriber), median of {runs}"
        );
        println!(
            "outage fill {:.2} s; backlog {:.1} MiB in the log, redb file {:.1} MiB on disk",
            result.fill_seconds,
            mib(result.log_bytes),
            mib(result.file_bytes_full)
        );
        println!(
            "replay {:.2} s: {rate:.0} reports/s, {:.0} values/s ({:.2}x the no-WAL publish), engine CPU {:.0}%; published {}, PUBACKs {} (one is the online status)",
            result.seconds,
            n_values / result.seconds,
            rate / direct,
            100.0 * result.cpu_seconds / result.seconds,
            result.published,
            result.acked
        );
        println!(
            "redb file after the log emptied: {:.1} MiB on disk (free pages are kept for reuse)",
            mib(result.file_bytes_empty)
        );
    }
}
