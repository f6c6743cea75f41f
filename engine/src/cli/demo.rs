//! `sluice demo`: a complete gateway with nothing to install. A built-in Modbus
//! simulator plays a meter, an in-process MQTT broker receives the reports, and
//! the engine polls the meter through the default stages, with a threshold
//! alarm that trips within the first minute and a setpoint to write; every
//! message the broker receives is printed as `TOPIC PAYLOAD`. Its directory
//! (the configuration, which holds the console's token, and the data) is
//! removed when it ends, however it ends.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use sluice::broker::EmbeddedBroker;
use sluice::compile::Sources;
use sluice::gateway::{self, Purpose};
use sluice::sim::{SimConfig, Simulator, animate, demo_device};
use tokio::sync::watch;

/// Where the demo's parts listen.
struct DemoAddresses {
    /// The simulated meter (Modbus TCP).
    modbus: SocketAddr,
    /// The embedded MQTT broker.
    mqtt: SocketAddr,
    /// The gateway's HTTP API and console.
    http: SocketAddr,
}

/// The demo's pipeline: the default stages, and an alarm while the meter runs
/// warm (its temperature passes 22.0 °C about ten seconds in and falls back
/// within the minute, again each minute).
const DEMO_PIPELINE: &str = "name: demo
description: The default stages, and an alarm while the meter runs warm.
stages:
  - pipeline: default
alarms:
  thresholds:
    - { tag: temperature, above: 22.0, clearAt: 21.8, message: The meter runs warm }
";

/// The demo gateway: one meter laid out as `sim::demo_device` lays it out.
fn demo_config(addresses: &DemoAddresses, token: &str, data: &str) -> String {
    let DemoAddresses { modbus, mqtt, http } = addresses;
    format!(
        "collector:
  workerThreads: 2
  reportMode: BATCH
  mqtt:
    brokerUrl: tcp://{mqtt}
    clientId: sluice-demo
  http:
    listen: {http}
    adminToken: {token}
  downlink:
    operatorKeyFile: operator.key
  wal:
    dir: '{data}'
devices:
  - deviceId: demo-meter
    productId: DEMO
    deviceNum: METER01
    pipeline: demo
    channels:
      - channelId: sim
        protocol: modbus-tcp
        host: {host}
        port: {port}
        unitId: 1
        heartbeatMs: 5000
        tags:
          - {{ key: temperature, address: '40001', dataType: FLOAT32, periodMs: 1000, deadband: 0.05, unit: degC }}
          - {{ key: pressure, address: '40003', dataType: INT16, periodMs: 1000, factor: 0.1, unit: hPa }}
          - {{ key: counter, address: '40004', dataType: UINT32, periodMs: 1000 }}
          - {{ key: running, address: '00001', dataType: BOOL, periodMs: 500 }}
          - {{ key: flow, address: '30001', dataType: UINT16, periodMs: 500, factor: 0.01, unit: m3/h }}
          - {{ key: setpoint, address: '40006', dataType: INT16, periodMs: 1000, factor: 0.1, access: RW, min: 10, max: 30, unit: degC }}
",
        host = modbus.ip(),
        port = modbus.port(),
    )
}

/// 128 random bits as hex (this run's console token, and half its operator
/// key): from the keys the standard library draws from the system's randomness
/// for its hash maps.
fn random_hex() -> String {
    use std::hash::{BuildHasher, Hasher};
    let half = || {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        hasher.finish()
    };
    format!("{:016x}{:016x}", half(), half())
}

/// Writes `text` to a new file at `path` that only this user can read (it
/// holds a token or a key).
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?
        .write_all(text.as_bytes())
}

/// A free loopback port (the OS picks it; it is released for the service to take).
fn free_local_address() -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?)
}

/// The demo's directory, removed when the demo ends (returns, fails or
/// unwinds): it holds the console's token.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn run(reports: Option<u64>) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(demo(reports))
}

async fn demo(reports: Option<u64>) -> anyhow::Result<ExitCode> {
    let sim = Simulator::new(SimConfig::default());
    demo_device(&sim);
    let sim_handle = sim.serve((Ipv4Addr::LOCALHOST, 0).into()).await?;
    tokio::spawn(animate(sim.clone(), Duration::from_millis(500)));

    let broker = EmbeddedBroker::start(free_local_address()?).map_err(anyhow::Error::msg)?;
    let http = free_local_address()?;
    let scratch = Scratch(std::env::temp_dir().join(format!("sluice-demo-{}", std::process::id())));
    let data = &scratch.0;
    let token = random_hex();
    let addresses = DemoAddresses {
        modbus: sim_handle.local_addr(),
        mqtt: broker.address(),
        http,
    };
    let text = demo_config(&addresses, &token, &data.display().to_string());
    // A directory of a demo that died with this process id is stale.
    let _ = std::fs::remove_dir_all(data);
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(data)?;
    let file = data.join("demo.yaml");
    write_private(&file, &text)?;
    // The key MQTT writes would be signed with: the demo's own, made now.
    write_private(
        &data.join("operator.key"),
        &format!("{}{}\n", random_hex(), random_hex()),
    )?;
    let pipeline = data.join("demo-pipeline.yaml");
    std::fs::write(&pipeline, DEMO_PIPELINE)?;
    let sources = Sources {
        config_file: Some(file.clone()),
        pipeline_files: vec![pipeline],
        ..Sources::default()
    };
    let Some(prepared) = super::run::prepare(&sources, Purpose::Run)? else {
        return Ok(ExitCode::FAILURE);
    };
    eprintln!(
        "demo: simulator on {}, MQTT broker on {}, configuration in {} (removed at the end)
demo: console on http://{http}/#token={token} (signed in; or sign in at http://{http}/ with the token)
demo: write the setpoint with
  curl -X POST http://{http}/commands -H 'Authorization: Bearer {token}' \\
    -H 'Content-Type: application/json' -d '{{\"deviceId\":\"demo-meter\",\"key\":\"setpoint\",\"value\":24.5}}'
demo: the alarm TEMPERATURE_HIGH trips while the temperature is above 22.0; Ctrl-C stops the demo",
        sim_handle.local_addr(),
        broker.address(),
        file.display(),
    );

    let (stop, stopped) = watch::channel(false);
    let engine = tokio::spawn(gateway::run(prepared, sources, None, stopped));
    let printer = tokio::task::spawn_blocking(move || {
        let mut seen = 0;
        while let Ok((topic, payload)) = broker.messages().recv() {
            println!("{topic} {}", String::from_utf8_lossy(&payload));
            if topic.ends_with("/property/post") {
                seen += 1;
                if reports.is_some_and(|limit| seen >= limit) {
                    return;
                }
            }
        }
    });
    tokio::select! {
        _ = printer => {}
        () = super::run::wait_for_signal() => {}
    }
    let _ = stop.send(true);
    engine.await.context("the engine task")??;
    drop(scratch);
    Ok(ExitCode::SUCCESS)
}
