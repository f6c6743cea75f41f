//! `sluice demo`: sample data from a built-in meter through the default pipeline,
//! printed as the report payloads the uplink publishes.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sluice::model::{Access, Batch, ByteOrder, DataType, Quality, Sample, TagSpec, Value};
use sluice::pipeline::{self, Pipeline};
use sluice::report::{ReportHeader, payload};
use sluice::runtime::{Limits, Registry, Runtime, RuntimeConfig};

fn tag(key: &str, data_type: DataType, factor: f64) -> TagSpec {
    TagSpec {
        key: key.to_owned(),
        address: String::new(),
        data_type,
        length: 0,
        byte_order: ByteOrder::Abcd,
        factor,
        offset: 0.0,
        deadband: 0.0,
        access: Access::Read,
        settings: Vec::new(),
    }
}

/// Raw values of the demo meter for one round: a temperature in tenths of a
/// degree, a flow in hundredths, a counter and a running flag.
fn sample_round(round: u64, ts_ms: i64) -> Batch {
    let phase = round as f64 / 10.0;
    let raw = [
        Value::Int(215 + (phase.sin() * 30.0) as i64),
        Value::Int(1250 + (phase.cos() * 100.0) as i64),
        Value::Uint(round * 7),
        Value::Bool(round % 20 < 15),
    ];
    let samples = raw
        .into_iter()
        .enumerate()
        .map(|(i, value)| Sample {
            tag: i as u32,
            value,
            quality: Quality::Good,
            ts_ms,
        })
        .collect();
    Batch {
        samples,
        bytes: Vec::new(),
    }
}

pub fn run(rounds: Option<u64>, period_ms: u64) -> anyhow::Result<std::process::ExitCode> {
    let registry = Registry::with_builtins(Runtime::new(RuntimeConfig::default())?)?;
    let spec = pipeline::load_str(
        "pipelines/default.yaml",
        pipeline::DEFAULT_PIPELINE,
        "default",
        std::path::Path::new("."),
    )?;
    let pipeline = Pipeline::build(&spec, &registry, Limits::default())?;
    let tags = [
        tag("temperature", DataType::Int16, 0.1),
        tag("flow", DataType::Int16, 0.01),
        tag("counter", DataType::Uint32, 1.0),
        tag("running", DataType::Bool, 1.0),
    ];
    let device = pipeline.for_device(&tags)?;
    tracing::info!(pipeline = pipeline.name(), stages = ?pipeline.stage_names(), "demo running");
    let mut round = 0;
    while rounds.is_none_or(|limit| round < limit) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as i64;
        let batch = device.run(sample_round(round, now))?;
        let header = ReportHeader {
            product_id: "DEMO",
            device_num: "METER01",
            timestamp_ms: now,
            seq: round + 1,
        };
        println!("{}", payload(header, &batch.samples, &tags));
        round += 1;
        if rounds.is_none_or(|limit| round < limit) {
            std::thread::sleep(Duration::from_millis(period_ms));
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}
