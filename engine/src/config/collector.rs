//! The `collector` section: how the engine runs, independent of any device. Every key
//! is optional; a missing section or key takes the default documented on its field.

use std::path::{Path, PathBuf};

use super::alarms::{self, AlarmConfig};
use super::commands::{self, CommandConfig};
use super::downlink::{self, DownlinkConfig};
use super::network::{self, HttpConfig, MqttConfig};
use super::read::{at_least, choice, ranged, read_at, text};
use super::store::{self, StoreConfig};
use crate::yaml::{Diagnostics, Fields, Node};

/// The `collector` section.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectorConfig {
    /// `workerThreads`: threads of the async runtime (at least 1; default 1). The
    /// engine runs at most one per CPU.
    pub worker_threads: u32,
    /// `perDeviceTimeoutMs`: time one device's polling round may take before it is cut
    /// short (at least 1; default 3000).
    pub per_device_timeout_ms: u64,
    /// `reportMode`: how samples are published (default BATCH).
    pub report_mode: ReportMode,
    /// `rawValue`: each value of a JSON report carries `rawValue`, the value
    /// as the device holds it before the pipeline's stages (default false).
    pub raw_value: bool,
    /// `mqtt`: the uplink broker.
    pub mqtt: MqttConfig,
    /// `http`: the local HTTP API; `None` (no server) when the block is absent.
    pub http: Option<HttpConfig>,
    /// `wal`: the write-ahead log that keeps samples while the broker is unreachable.
    pub wal: WalConfig,
    /// `backoff`: delays between reconnection attempts.
    pub backoff: BackoffConfig,
    /// `connections`: limits on open device connections.
    pub connections: ConnectionLimits,
    /// `heartbeatFailures`: consecutive failed heartbeats after which a device is
    /// reported OFFLINE (at least 1; default 3).
    pub heartbeat_failures: u32,
    /// `lease`: bookkeeping of device leases.
    pub lease: LeaseConfig,
    /// `alarms`: alarm delivery, escalation and the local day.
    pub alarms: AlarmConfig,
    /// `commands`: downlink commands and writes.
    pub commands: CommandConfig,
    /// `downlink`: who may send commands and configurations over MQTT.
    pub downlink: DownlinkConfig,
    /// `store`: where the state is kept (default: redb in `wal.dir`).
    pub store: StoreConfig,
    /// `mergeGap`: largest gap of unused registers/addresses allowed between two tags
    /// read in one request (default 16; 0 merges only adjacent tags). A channel may
    /// override it where its protocol supports that.
    pub merge_gap: u32,
}

impl Default for CollectorConfig {
    fn default() -> Self {
        Self {
            worker_threads: 1,
            per_device_timeout_ms: 3000,
            report_mode: ReportMode::Batch,
            raw_value: false,
            mqtt: MqttConfig::default(),
            http: None,
            wal: WalConfig::default(),
            backoff: BackoffConfig::default(),
            connections: ConnectionLimits::default(),
            heartbeat_failures: 3,
            lease: LeaseConfig::default(),
            alarms: AlarmConfig::default(),
            commands: CommandConfig::default(),
            downlink: DownlinkConfig::default(),
            store: StoreConfig::default(),
            merge_gap: 16,
        }
    }
}

/// `reportMode`: when and how samples go to the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReportMode {
    /// `SINGLE`: one message per sample.
    Single,
    /// `BATCH`: one message per device and polling round.
    Batch,
    /// `ON_CHANGE`: one message per device and round with only the samples whose
    /// value or quality differs from the last published (the deadband is the
    /// pipeline's, in every mode).
    OnChange,
}

impl ReportMode {
    /// Names as the file writes them.
    pub const NAMES: &'static [(&'static str, ReportMode)] = &[
        ("SINGLE", ReportMode::Single),
        ("BATCH", ReportMode::Batch),
        ("ON_CHANGE", ReportMode::OnChange),
    ];
}

