//! The gateway's device configuration file: which devices to collect from, over which
//! channels, which tags to read, and how the collector itself behaves (MQTT uplink,
//! write-ahead log, limits).
//!
//! The file is YAML in the users' existing camelCase format:
//!
//! ```yaml
//! collector: { workerThreads: 32, mqtt: { brokerUrl: tcp://127.0.0.1:1883 } }
//! tenants: [ { tenantId: 1, name: plant-a, tokens: [secret] } ]
//! devices:
//!   - deviceId: dev-1
//!     productId: P1001
//!     deviceNum: DEV0001
//!     channels:
//!       - { channelId: ch-1, protocol: modbus-tcp, host: 10.0.0.5, tags: [...] }
//! ```
//!
//! Loading never stops at the first mistake: every problem (unknown key, bad value,
//! missing key, duplicate name) is collected with its `LINE:COLUMN` and the whole list
//! is returned as [`Diagnostics`], so a user fixes a file in one go.
//!
//! Only `collector`, `tenants`, `products` and `devices` are allowed at the top
//! level; all of them are optional (a missing `collector` means all defaults,
//! missing `devices` means no devices).

mod alarms;
mod channel;
mod collector;
mod commands;
mod device;
mod downlink;
mod fence;
mod keyfile;
mod network;
mod product;
mod protocol;
mod push_channel;
mod read;
mod secret_text;
mod secrets;
mod sparkplug;
mod store;
mod tag;
mod tenant;

use std::path::Path;

use crate::model::Protocols;
use crate::yaml::{self, Diagnostics, Fields, Kind, Node, Pos};

pub use alarms::AlarmConfig;
pub use channel::ChannelConfig;
pub use collector::{
    BackoffConfig, CollectorConfig, ConnectionLimits, LeaseConfig, OverflowPolicy, ReportMode,
    WalConfig,
};
pub use commands::CommandConfig;
pub use device::DeviceConfig;
pub use downlink::DownlinkConfig;
pub use fence::{FenceEntry, FenceHost, FenceTarget};
pub use keyfile::{KeyFile, KeySource, MIN_KEY_BYTES, read_keys};
pub use network::{HttpConfig, HttpTls, MqttConfig, NodeToken, TlsConfig};
pub use product::ProductConfig;
pub use protocol::{ChannelOption, ChannelProtocol, channel_settings};
pub use push_channel::{DEFAULT_DECODER, DeviceBroker, MQTT, PushChannel};
pub use sparkplug::{SparkplugConfig, UplinkPayload};
pub use store::{StoreConfig, StoreKind};
pub use tag::{TagConfig, TagPositions};
pub use tenant::{DEFAULT_RULES, RecipientConfig, TenantConfig, TenantLimits};

/// Everything the configuration file says, checked and typed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GatewayConfig {
    /// The `collector` section: how the engine itself runs.
    pub collector: CollectorConfig,
    /// The `tenants` section: who may use the gateway's HTTP API, and for which devices.
    pub tenants: Vec<TenantConfig>,
    /// The `products` section: defaults of each product's devices.
    pub products: Vec<ProductConfig>,
    /// The `devices` section, in file order (disabled devices included).
    pub devices: Vec<DeviceConfig>,
}

impl GatewayConfig {
    /// Every section but `devices`: what the engine's services read of the
    /// configuration, without a second copy of a large fleet's device list.
    pub fn without_devices(&self) -> GatewayConfig {
        GatewayConfig {
            collector: self.collector.clone(),
            tenants: self.tenants.clone(),
            products: self.products.clone(),
            devices: Vec::new(),
        }
    }

    /// The device with this `deviceId`.
    pub fn device(&self, device_id: &str) -> Option<&DeviceConfig> {
        self.devices.iter().find(|d| d.device_id == device_id)
    }

    /// The product with this `productId`, if the `products` section lists it.
    pub fn product(&self, product_id: &str) -> Option<&ProductConfig> {
        self.products.iter().find(|p| p.product_id == product_id)
    }

    /// The tenant with this `tenantId`.
    pub fn tenant(&self, tenant_id: u32) -> Option<&TenantConfig> {
        self.tenants.iter().find(|t| t.tenant_id == tenant_id)
    }
}

