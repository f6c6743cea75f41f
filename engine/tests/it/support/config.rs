//! Gateway configurations for the tests, built from typed parts and written as
//! the YAML the engine reads. A test about the YAML itself (positions in
//! errors, comments, layout) writes its text; every other test builds it here.

use serde_json::{Map, Value, json};

/// A gateway's configuration file.
#[derive(Debug, Clone)]
pub struct Gateway {
    collector: Map<String, Value>,
    tenants: Vec<Tenant>,
    devices: Vec<Device>,
}

impl Gateway {
    /// Reports to the broker on `127.0.0.1:mqtt` as client `client_id`, keeps
    /// its data in `./data`, with two worker threads.
    pub fn new(client_id: &str, mqtt: u16) -> Self {
        Self::without_client_id(mqtt).set("mqtt.clientId", client_id)
    }

    /// [`Gateway::new`] with no `clientId`: the engine makes one up and keeps
    /// it in its data directory.
    pub fn without_client_id(mqtt: u16) -> Self {
        let collector = json!({
            "workerThreads": 2,
            "mqtt": { "brokerUrl": format!("tcp://127.0.0.1:{mqtt}") },
            "wal": { "dir": "./data" },
        });
        Self {
            collector: object(collector),
            tenants: Vec::new(),
            devices: Vec::new(),
        }
    }

    /// Serves the API on `127.0.0.1:http` with `admin_token`.
    pub fn http(self, http: u16, admin_token: &str) -> Self {
        self.set("http.listen", format!("127.0.0.1:{http}"))
            .set("http.adminToken", admin_token)
    }

    /// Takes downlink messages signed with the operator's key, from the file
    /// `operator.key` (what `mqtt::write_operator_key` writes).
    pub fn operator_key(self) -> Self {
        self.set("downlink.operatorKeyFile", "operator.key")
    }

    /// Sets `collector.PATH` (keys joined by dots) to `value`, e.g.
    /// `.set("mqtt.keepAliveSec", 5)`.
    pub fn set(mut self, path: &str, value: impl Into<Value>) -> Self {
        set_path(&mut self.collector, path, value.into());
        self
    }

    /// Removes `collector.PATH`, e.g. `.unset("http.adminToken")`.
    pub fn unset(mut self, path: &str) -> Self {
        unset_path(&mut self.collector, path);
        self
    }

    pub fn tenant(mut self, tenant: Tenant) -> Self {
        self.tenants.push(tenant);
        self
    }

    pub fn device(mut self, device: Device) -> Self {
        self.devices.push(device);
        self
    }

    /// The file's text.
    pub fn yaml(&self) -> String {
        let devices = self.devices.iter().map(Device::json).collect();
        self.text(Some(Value::Array(devices)))
    }

    /// The file's text with `entries` (`devices` entries as another file
    /// writes them) in place of the built devices.
    pub fn yaml_with_devices(&self, entries: &str) -> String {
        format!("{}devices:\n{entries}", self.text(None))
    }

    fn text(&self, devices: Option<Value>) -> String {
        let mut root = Map::new();
        root.insert("collector".into(), Value::Object(self.collector.clone()));
        if !self.tenants.is_empty() {
            let tenants = self.tenants.iter().map(|t| Value::Object(t.0.clone()));
            root.insert("tenants".into(), Value::Array(tenants.collect()));
        }
        if let Some(devices) = devices {
            root.insert("devices".into(), devices);
        }
        let mut text = String::new();
        block(&Value::Object(root), 0, &mut text);
        text
    }
}

/// A `tenants` entry.
#[derive(Debug, Clone)]
pub struct Tenant(Map<String, Value>);

impl Tenant {
    /// Tenant `id`, named `name`.
    pub fn new(id: u32, name: &str) -> Self {
        Self(object(json!({ "tenantId": id, "name": name })))
    }

    /// Sets another key (`tokens`, `downlinkKeyFile`, `fence`, `pipeline`, ...).
    pub fn set(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.0.insert(key.into(), value.into());
        self
    }
}

/// A `devices` entry with one channel, `main`.
#[derive(Debug, Clone)]
pub struct Device {
    fields: Map<String, Value>,
    channel: Map<String, Value>,
    tags: Vec<Tag>,
}