/// `collector.wal`: the write-ahead log.
#[derive(Debug, Clone, PartialEq)]
pub struct WalConfig {
    /// `enabled`: keep samples on disk until the broker has them (default true).
    pub enabled: bool,
    /// `dir`: directory of the log files, as written (default `./data/wal`).
    pub dir: PathBuf,
    /// `maxFileSizeMb` (at least 1; default 64): accepted so that configurations
    /// written for the seed's collector, which rolled its files at this size,
    /// load unchanged; the log is one redb file and only bounds `totalQuotaMb`
    /// from below.
    pub max_file_size_mb: u64,
    /// `totalQuotaMb`: disk space the log's records may take (at least
    /// `maxFileSizeMb`; default 1024).
    pub total_quota_mb: u64,
    /// `overflowPolicy`: what gives when the quota or the ring is full (default
    /// DROP_OLDEST).
    pub overflow_policy: OverflowPolicy,
    /// `ringCapacity`: records held in memory on their way to disk (at least 1;
    /// default 10000).
    pub ring_capacity: u32,
    /// `groupCommitMs`: how long a report waits in memory for its PUBACK before
    /// it is written to disk (0 to 60000, default 20). A report acknowledged
    /// within it is never written; the reports that reach it together share
    /// one flush.
    pub group_commit_ms: u64,
}

/// The longest `groupCommitMs`: a crash loses at most this long of
/// unacknowledged reports.
pub const MAX_GROUP_COMMIT_MS: u64 = 60_000;

impl Default for WalConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            dir: PathBuf::from("./data/wal"),
            max_file_size_mb: 64,
            total_quota_mb: 1024,
            overflow_policy: OverflowPolicy::DropOldest,
            ring_capacity: 10_000,
            group_commit_ms: 20,
        }
    }
}

/// `collector.wal.overflowPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OverflowPolicy {
    /// `DROP_OLDEST`: discard the oldest records to make room.
    DropOldest,
    /// `DROP_NEWEST`: discard incoming records while full.
    DropNewest,
}

impl OverflowPolicy {
    /// Names as the file writes them.
    pub const NAMES: &'static [(&'static str, OverflowPolicy)] = &[
        ("DROP_OLDEST", OverflowPolicy::DropOldest),
        ("DROP_NEWEST", OverflowPolicy::DropNewest),
    ];
}

/// `collector.backoff`: delay before the n-th reconnection attempt is
/// `min(baseMs * 2^n, maxMs)`, randomly shortened by up to `jitter` of itself.
#[derive(Debug, Clone, PartialEq)]
pub struct BackoffConfig {
    /// `baseMs`: first delay (at least 1; default 1000).
    pub base_ms: u64,
    /// `maxMs`: longest delay (at least `baseMs`; default 60000).
    pub max_ms: u64,
    /// `jitter`: random fraction, 0 to 1 (default 0.3).
    pub jitter: f64,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            base_ms: 1000,
            max_ms: 60_000,
            jitter: 0.3,
        }
    }
}

/// `collector.connections`: limits on open device connections.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectionLimits {
    /// `maxTotal`: connections open at once, all devices together (at least 1;
    /// default 4096).
    pub max_total: u32,
    /// `maxPerHost`: connections open at once to one host (1 to `maxTotal`; default 64).
    pub max_per_host: u32,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_total: 4096,
            max_per_host: 64,
        }
    }
}

/// `collector.lease`.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseConfig {
    /// `scanIntervalMs`: how often expired leases are looked for (at least 1;
    /// default 10000).
    pub scan_interval_ms: u64,
}

impl Default for LeaseConfig {
    fn default() -> Self {
        Self {
            scan_interval_ms: 10_000,
        }
    }
}