/// Gives every device that names no pipeline its product's, else its tenant's,
/// else the built-in `default`.
pub fn resolve_pipelines(
    devices: &mut [DeviceConfig],
    products: &[ProductConfig],
    tenants: &[TenantConfig],
) {
    for device in devices.iter_mut().filter(|d| !d.pipeline_named) {
        let product = products
            .iter()
            .find(|p| p.product_id == device.product_id)
            .and_then(|p| p.pipeline.clone());
        let tenant = || {
            tenants
                .iter()
                .find(|t| t.tenant_id == device.tenant_id)
                .and_then(|t| t.pipeline.clone())
        };
        device.pipeline = product
            .or_else(tenant)
            .unwrap_or_else(|| "default".to_owned());
    }
}

/// Reads one `devices` entry on its own (a device pushed by the platform) as the
/// file would, with the defaults, tenants and products of `context`.
///
/// # Errors
/// Every problem of the entry, at its position.
pub fn read_device(
    file: &str,
    entry: &Node,
    context: &GatewayConfig,
    protocols: &Protocols,
) -> Result<DeviceConfig, Diagnostics> {
    let mut errors = Diagnostics::new(file);
    let list = Node {
        pos: entry.pos,
        kind: Kind::Seq(vec![entry.clone()]),
    };
    let mut devices = device::read_all(
        &list,
        &context.collector,
        &context.tenants,
        protocols,
        None,
        &mut errors,
    );
    resolve_pipelines(&mut devices, &context.products, &context.tenants);
    match devices.pop() {
        Some(device) if errors.is_empty() => Ok(device),
        _ => Err(errors.sorted()),
    }
}

/// Checks every channel of `config` again against `protocols` (new versions
/// of codecs may declare their settings otherwise) and takes their settings.
///
/// # Errors
/// Every problem, at its position in `file`; `config` is then half-checked.
pub fn rebind(
    config: &mut GatewayConfig,
    protocols: &Protocols,
    file: &str,
) -> Result<(), Diagnostics> {
    let mut errors = Diagnostics::new(file);
    let context = protocol::ChannelContext {
        merge_gap: config.collector.merge_gap,
        protocols,
        base: None,
    };
    // An MQTT channel's protocol is the engine's: no codec declares it.
    let polled = config
        .devices
        .iter_mut()
        .flat_map(|d| &mut d.channels)
        .filter(|c| c.push.is_none());
    for channel in polled {
        match protocols.get(channel.protocol.name()) {
            Some(declared) => channel.rebind(declared, &context, &mut errors),
            None => errors.push(
                channel.pos,
                format!(
                    "protocol {}: no codec speaks it any more (the gateway speaks {})",
                    channel.protocol,
                    protocols.names()
                ),
            ),
        }
    }
    errors.into_result(())
}

/// The text of the configuration file at `path`, or the problem reading it.
fn read_file(path: &Path) -> Result<String, Diagnostics> {
    std::fs::read_to_string(path).map_err(|error| {
        let mut errors = Diagnostics::new(path.display().to_string());
        errors.push(
            Pos::default(),
            format!("cannot read the configuration file: {error}"),
        );
        errors
    })
}

/// Reads and checks the configuration file at `path`; its channels may name
/// `protocols`.
///
/// # Errors
/// Every problem found, each at its position; the file name in the diagnostics is
/// `path` as given. A file that cannot be read gives one diagnostic at 0:0.
pub fn load_file(path: &Path, protocols: &Protocols) -> Result<GatewayConfig, Diagnostics> {
    Document::read(path)?.config(protocols)
}

/// Reads and checks only the `collector` section of the configuration file at
/// `path` (and the key files it names).
///
/// # Errors
/// A file that cannot be read, a YAML syntax error, or the section's problems.
pub fn load_collector(path: &Path) -> Result<CollectorConfig, Diagnostics> {
    Document::read(path)?.collector()
}

/// Reads and checks a configuration document, and the key files it names (a
/// relative path from the directory of `file`, the name used in diagnostics);
/// its channels may name `protocols`.
///
/// # Errors
/// A YAML syntax error, or else every problem found in the document, in line order.
pub fn load_str(
    file: &str,
    text: &str,
    protocols: &Protocols,
) -> Result<GatewayConfig, Diagnostics> {
    Document::parse(file, text)?.config(protocols)
}

