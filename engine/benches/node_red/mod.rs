//! Node-RED with node-red-contrib-modbus on the polling bench's fleet: the peer
//! the hot path's CPU and memory targets are set against (at most 0.2x its CPU
//! and 0.15x its memory).
//!
//! `scripts/setup-node-red.sh` installs the pinned versions under
//! `.peers/node-red`; `SLUICE_BENCH_NODE_RED` names another install directory,
//! or `0` to leave the peer out. The flow: a `modbus-client` and a
//! `modbus-read` node a device (the same socket, registers and period as the
//! engine), one `function` node that builds the engine's report payload from
//! the read (key, quality, ts, value per register, with the device number,
//! product, sequence and timestamp) and one QoS 1 `mqtt out` node to the
//! bench's broker, on the same `{productId}/{deviceNum}/property/post` topics.
//! The payload's `ts` is taken when the function runs, right after the read's
//! answer: the lag is measured from there. The ingest bench runs it on its
//! stream of device messages instead ([`ingest_flow`]); each bench uses its part.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Longest wait for every device's reports to flow once Node-RED started.
const FLOW_TIMEOUT: Duration = Duration::from_secs(120);

/// Builds the report from a read: one object per register, as in the engine's
/// BATCH report.
const REPORT_FUNCTION: &str = "\
const ts = Date.now();
const registers = msg.payload;
const values = new Array(registers.length);
for (let i = 0; i < registers.length; i++) {
    values[i] = { key: 't' + i, quality: 'GOOD', ts: ts, value: registers[i] };
}
const seq = (context.get('seq') || 0) + 1;
context.set('seq', seq);
const parts = msg.topic.split('/');
msg.payload = JSON.stringify({ deviceNum: parts[1], productId: parts[0], seq: seq, timestamp: ts, values: values });
return msg;";

/// Where Node-RED is installed, unless the bench is told to leave it out or it
/// is not installed (then the reason, printed instead of its line).
pub fn install() -> Result<PathBuf, String> {
    let dir = match std::env::var("SLUICE_BENCH_NODE_RED") {
        Ok(value) if value == "0" => return Err("SLUICE_BENCH_NODE_RED=0".into()),
        Ok(value) => PathBuf::from(value),
        Err(_) => Path::new(env!("CARGO_MANIFEST_DIR")).join("../.peers/node-red"),
    };
    if dir.join(red_js()).is_file() {
        Ok(dir)
    } else {
        Err(format!(
            "not installed at {} (scripts/setup-node-red.sh installs it)",
            dir.display()
        ))
    }
}

fn red_js() -> PathBuf {
    Path::new("node_modules").join("node-red").join("red.js")
}

/// Node-RED's flow for the fleet: the nodes as its `flows.json` lists them.
pub fn flow(addresses: &[SocketAddr], tags: u16, period_ms: u64, mqtt: SocketAddr) -> Value {
    let mut nodes = vec![
        json!({"id": "n.tab", "type": "tab", "label": "bench"}),
        json!({
            "id": "n.report", "type": "function", "z": "n.tab", "name": "report",
            "func": REPORT_FUNCTION, "outputs": 1, "wires": [["n.uplink"]]
        }),
        json!({
            "id": "n.uplink", "type": "mqtt out", "z": "n.tab", "name": "uplink",
            "topic": "", "qos": "1", "retain": "false", "broker": "n.broker", "wires": []
        }),
        json!({
            "id": "n.broker", "type": "mqtt-broker", "name": "bench",
            "broker": mqtt.ip().to_string(), "port": mqtt.port().to_string(),
            "clientid": "node-red-bench", "autoConnect": true, "usetls": false,
            "protocolVersion": "4", "keepalive": "60", "cleansession": true
        }),
    ];
    for (i, address) in addresses.iter().enumerate() {
        nodes.push(json!({
            "id": format!("n.client.{i}"), "type": "modbus-client", "name": format!("D{i:05}"),
            "clienttype": "tcp", "bufferCommands": true, "stateLogEnabled": false,
            "queueLogEnabled": false, "failureLogEnabled": true,
            "tcpHost": address.ip().to_string(), "tcpPort": address.port().to_string(),
            "tcpType": "DEFAULT", "unit_id": "1", "commandDelay": "1",
            "clientTimeout": "1000", "reconnectOnTimeout": true, "reconnectTimeout": "2000",
            "parallelUnitIdsAllowed": true
        }));
        nodes.push(json!({
            "id": format!("n.read.{i}"), "type": "modbus-read", "z": "n.tab",
            "name": format!("D{i:05}"), "topic": format!("BENCH/D{i:05}/property/post"),
            "showStatusActivities": false, "showErrors": false, "unitid": "1",
            "dataType": "HoldingRegister", "adr": "0", "quantity": tags.to_string(),
            "rate": period_ms.to_string(), "rateUnit": "ms", "delayOnStart": false,
            "server": format!("n.client.{i}"), "useIOFile": false, "emptyMsgOnFail": false,
            "wires": [["n.report"], []]
        }));
    }
    Value::Array(nodes)
}