/// Reads the `collector` section.
/// Secrets written as files are read from `base`, the configuration file's directory.
pub(super) fn read(node: &Node, base: &Path, errors: &mut Diagnostics) -> CollectorConfig {
    let d = CollectorConfig::default();
    let Some(mut f) = Fields::of(node, "collector", errors) else {
        return d;
    };
    let config = CollectorConfig {
        worker_threads: at_least(&mut f, "workerThreads", 1, d.worker_threads, errors),
        per_device_timeout_ms: at_least(
            &mut f,
            "perDeviceTimeoutMs",
            1,
            d.per_device_timeout_ms,
            errors,
        ),
        report_mode: choice(
            &mut f,
            "reportMode",
            ReportMode::NAMES,
            d.report_mode,
            errors,
        ),
        raw_value: read_at::<bool>(&mut f, "rawValue", errors).map_or(d.raw_value, |(on, _)| on),
        mqtt: f
            .node("mqtt")
            .map_or_else(MqttConfig::default, |n| network::read_mqtt(n, base, errors)),
        http: f.node("http").map(|n| network::read_http(n, base, errors)),
        wal: f
            .node("wal")
            .map_or_else(WalConfig::default, |n| read_wal(n, errors)),
        backoff: f
            .node("backoff")
            .map_or_else(BackoffConfig::default, |n| read_backoff(n, errors)),
        connections: f
            .node("connections")
            .map_or_else(ConnectionLimits::default, |n| read_connections(n, errors)),
        heartbeat_failures: at_least(&mut f, "heartbeatFailures", 1, d.heartbeat_failures, errors),
        lease: f
            .node("lease")
            .map_or_else(LeaseConfig::default, |n| read_lease(n, errors)),
        alarms: f
            .node("alarms")
            .map_or_else(AlarmConfig::default, |n| alarms::read(n, errors)),
        commands: f
            .node("commands")
            .map_or_else(CommandConfig::default, |n| commands::read(n, errors)),
        downlink: f
            .node("downlink")
            .map_or_else(DownlinkConfig::default, |n| downlink::read(n, errors)),
        store: f
            .node("store")
            .map_or_else(StoreConfig::default, |n| store::read(n, errors)),
        merge_gap: at_least(&mut f, "mergeGap", 0, d.merge_gap, errors),
    };
    f.finish(errors);
    config
}

fn read_wal(node: &Node, errors: &mut Diagnostics) -> WalConfig {
    let d = WalConfig::default();
    let Some(mut f) = Fields::of(node, "collector.wal", errors) else {
        return d;
    };
    let enabled = read_at::<bool>(&mut f, "enabled", errors).map_or(d.enabled, |(v, _)| v);
    let dir = text(&mut f, "dir", errors).map_or(d.dir, PathBuf::from);
    let max_file_size_mb = at_least(&mut f, "maxFileSizeMb", 1, d.max_file_size_mb, errors);
    let total_quota_mb = at_least_other(
        &mut f,
        "totalQuotaMb",
        d.total_quota_mb,
        "maxFileSizeMb",
        max_file_size_mb,
        errors,
    );
    let config = WalConfig {
        enabled,
        dir,
        max_file_size_mb,
        total_quota_mb,
        overflow_policy: choice(
            &mut f,
            "overflowPolicy",
            OverflowPolicy::NAMES,
            d.overflow_policy,
            errors,
        ),
        ring_capacity: at_least(&mut f, "ringCapacity", 1, d.ring_capacity, errors),
        group_commit_ms: ranged(
            &mut f,
            "groupCommitMs",
            0..=MAX_GROUP_COMMIT_MS,
            d.group_commit_ms,
            errors,
        ),
    };
    f.finish(errors);
    config
}

fn read_backoff(node: &Node, errors: &mut Diagnostics) -> BackoffConfig {
    let d = BackoffConfig::default();
    let Some(mut f) = Fields::of(node, "collector.backoff", errors) else {
        return d;
    };
    let base_ms = at_least(&mut f, "baseMs", 1, d.base_ms, errors);
    let max_ms = at_least_other(
        &mut f,
        "maxMs",
        d.max_ms.max(base_ms),
        "baseMs",
        base_ms,
        errors,
    );
    let jitter = ranged(&mut f, "jitter", 0.0..=1.0, d.jitter, errors);
    f.finish(errors);
    BackoffConfig {
        base_ms,
        max_ms,
        jitter,
    }
}