impl Device {
    /// Device `id` (product `P`, number `id`) whose channel speaks `protocol`
    /// (`modbus-rtu`, ...); where it reaches is up to its channel's keys.
    pub fn on(id: &str, protocol: &str) -> Self {
        Self {
            fields: object(json!({ "deviceId": id, "productId": "P", "deviceNum": id })),
            channel: object(json!({ "channelId": "main", "protocol": protocol })),
            tags: Vec::new(),
        }
    }

    /// Device `id` whose channel speaks `protocol` (`s7`, `mc`,
    /// `modbus-rtu-over-tcp`, ...) to `127.0.0.1:port`.
    pub fn tcp(id: &str, protocol: &str, port: u16) -> Self {
        Self::on(id, protocol)
            .channel("host", "127.0.0.1")
            .channel("port", port)
    }

    /// Device `id` with a Modbus TCP channel on `127.0.0.1:port`.
    pub fn modbus(id: &str, port: u16) -> Self {
        Self::tcp(id, "modbus-tcp", port)
    }

    /// Device `id` that publishes by itself on `topic` (placeholders allowed)
    /// every `report_period_ms`, on the uplink's broker, read by the `json` decoder.
    pub fn mqtt(id: &str, topic: &str, report_period_ms: u64) -> Self {
        Self::on(id, "mqtt")
            .channel("topic", topic)
            .channel("reportPeriodMs", report_period_ms)
    }

    /// Sets a key of the device (`productId`, `tenantId`, `pipeline`, ...).
    pub fn set(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.fields.insert(key.into(), value.into());
        self
    }

    /// Sets a key of its channel (`unitId`, `readTimeoutMs`, ...).
    pub fn channel(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.channel.insert(key.into(), value.into());
        self
    }

    pub fn tag(mut self, tag: Tag) -> Self {
        self.tags.push(tag);
        self
    }

    pub fn tags(mut self, tags: impl IntoIterator<Item = Tag>) -> Self {
        self.tags.extend(tags);
        self
    }

    /// The entry as JSON, as a push sends it.
    pub fn json(&self) -> Value {
        let mut channel = self.channel.clone();
        let tags = self
            .tags
            .iter()
            .map(|t| Value::Object(t.0.clone()))
            .collect();
        channel.insert("tags".into(), Value::Array(tags));
        let mut device = self.fields.clone();
        device.insert("channels".into(), json!([channel]));
        Value::Object(device)
    }
}

/// A tag of a channel.
#[derive(Debug, Clone)]
pub struct Tag(Map<String, Value>);

impl Tag {
    /// Tag `key` at `address`, of `data_type` (as the file spells it:
    /// `UINT16`, `FLOAT32`, ...), read every `period_ms`.
    pub fn new(key: &str, address: &str, data_type: &str, period_ms: u64) -> Self {
        Self(object(json!({
            "key": key,
            "address": address,
            "dataType": data_type,
            "periodMs": period_ms,
        })))
    }

    /// Tag `key` of a device that publishes by itself: at `address` in its
    /// messages, of `data_type`, never polled.
    pub fn pushed(key: &str, address: &str, data_type: &str) -> Self {
        Self(object(json!({
            "key": key,
            "address": address,
            "dataType": data_type,
        })))
    }

    /// Sets another key (`access`, `factor`, `min`, ...).
    pub fn set(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.0.insert(key.into(), value.into());
        self
    }
}

/// The tokens of [`two_tenants`].
pub const PLANT_TOKEN: &str = "plant-token";
pub const HOMES_TOKEN: &str = "homes-token";

/// The pipeline `with-alarms` of [`two_tenants`]' boiler: a `temp` above 90
/// raises `BOILER_HOT`, below 80 clears it.
pub const BOILER_PIPELINE: &str = "name: with-alarms
stages:
  - use: swap_bytes
  - use: decode
  - use: scale
alarms:
  thresholds:
    - { tag: temp, above: 90, clearAt: 80, ruleKey: BOILER_HOT }
";