/// Maps a device's message into the engine's report: ten values stamped with
/// the message's `ts`, the device's own sequence number.
const INGEST_FUNCTION: &str = "\
const p = msg.payload;
const device = msg.topic.split('/')[1];
const seqs = context.get('seqs') || {};
const seq = (seqs[device] || 0) + 1;
seqs[device] = seq;
context.set('seqs', seqs);
const values = new Array(10);
for (let i = 0; i < 10; i++) {
    values[i] = { key: 't' + i, quality: 'GOOD', ts: p.ts, value: p['t' + i] };
}
msg.topic = 'BENCH/' + device + '/property/post';
msg.payload = JSON.stringify({ deviceNum: device, productId: 'BENCH', seq: seq, timestamp: Date.now(), values: values });
return msg;";

/// The ingest bench's flow: `mqtt in` on every device's topic (QoS 1), a
/// `json` node, a `function` node mapping the fields into the report, a QoS 1
/// `mqtt out`, all on the bench's broker `mqtt`.
pub fn ingest_flow(mqtt: SocketAddr) -> Value {
    json!([
        {"id": "n.tab", "type": "tab", "label": "ingest"},
        {
            "id": "n.in", "type": "mqtt in", "z": "n.tab", "name": "devices",
            "topic": "devices/+/up", "qos": "1", "datatype": "utf8", "broker": "n.broker",
            "nl": false, "rap": false, "inputs": 0, "wires": [["n.json"]]
        },
        {"id": "n.json", "type": "json", "z": "n.tab", "name": "parse", "property": "payload",
         "action": "obj", "pretty": false, "wires": [["n.map"]]},
        {
            "id": "n.map", "type": "function", "z": "n.tab", "name": "map",
            "func": INGEST_FUNCTION, "outputs": 1, "wires": [["n.uplink"]]
        },
        {
            "id": "n.uplink", "type": "mqtt out", "z": "n.tab", "name": "uplink",
            "topic": "", "qos": "1", "retain": "false", "broker": "n.broker", "wires": []
        },
        {
            "id": "n.broker", "type": "mqtt-broker", "name": "bench",
            "broker": mqtt.ip().to_string(), "port": mqtt.port().to_string(),
            "clientid": "node-red-ingest", "autoConnect": true, "usetls": false,
            "protocolVersion": "4", "keepalive": "60", "cleansession": true
        }
    ])
}

/// `node red.js` on a flow, killed on drop.
pub struct NodeRed {
    child: Child,
}

impl Drop for NodeRed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl NodeRed {
    /// Starts Node-RED from `install` with `flow`, its user directory in `dir`,
    /// the editor's HTTP server on `http` (the modbus nodes register routes on it).
    pub fn start(install: &Path, dir: &Path, flow: &Value, http: SocketAddr) -> Self {
        let flows = dir.join("flows.json");
        std::fs::write(&flows, flow.to_string()).expect("write Node-RED's flow");
        let settings = dir.join("settings.js");
        std::fs::write(
            &settings,
            format!(
                "module.exports = {{ uiHost: '{}', uiPort: {}, flowFile: 'flows.json', \
                 credentialSecret: false, diagnostics: {{ enabled: false }}, \
                 telemetry: {{ enabled: false }}, \
                 editorTheme: {{ tours: false, projects: {{ enabled: false }} }}, \
                 logging: {{ console: {{ level: 'warn', metrics: false, audit: false }} }} }};\n",
                http.ip(),
                http.port()
            ),
        )
        .expect("write Node-RED's settings");
        let log = std::fs::File::create(dir.join("node-red.log")).expect("Node-RED's log");
        let child = Command::new("node")
            .arg(install.join(red_js()))
            .arg("--settings")
            .arg(&settings)
            .arg("--userDir")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("Node-RED's log"))
            .stderr(log)
            .spawn()
            .expect("start Node-RED (node on PATH)");
        Self { child }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until a whole period brings a report from about every device
    /// (`reports` counts them at the broker); panics with the log's tail if it
    /// never does or Node-RED exits.
    pub fn wait_flowing(
        &mut self,
        dir: &Path,
        devices: u64,
        period: Duration,
        reports: &dyn Fn() -> u64,
    ) {
        let start = Instant::now();
        loop {
            let before = reports();
            std::thread::sleep(period);
            let seen = reports() - before;
            if seen * 100 >= devices * 99 {
                return;
            }
            let exited = self.child.try_wait().ok().flatten();
            assert!(
                exited.is_none() && start.elapsed() < FLOW_TIMEOUT,
                "Node-RED's reports did not flow ({seen} of {devices} devices in a period, \
                 exit {exited:?}); log tail:\n{}",
                log_tail(dir)
            );
        }
    }
}

fn log_tail(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("node-red.log")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}