/// A configuration file parsed, not yet checked: its `collector` section can
/// be read first, to find the gateway's components (and so the protocols its
/// channels may name), without parsing the file twice.
#[derive(Debug)]
pub struct Document {
    /// The file's name, as diagnostics print it.
    file: String,
    root: Node,
}

impl Document {
    /// Reads and parses the file at `path`.
    ///
    /// # Errors
    /// A file that cannot be read (one diagnostic at 0:0), or a YAML syntax error.
    pub fn read(path: &Path) -> Result<Self, Diagnostics> {
        Self::parse(&path.display().to_string(), &read_file(path)?)
    }

    /// Parses `text`, named `file` in diagnostics.
    ///
    /// # Errors
    /// A YAML syntax error.
    pub fn parse(file: &str, text: &str) -> Result<Self, Diagnostics> {
        Ok(Self {
            file: file.to_owned(),
            root: yaml::parse(file, text)?,
        })
    }

    /// The `collector` section, checked, with the key files it names.
    ///
    /// # Errors
    /// The section's problems.
    pub fn collector(&self) -> Result<CollectorConfig, Diagnostics> {
        let mut errors = Diagnostics::new(&self.file);
        let mut collector = self
            .root
            .as_map()
            .and_then(|entries| entries.iter().find(|(k, _)| k.name == "collector"))
            .map_or_else(CollectorConfig::default, |(_, node)| {
                collector::read(node, self.base(), &mut errors)
            });
        secrets::load(&mut collector, &mut [], self.base(), &mut errors);
        if let Some(tls) = &mut collector.mqtt.tls {
            tls.resolve(self.base());
        }
        errors.into_result(collector)
    }

    /// The whole configuration, checked, with the key files it names; its
    /// channels may name `protocols`.
    ///
    /// # Errors
    /// Every problem found in the document, in line order.
    pub fn config(&self, protocols: &Protocols) -> Result<GatewayConfig, Diagnostics> {
        let (config, errors) = self.config_and_problems(protocols);
        errors.into_result(config)
    }

    /// What [`Document::config`] reads, and every problem found: the parts
    /// with problems left out (a tag, a channel) or at their defaults, so the
    /// components can be asked about the rest before the file is refused.
    pub fn config_and_problems(&self, protocols: &Protocols) -> (GatewayConfig, Diagnostics) {
        let mut errors = Diagnostics::new(&self.file);
        let mut config = read_gateway(&self.root, self.base(), protocols, &mut errors);
        // Key files are read from beside the configuration file.
        secrets::load(
            &mut config.collector,
            &mut config.tenants,
            self.base(),
            &mut errors,
        );
        if let Some(tls) = &mut config.collector.mqtt.tls {
            tls.resolve(self.base());
        }
        (config, errors)
    }

    /// The directory key files are read from: the configuration file's.
    fn base(&self) -> &Path {
        Path::new(&self.file).parent().unwrap_or(Path::new(""))
    }
}

