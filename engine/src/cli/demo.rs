//! `sluice demo`: a complete gateway with nothing to install. A built-in Modbus
//! simulator plays a meter, an in-process MQTT broker receives the reports, and
//! the engine polls the meter through the default pipeline; every message the
//! broker receives is printed as `TOPIC PAYLOAD`.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
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
  wal:
    dir: '{data}'
devices:
  - deviceId: demo-meter
    productId: DEMO
    deviceNum: METER01
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
",
        host = modbus.ip(),
        port = modbus.port(),
    )
}

/// A token for this run's console: 128 bits from the keys the standard library
/// draws from the system's randomness for its hash maps.
fn console_token() -> String {
    use std::hash::{BuildHasher, Hasher};
    let half = || {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        hasher.finish()
    };
    format!("{:016x}{:016x}", half(), half())
}

/// A free loopback port (the OS picks it; it is released for the service to take).
fn free_local_address() -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?)
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
    let data = std::env::temp_dir().join(format!("sluice-demo-{}", std::process::id()));
    let token = console_token();
    let addresses = DemoAddresses {
        modbus: sim_handle.local_addr(),
        mqtt: broker.address(),
        http,
    };
    let text = demo_config(&addresses, &token, &data.display().to_string());
    std::fs::create_dir_all(&data)?;
    let file = data.join("demo.yaml");
    std::fs::write(&file, text)?;
    let sources = Sources {
        config_file: Some(file),
        ..Sources::default()
    };
    let Some(prepared) = super::run::prepare(&sources, Purpose::Run)? else {
        return Ok(ExitCode::FAILURE);
    };
    eprintln!(
        "demo: simulator on {}, MQTT broker on {}, console on http://{http}/ (sign in with the \
         token {token})",
        sim_handle.local_addr(),
        broker.address()
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
        _ = tokio::signal::ctrl_c() => {}
    }
    let _ = stop.send(true);
    engine.await.context("the engine task")??;
    let _ = std::fs::remove_dir_all(&data);
    Ok(ExitCode::SUCCESS)
}