/// `gateway` with tenants 1 (`plant`) and 2 (`homes`) and their tokens, device
/// `boiler` of tenant 1 on Modbus port `modbus` with pipeline `with-alarms`
/// (`boiler` adds its tags, a `temp` among them, and any other key), and device
/// `flat-7` of tenant 2 on port `nobody`, where nothing answers.
pub fn two_tenants(
    gateway: Gateway,
    (modbus, nobody): (u16, u16),
    boiler: impl FnOnce(Device) -> Device,
) -> Gateway {
    let plant = Tenant::new(1, "plant").set("tokens", json!([PLANT_TOKEN]));
    let homes = Tenant::new(2, "homes").set("tokens", json!([HOMES_TOKEN]));
    let boiler_device = Device::modbus("boiler", modbus)
        .set("deviceNum", "B1")
        .set("tenantId", 1)
        .set("pipeline", "with-alarms")
        .channel("readTimeoutMs", 300);
    let flat = Device::modbus("flat-7", nobody)
        .set("productId", "H")
        .set("deviceNum", "F7")
        .set("tenantId", 2)
        .channel("readTimeoutMs", 300)
        .tag(Tag::new("door", "40002", "UINT16", 5000));
    gateway
        .tenant(plant)
        .tenant(homes)
        .device(boiler(boiler_device))
        .device(flat)
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn set_path(map: &mut Map<String, Value>, path: &str, value: Value) {
    match path.split_once('.') {
        None => {
            map.insert(path.into(), value);
        }
        Some((key, rest)) => {
            let inner = map.entry(key).or_insert_with(|| Value::Object(Map::new()));
            if !inner.is_object() {
                *inner = Value::Object(Map::new());
            }
            if let Value::Object(inner) = inner {
                set_path(inner, rest, value);
            }
        }
    }
}

fn unset_path(map: &mut Map<String, Value>, path: &str) {
    match path.split_once('.') {
        None => {
            map.remove(path);
        }
        Some((key, rest)) => {
            if let Some(Value::Object(inner)) = map.get_mut(key) {
                unset_path(inner, rest);
            }
        }
    }
}

/// Writes `value` as block YAML, nested `indent` spaces; scalars in JSON's
/// spelling (a JSON string is a YAML double-quoted one).
fn block(value: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                match value {
                    Value::Object(inner) if !inner.is_empty() => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        block(value, indent + 2, out);
                    }
                    Value::Array(items) if !items.is_empty() => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        block(value, indent + 2, out);
                    }
                    scalar => out.push_str(&format!("{pad}{key}: {scalar}\n")),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                let mut inner = String::new();
                block(item, indent + 2, &mut inner);
                // The item's first line carries the dash.
                out.push_str(&pad);
                out.push_str("- ");
                out.push_str(inner.trim_start_matches(' '));
            }
        }
        scalar => out.push_str(&format!("{pad}{scalar}\n")),
    }
}

#[test]
fn a_built_config_is_block_yaml() {
    let yaml = Gateway::new("c1", 1883)
        .set("mqtt.keepAliveSec", 5)
        .device(
            Device::modbus("meter", 502)
                .channel("unitId", 2)
                .tag(Tag::new("a", "40001", "UINT16", 100).set("factor", 0.5)),
        )
        .yaml();
    assert_eq!(
        yaml,
        r#"collector:
  mqtt:
    brokerUrl: "tcp://127.0.0.1:1883"
    clientId: "c1"
    keepAliveSec: 5
  wal:
    dir: "./data"
  workerThreads: 2
devices:
  - channels:
      - channelId: "main"
        host: "127.0.0.1"
        port: 502
        protocol: "modbus-tcp"
        tags:
          - address: "40001"
            dataType: "UINT16"
            factor: 0.5
            key: "a"
            periodMs: 100
        unitId: 2
    deviceId: "meter"
    deviceNum: "meter"
    productId: "P"
"#
    );
}

#[test]
fn tenants_a_serial_device_and_a_key_taken_out() {
    let gateway = Gateway::without_client_id(1883)
        .http(8080, "secret")
        .unset("http.adminToken")
        .tenant(Tenant::new(1, "one").set("tokens", json!(["t1"])));
    let serial = Device::on("rtu", "modbus-rtu").channel("serialPort", "/dev/ttyS0");
    assert_eq!(
        gateway.clone().device(serial).yaml(),
        r#"collector:
  http:
    listen: "127.0.0.1:8080"
  mqtt:
    brokerUrl: "tcp://127.0.0.1:1883"
  wal:
    dir: "./data"
  workerThreads: 2
devices:
  - channels:
      - channelId: "main"
        protocol: "modbus-rtu"
        serialPort: "/dev/ttyS0"
        tags: []
    deviceId: "rtu"
    deviceNum: "rtu"
    productId: "P"
tenants:
  - name: "one"
    tenantId: 1
    tokens:
      - "t1"
"#
    );
    let with = gateway.yaml_with_devices("  - deviceId: d\n");
    assert!(
        with.ends_with("    tokens:\n      - \"t1\"\ndevices:\n  - deviceId: d\n"),
        "{with}"
    );
}