fn read_connections(node: &Node, errors: &mut Diagnostics) -> ConnectionLimits {
    let d = ConnectionLimits::default();
    let Some(mut f) = Fields::of(node, "collector.connections", errors) else {
        return d;
    };
    let max_total = at_least(&mut f, "maxTotal", 1, d.max_total, errors);
    let max_per_host = ranged(
        &mut f,
        "maxPerHost",
        1..=max_total,
        d.max_per_host.min(max_total),
        errors,
    );
    f.finish(errors);
    ConnectionLimits {
        max_total,
        max_per_host,
    }
}

fn read_lease(node: &Node, errors: &mut Diagnostics) -> LeaseConfig {
    let d = LeaseConfig::default();
    let Some(mut f) = Fields::of(node, "collector.lease", errors) else {
        return d;
    };
    let scan_interval_ms = at_least(&mut f, "scanIntervalMs", 1, d.scan_interval_ms, errors);
    f.finish(errors);
    LeaseConfig { scan_interval_ms }
}

/// Reads `key` (with its `default`), which may not be below the already read value of
/// `other`; the message names `other` so the user sees why.
fn at_least_other(
    f: &mut Fields<'_>,
    key: &'static str,
    default: u64,
    other: &'static str,
    floor: u64,
    errors: &mut Diagnostics,
) -> u64 {
    match read_at::<u64>(f, key, errors) {
        Some((value, pos)) if value < floor => {
            errors.push(
                pos,
                format!("`{key}`: must be at least `{other}` ({floor}), found {value}"),
            );
            default.max(floor)
        }
        Some((value, _)) => value,
        None => default.max(floor),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{errors_of, load_ok};
    use super::*;

    #[test]
    fn defaults_when_the_section_is_missing() {
        let c = load_ok("devices: []\n").collector;
        assert_eq!(c, CollectorConfig::default());
        assert_eq!(c.worker_threads, 1);
        assert_eq!(c.report_mode, ReportMode::Batch);
        assert_eq!(
            (c.mqtt.broker_host.as_str(), c.mqtt.broker_port),
            ("127.0.0.1", 1883)
        );
        assert_eq!(c.mqtt.client_id, None);
        assert_eq!(c.mqtt.qos, 1);
        assert_eq!(c.mqtt.topic_prefix, "");
        assert_eq!(c.http, None);
        assert_eq!(c.wal.overflow_policy, OverflowPolicy::DropOldest);
        assert_eq!((c.wal.ring_capacity, c.wal.group_commit_ms), (10_000, 20));
        assert_eq!(
            c.backoff,
            BackoffConfig {
                base_ms: 1000,
                max_ms: 60_000,
                jitter: 0.3
            }
        );
        assert_eq!(
            (c.connections.max_total, c.connections.max_per_host),
            (4096, 64)
        );
        assert_eq!(c.heartbeat_failures, 3);
        assert_eq!(c.lease.scan_interval_ms, 10_000);
        assert_eq!(c.merge_gap, 16);
        assert!(!c.raw_value);
    }

    #[test]
    fn extensions_load() {
        let c = load_ok(
            "collector:
  reportMode: ON_CHANGE
  rawValue: true
  mqtt: {brokerUrl: 'mqtt://broker.local', topicPrefix: site1/, qos: 0}
  http: {listen: '0.0.0.0:9000', adminToken: s3cret}
  wal: {overflowPolicy: DROP_NEWEST, ringCapacity: 500, groupCommitMs: 0}
  backoff: {baseMs: 200, maxMs: 5000, jitter: 0}
  connections: {maxTotal: 10, maxPerHost: 2}
  heartbeatFailures: 5
  lease: {scanIntervalMs: 500}
  mergeGap: 0
",
        )
        .collector;
        assert_eq!(c.report_mode, ReportMode::OnChange);
        assert!(c.raw_value);
        assert_eq!(
            (c.mqtt.broker_host.as_str(), c.mqtt.broker_port),
            ("broker.local", 1883)
        );
        assert_eq!(c.mqtt.topic_prefix, "site1/");
        assert_eq!(c.mqtt.qos, 0);
        let http = c.http.expect("http block");
        assert_eq!(
            http.listen,
            std::net::SocketAddr::from(([0, 0, 0, 0], 9000))
        );
        assert_eq!(http.admin_token.as_deref(), Some("s3cret"));
        assert_eq!(c.wal.overflow_policy, OverflowPolicy::DropNewest);
        assert_eq!((c.wal.ring_capacity, c.wal.group_commit_ms), (500, 0));
        assert_eq!(
            c.backoff,
            BackoffConfig {
                base_ms: 200,
                max_ms: 5000,
                jitter: 0.0
            }
        );
        assert_eq!(
            (c.connections.max_total, c.connections.max_per_host),
            (10, 2)
        );
        assert_eq!(c.heartbeat_failures, 5);
        assert_eq!(c.lease.scan_interval_ms, 500);
        assert_eq!(c.merge_gap, 0);
    }

    #[test]
    fn every_bad_value_is_reported() {
        let errors = errors_of(
            "collector:
  workerThreads: 0
  perDeviceTimeoutMs: 0
  reportMode: SOMETIMES
  mqtt: {keepAliveSec: 0, clientId: '', topicPrefix: 'a/#', port: 1}
  http: {listen: 'localhost:8080'}
  wal: {maxFileSizeMb: 64, totalQuotaMb: 10, overflowPolicy: DROP_ALL, ringCapacity: 0}
  backoff: {baseMs: 5000, maxMs: 1000, jitter: 1.5}
  connections: {maxTotal: 8, maxPerHost: 9}
  heartbeatFailures: 0
  lease: {scanIntervalMs: 0}
  mergeGap: -1
",
        );
        let text = errors.to_string();
        let expected = [
            "gw.yaml:2:18: `workerThreads`: must be at least 1, found 0",
            "gw.yaml:3:23: `perDeviceTimeoutMs`: must be at least 1, found 0",
            "gw.yaml:4:15: `reportMode`: unknown value `SOMETIMES`: expected SINGLE | BATCH | ON_CHANGE",
            "gw.yaml:5:24: `keepAliveSec`: must be at least 1, found 0",
            "gw.yaml:5:37: `clientId`: must not be empty",
            "gw.yaml:5:54: `topicPrefix`: must not contain the MQTT wildcards `+` or `#`",
            "gw.yaml:5:61: unknown key `port` in collector.mqtt; expected one of:",
            "gw.yaml:6:18: `listen`: `localhost:8080` is not a socket address",
            "gw.yaml:7:42: `totalQuotaMb`: must be at least `maxFileSizeMb` (64), found 10",
            "gw.yaml:7:62: `overflowPolicy`: unknown value `DROP_ALL`: expected DROP_OLDEST | DROP_NEWEST",
            "gw.yaml:7:86: `ringCapacity`: must be at least 1, found 0",
            "gw.yaml:8:34: `maxMs`: must be at least `baseMs` (5000), found 1000",
            "gw.yaml:8:48: `jitter`: must be at most 1, found 1.5",
            "gw.yaml:9:42: `maxPerHost`: must be at most 8, found 9",
            "gw.yaml:10:22: `heartbeatFailures`: must be at least 1, found 0",
            "gw.yaml:11:27: `scanIntervalMs`: must be at least 1, found 0",
            "gw.yaml:12:13: `mergeGap`: -1 is out of range",
        ];
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), expected.len(), "{text}");
        for (line, want) in lines.iter().zip(expected) {
            assert!(
                line.starts_with(want),
                "got {line}\nwant {want}\nall:\n{text}"
            );
        }
    }
}
