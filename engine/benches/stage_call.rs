//! Cost of stage calls through the component runtime vs the same logic native.
//!
//! `cargo bench -p sluice --bench stage_call` (or `cargo xtask bench`). Part 1: ns per
//! batch and per sample for the `scale` component and a native loop doing the same
//! arithmetic, and their ratio, at several batch sizes. Part 2: the whole default
//! pipeline (swap_bytes, decode, scale, check_range, deadband) on raw register bytes
//! vs a native function doing the same steps, at 100-sample batches.
#![allow(clippy::print_stdout)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use sluice::model::{Access, Batch, ByteOrder, DataType, Quality, Sample, Span, TagSpec, Value};
use sluice::pipeline::{self, Pipeline};
use sluice::runtime::BUILTIN;
use sluice::runtime::{ComponentKind, Limits, Registry, Runtime, RuntimeConfig};

fn tags(n: usize) -> Vec<TagSpec> {
    (0..n)
        .map(|i| TagSpec {
            key: format!("t{i}"),
            address: String::new(),
            data_type: DataType::Int16,
            length: 0,
            byte_order: ByteOrder::Abcd,
            factor: 0.1,
            offset: 1.0,
            deadband: 0.0,
            access: Access::Read,
            settings: Vec::new(),
        })
        .collect()
}

fn batch(n: usize) -> Batch {
    Batch {
        samples: (0..n)
            .map(|i| Sample {
                tag: i as u32,
                value: Value::Int(i as i64 * 3),
                quality: Quality::Good,
                ts_ms: 1_700_000_000_000,
            })
            .collect(),
        bytes: Vec::new(),
    }
}

/// The native equivalent of the `scale` component's work on a batch.
fn scale_native(tags: &[TagSpec], mut batch: Batch) -> Batch {
    for sample in &mut batch.samples {
        let Some(tag) = tags.get(sample.tag as usize) else {
            continue;
        };
        let raw = match sample.value {
            Value::Int(v) => v as f64,
            Value::Uint(v) => v as f64,
            Value::Float(v) => v,
            _ => continue,
        };
        let scaled = raw * tag.factor + tag.offset;
        if scaled.is_finite() {
            sample.value = Value::Float(scaled);
        } else {
            sample.value = Value::None;
            sample.quality = Quality::Bad;
        }
    }
    batch
}

/// Runs `f` repeatedly for about `budget` and returns ns per call.
fn measure(budget: Duration, mut f: impl FnMut()) -> f64 {
    for _ in 0..100 {
        f();
    }
    let mut calls = 0u64;
    let start = Instant::now();
    while start.elapsed() < budget {
        for _ in 0..100 {
            f();
        }
        calls += 100;
    }
    start.elapsed().as_nanos() as f64 / calls as f64
}

/// Raw big-endian UINT16 registers, one per tag, as a codec hands them over.
fn raw_batch(n: usize) -> Batch {
    let mut bytes = Vec::with_capacity(n * 2);
    let samples = (0..n)
        .map(|i| {
            bytes.extend_from_slice(&((i * 7) as u16).to_be_bytes());
            Sample {
                tag: i as u32,
                value: Value::Raw(Span {
                    start: (i * 2) as u32,
                    len: 2,
                }),
                quality: Quality::Good,
                ts_ms: 1_700_000_000_000,
            }
        })
        .collect();
    Batch { samples, bytes }
}

/// The native equivalent of the default pipeline for UINT16 tags in ABCD order:
/// decode, scale with rounding to 6 decimals, range check (none set), deadband
/// (against the last value kept in `last`).
fn chain_native(tags: &[TagSpec], last: &mut [Option<f64>], mut batch: Batch) -> Batch {
    let bytes = std::mem::take(&mut batch.bytes);
    batch.samples.retain_mut(|sample| {
        let (Value::Raw(span), Some(tag)) = (&sample.value, tags.get(sample.tag as usize)) else {
            return true;
        };
        let start = span.start as usize;
        let Some(&[a, b]) = bytes.get(start..start + 2) else {
            sample.value = Value::None;
            sample.quality = Quality::Bad;
            return true;
        };
        let raw = f64::from(u16::from_be_bytes([a, b]));
        let scaled = ((raw * tag.factor + tag.offset) * 1e6).round() / 1e6;
        sample.value = Value::Float(scaled);
        let slot = &mut last[sample.tag as usize];
        let moved = slot.is_none_or(|previous| (scaled - previous).abs() >= tag.deadband);
        if moved {
            *slot = Some(scaled);
        }
        moved
    });
    batch
}

fn chain(budget: Duration) {
    let registry =
        Registry::with_builtins(Runtime::new(RuntimeConfig::default()).expect("runtime"))
            .expect("registry");
    let spec = pipeline::load_str(
        "default.yaml",
        pipeline::DEFAULT_PIPELINE,
        "default",
        std::path::Path::new("."),
    )
    .expect("the default pipeline");
    let built = Pipeline::build(&spec, &registry, Limits::default()).expect("builds");
    let n = 100;
    let mut tags = tags(n);
    for tag in &mut tags {
        tag.data_type = DataType::Uint16;
    }
    let device = built.for_device(&tags).expect("for the tags");
    let input = raw_batch(n);
    let mut last = vec![None; n];
    let wasm_ns = measure(budget, || {
        black_box(device.run(black_box(input.clone())).expect("runs"));
    });
    let native_ns = measure(budget, || {
        black_box(chain_native(&tags, &mut last, black_box(input.clone())));
    });
    println!("\n== the default pipeline (5 stages), {n}-sample batches ==");
    println!(
        "wasm {wasm_ns:.0} ns/batch ({:.1} ns/sample), native {native_ns:.0} ns/batch, ratio wasm/native {:.1}",
        wasm_ns / n as f64,
        wasm_ns / native_ns
    );
}

fn main() {
    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let wasm = BUILTIN
        .iter()
        .find(|b| b.name == "scale")
        .expect("scale is built in")
        .wasm;
    let component = runtime
        .load(ComponentKind::Stage, "scale", wasm)
        .expect("loads");
    let pool = runtime
        .stage_pool(&component, Limits::default())
        .expect("pool");
    println!("batch  wasm ns/batch  native ns/batch  wasm ns/sample  ratio wasm/native");
    for n in [1usize, 10, 100, 1000] {
        let tags = tags(n);
        let processor = pool.processor(&[], &tags).expect("processor");
        let input = batch(n);
        let wasm_ns = measure(Duration::from_millis(700), || {
            black_box(
                processor
                    .process(black_box(input.clone()))
                    .expect("process"),
            );
        });
        let native_ns = measure(Duration::from_millis(700), || {
            black_box(scale_native(&tags, black_box(input.clone())));
        });
        println!(
            "{n:>5}  {wasm_ns:>13.0}  {native_ns:>15.0}  {:>14.1}  {:>17.1}",
            wasm_ns / n as f64,
            wasm_ns / native_ns
        );
    }
    chain(Duration::from_millis(1500));
}