fn read_gateway(
    root: &Node,
    base: &Path,
    protocols: &Protocols,
    errors: &mut Diagnostics,
) -> GatewayConfig {
    // An empty file is a gateway with default settings and nothing to collect.
    if root.kind == Kind::Null {
        return GatewayConfig::default();
    }
    let Some(mut fields) = Fields::of(root, "configuration", errors) else {
        return GatewayConfig::default();
    };
    // Order matters: devices refer to the collector's defaults and to the tenants.
    let collector = fields
        .node("collector")
        .map_or_else(CollectorConfig::default, |node| {
            collector::read(node, base, errors)
        });
    let tenants = fields
        .node("tenants")
        .map(|node| tenant::read_all(node, base, errors))
        .unwrap_or_default();
    let products = fields
        .node("products")
        .map(|node| product::read_all(node, errors))
        .unwrap_or_default();
    let mut devices = fields
        .node("devices")
        .map(|node| device::read_all(node, &collector, &tenants, protocols, Some(base), errors))
        .unwrap_or_default();
    fields.finish(errors);
    resolve_pipelines(&mut devices, &products, &tenants);
    GatewayConfig {
        collector,
        tenants,
        products,
        devices,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::{Access, ByteOrder, DataType, SettingValue};

    const SEED: &str = include_str!("testdata/seed.yaml");

    /// The protocols of the built-in codecs, asked of them once for all tests.
    pub(crate) fn protocols() -> &'static Protocols {
        use crate::runtime::{Registry, Runtime, RuntimeConfig};
        static PROTOCOLS: std::sync::OnceLock<Protocols> = std::sync::OnceLock::new();
        PROTOCOLS.get_or_init(|| {
            let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
            Registry::with_builtins(runtime)
                .expect("built-in components")
                .protocols()
        })
    }

    /// Loads `text` with the built-in protocols.
    pub(crate) fn load_str(file: &str, text: &str) -> Result<GatewayConfig, Diagnostics> {
        super::load_str(file, text, protocols())
    }

    /// Loads `text`, expecting failure; returns the rendered diagnostics.
    /// Loads `text`, expecting problems: their words (whose they are is
    /// `problems_name_their_device_channel_and_tag`'s).
    pub(super) fn errors_of(text: &str) -> Diagnostics {
        match load_str("gw.yaml", text) {
            Ok(config) => panic!("expected errors, loaded {config:#?}"),
            Err(errors) => errors.unnamed(),
        }
    }

    /// Loads `text`, expecting success.
    pub(super) fn load_ok(text: &str) -> GatewayConfig {
        match load_str("gw.yaml", text) {
            Ok(config) => config,
            Err(errors) => panic!("unexpected errors:\n{errors}"),
        }
    }

    #[test]
    fn a_device_without_a_pipeline_takes_its_products_then_its_tenants() {
        let channel = "channels: [ { channelId: c, protocol: modbus-tcp, host: 127.0.0.1, tags: [ { key: t, address: '40001', dataType: INT16 } ] } ]";
        let text = format!(
            "tenants:\n  - {{ tenantId: 1, name: t, pipeline: tenant-p }}\nproducts:\n  - {{ productId: P1, pipeline: product-p }}\ndevices:\n  - {{ deviceId: a, productId: P1, deviceNum: A, tenantId: 1, {channel} }}\n  - {{ deviceId: b, productId: P2, deviceNum: B, tenantId: 1, {channel} }}\n  - {{ deviceId: c, productId: P2, deviceNum: C, {channel} }}\n  - {{ deviceId: d, productId: P1, deviceNum: D, tenantId: 1, pipeline: own, {channel} }}\n"
        );
        let text = text.as_str();
        let config = load_str("t.yaml", text).expect("valid");
        let pipelines: Vec<&str> = config.devices.iter().map(|d| d.pipeline.as_str()).collect();
        assert_eq!(pipelines, ["product-p", "tenant-p", "default", "own"]);
        // Resolved again against other tenants (a running gateway's), only the
        // devices that name no pipeline change.
        let mut devices = config.devices.clone();
        resolve_pipelines(&mut devices, &config.products, &[]);
        let pipelines: Vec<&str> = devices.iter().map(|d| d.pipeline.as_str()).collect();
        assert_eq!(pipelines, ["product-p", "default", "default", "own"]);
    }

    #[test]
    fn seed_document_loads_unchanged() {
        let config = load_ok(SEED);
        let c = &config.collector;
        assert_eq!(c.worker_threads, 32);
        assert_eq!(c.per_device_timeout_ms, 3000);
        assert_eq!(c.report_mode, ReportMode::Batch);
        assert_eq!(c.mqtt.broker_host, "127.0.0.1");
        assert_eq!(c.mqtt.broker_port, 1883);
        assert_eq!(c.mqtt.client_id.as_deref(), Some("fastbee-collector-01"));
        assert_eq!(c.mqtt.username.as_deref(), Some("collector"));
        assert_eq!(c.mqtt.password.as_deref(), Some("******"));
        assert_eq!(c.mqtt.qos, 1);
        assert_eq!(c.mqtt.keep_alive_sec, 60);
        assert!(c.wal.enabled);
        assert_eq!(c.wal.dir, std::path::PathBuf::from("./data/wal"));
        assert_eq!(c.wal.max_file_size_mb, 64);
        assert_eq!(c.wal.total_quota_mb, 1024);
        assert_eq!(c.http, None);
        assert!(config.tenants.is_empty());

        let ids: Vec<_> = config
            .devices
            .iter()
            .map(|d| d.device_id.as_str())
            .collect();
        assert_eq!(ids, ["dev-s7-1200-01", "dev-mc-q-01", "dev-modbus-01"]);

        let s7 = &config.devices[0];
        assert_eq!(
            (s7.product_id.as_str(), s7.device_num.as_str()),
            ("P1001", "DEV0001")
        );
        assert!(s7.enabled);
        assert_eq!(s7.pipeline, "default");
        let ch = &s7.channels[0];
        assert_eq!(ch.protocol.name(), "s7");
        assert_eq!((ch.host.as_str(), ch.port), ("192.168.1.110", 102));
        assert_eq!(ch.heartbeat_ms, 3000);
        assert_eq!(
            ch.setting("plcType"),
            Some(&SettingValue::Text("S1200".into()))
        );
        assert_eq!(ch.setting("rack"), Some(&SettingValue::Int(0)));
        assert_eq!(ch.setting("slot"), Some(&SettingValue::Int(1)));
        let tags: Vec<_> = s7.tags().collect();
        assert_eq!(tags.len(), 3);
        assert_eq!(tags[0].spec.data_type, DataType::Float32);
        assert_eq!(tags[0].spec.factor, 0.1);
        assert_eq!(tags[0].spec.deadband, 0.5);
        assert_eq!(tags[1].spec.address, "DB1.6.0");
        assert_eq!(tags[1].period_ms, 500);
        assert_eq!(tags[2].period_ms, 0);
        assert_eq!(tags[2].spec.access, Access::ReadWrite);
        assert!(tags[2].reads_back());

        let mc = &config.devices[1].channels[0];
        assert_eq!(mc.protocol.name(), "mc");
        assert_eq!(mc.port, 6000);
        assert_eq!(
            mc.setting("series"),
            Some(&SettingValue::Text("Q_L".into()))
        );
        assert_eq!(
            mc.setting("frameType"),
            Some(&SettingValue::Text("FRAME_3E".into()))
        );
        assert_eq!(mc.setting("monitorTimer"), Some(&SettingValue::Int(10)));
        assert_eq!(mc.byte_order, None);
        assert_eq!(mc.tags[0].spec.data_type, DataType::Int32);

        let modbus = &config.devices[2];
        let ch = &modbus.channels[0];
        assert_eq!(ch.protocol.name(), "modbus-tcp");
        assert_eq!(ch.byte_order, Some(ByteOrder::Cdab));
        assert_eq!(ch.setting("unitId"), Some(&SettingValue::Int(1)));
        assert_eq!(
            ch.setting("byteOrder"),
            Some(&SettingValue::Text("CDAB".into()))
        );
        let flow = &ch.tags[0];
        assert_eq!(flow.spec.key, "flow");
        assert_eq!(flow.spec.address, "40001");
        assert_eq!(flow.spec.factor, 0.01);
        assert_eq!(flow.spec.byte_order, ByteOrder::Cdab);
        assert!(!flow.byte_order_override);
        assert_eq!(
            ch.tag_positions[0].entry,
            Pos {
                line: 89,
                column: 13
            }
        );
        assert_eq!(
            ch.tag_positions[0].address,
            Pos {
                line: 90,
                column: 22
            }
        );
        let valve = &ch.tags[1];
        assert_eq!(valve.spec.address, "00001");
        assert!(valve.reads_back());
        assert_eq!(valve.spec.access, Access::ReadWrite);
    }

    /// A device with an unknown key and a tag with an unknown type.
    const TWO_MISTAKES: &str = "\
devices:
  - deviceId: d1
    productId: P1
    deviceNum: N1
    colour: red
    channels:
      - channelId: c1
        protocol: modbus-tcp
        host: 10.0.0.1
        tags:
          - key: t1
            address: '40001'
            dataType: FLOAT
";

    #[test]
    fn two_mistakes_give_exactly_two_diagnostics() {
        let errors = errors_of(TWO_MISTAKES);
        assert_eq!(errors.len(), 2, "{errors}");
        let lines: Vec<String> = errors.to_string().lines().map(str::to_owned).collect();
        assert!(
            lines[0].starts_with("gw.yaml:5:5: unknown key `colour` in device; expected one of:"),
            "{}",
            lines[0]
        );
        assert_eq!(
            lines[1],
            "gw.yaml:13:23: `dataType`: unknown value `FLOAT`: expected BOOL | INT16 | UINT16 \
             | INT32 | UINT32 | INT64 | UINT64 | FLOAT32 | FLOAT64 | BCD16 | BCD32 | STRING"
        );
    }

    #[test]
    fn problems_name_their_device_channel_and_tag() {
        // A third mistake: the channel's host left out.
        let text = TWO_MISTAKES.replace("        host: 10.0.0.1\n", "");
        let Err(errors) = load_str("gw.yaml", &text) else {
            panic!("refused");
        };
        let whose: Vec<(u32, &str)> = errors
            .items()
            .iter()
            .map(|d| (d.pos.line, d.whose.as_str()))
            .collect();
        assert_eq!(
            whose,
            [
                (5, "device `d1`"),
                (7, "device `d1`, channel `c1`"),
                (12, "device `d1`, channel `c1`, tag `t1`"),
            ]
        );
        assert!(
            errors.to_string().contains(
                "gw.yaml:7:9: channel: missing required key `host` (device `d1`, channel `c1`)"
            ),
            "{errors}"
        );
    }

    #[test]
    fn empty_document_is_all_defaults() {
        let config = load_ok("");
        assert_eq!(config, GatewayConfig::default());
        assert_eq!(load_ok("collector:\n"), GatewayConfig::default());
        assert_eq!(load_ok("devices: []\n"), GatewayConfig::default());
    }

    #[test]
    fn unknown_top_level_key() {
        let errors = errors_of("collecter: {}\n");
        assert_eq!(
            errors.to_string(),
            "gw.yaml:1:1: unknown key `collecter` in configuration; expected one of: \
             collector, devices, products, tenants"
        );
    }

    #[test]
    fn syntax_error_is_one_diagnostic() {
        let errors = errors_of("devices: [\n");
        assert_eq!(errors.len(), 1);
        assert!(errors.to_string().contains("YAML syntax"), "{errors}");
    }

    #[test]
    fn unreadable_file_is_one_diagnostic_at_0_0() {
        let path = Path::new("/nonexistent/sluice/devices.yaml");
        let errors = match load_file(path, protocols()) {
            Ok(_) => panic!("a missing file loaded"),
            Err(errors) => errors,
        };
        assert_eq!(errors.len(), 1);
        assert_eq!(errors.items()[0].pos, Pos::default());
        assert!(
            errors
                .to_string()
                .starts_with("/nonexistent/sluice/devices.yaml:0:0: cannot read"),
            "{errors}"
        );
    }

    #[test]
    fn load_file_reads_a_file() {
        let path = std::env::temp_dir().join(format!("sluice-config-{}.yaml", std::process::id()));
        std::fs::write(&path, SEED).expect("write the seed");
        let loaded = load_file(&path, protocols());
        let _ = std::fs::remove_file(&path);
        assert_eq!(loaded.map(|c| c.devices.len()), Ok(3));
    }

    #[test]
    fn tenants_load_and_are_checked() {
        let config = load_ok(
            "tenants:\n  - {tenantId: 1, name: a, tokens: [t1, t2]}\n  - {tenantId: 2, name: b}\n",
        );
        assert_eq!(config.tenants.len(), 2);
        assert_eq!(config.tenant(1).map(|t| t.tokens.len()), Some(2));
        assert_eq!(config.tenant(2).map(|t| t.name.as_str()), Some("b"));

        let errors = errors_of(
            "tenants:\n  - {tenantId: 1, name: a, tokens: [t1]}\n  - {tenantId: 1, name: b, tokens: [t1, '']}\n  - {tenantId: 0, name: c}\n",
        );
        let text = errors.to_string();
        assert_eq!(errors.len(), 4, "{text}");
        assert!(
            text.contains("gw.yaml:3:16: duplicate tenantId 1 (first at 2:16)"),
            "{text}"
        );
        assert!(
            text.contains("gw.yaml:3:37: `tokens`: this token is already given at 2:37"),
            "{text}"
        );
        assert!(
            text.contains("gw.yaml:3:41: `tokens`: a token must not be empty"),
            "{text}"
        );
        assert!(
            text.contains("gw.yaml:4:16: `tenantId`: 0 is reserved"),
            "{text}"
        );
    }
}
