//! Cost of one stage call through the component runtime vs the same logic native.
//!
//! `cargo bench -p sluice --bench stage_call` (or `cargo xtask bench`). Prints ns per
//! batch and per sample for the `scale` component and a native loop doing the same
//! arithmetic, and their ratio, at several batch sizes.
#![allow(clippy::print_stdout)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use sluice::components::BUILTIN;
use sluice::model::{Access, Batch, ByteOrder, DataType, Quality, Sample, TagSpec, Value};
use sluice::runtime::{ComponentKind, Limits, Runtime, RuntimeConfig};

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
}
