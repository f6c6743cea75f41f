//! Gateway configurations for the tests, built from typed parts and written as
//! the YAML the engine reads. A test about the YAML itself (positions in
//! errors, comments, layout) writes its text; every other test builds it here.

use serde_json::{Map, Value, json};

/// A gateway's configuration file.
#[derive(Debug, Clone)]
pub struct Gateway {
    collector: Map<String, Value>,
    devices: Vec<Device>,
}

impl Gateway {
    /// Reports to the broker on `127.0.0.1:mqtt` as client `client_id`, keeps
    /// its data in `./data`, with two worker threads.
    pub fn new(client_id: &str, mqtt: u16) -> Self {
        let collector = json!({
            "workerThreads": 2,
            "mqtt": { "brokerUrl": format!("tcp://127.0.0.1:{mqtt}"), "clientId": client_id },
            "wal": { "dir": "./data" },
        });
        Self {
            collector: object(collector),
            devices: Vec::new(),
        }
    }

    /// Serves the API on `127.0.0.1:http` with `admin_token`.
    pub fn http(self, http: u16, admin_token: &str) -> Self {
        self.set("http.listen", format!("127.0.0.1:{http}"))
            .set("http.adminToken", admin_token)
    }

    /// Sets `collector.PATH` (keys joined by dots) to `value`, e.g.
    /// `.set("mqtt.keepAliveSec", 5)`.
    pub fn set(mut self, path: &str, value: impl Into<Value>) -> Self {
        set_path(&mut self.collector, path, value.into());
        self
    }

    pub fn device(mut self, device: Device) -> Self {
        self.devices.push(device);
        self
    }

    /// The file's text.
    pub fn yaml(&self) -> String {
        let mut root = Map::new();
        root.insert("collector".into(), Value::Object(self.collector.clone()));
        let devices = self.devices.iter().map(Device::value).collect();
        root.insert("devices".into(), Value::Array(devices));
        let mut text = String::new();
        block(&Value::Object(root), 0, &mut text);
        text
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
    /// Device `id` (product `P`, number `id`) with a Modbus TCP channel on
    /// `127.0.0.1:port`.
    pub fn modbus(id: &str, port: u16) -> Self {
        Self {
            fields: object(json!({ "deviceId": id, "productId": "P", "deviceNum": id })),
            channel: object(json!({
                "channelId": "main",
                "protocol": "modbus-tcp",
                "host": "127.0.0.1",
                "port": port,
            })),
            tags: Vec::new(),
        }
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

    fn value(&self) -> Value {
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

    /// Sets another key (`access`, `factor`, `min`, ...).
    pub fn set(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.0.insert(key.into(), value.into());
        self
    }
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
