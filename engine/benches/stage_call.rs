//! Cost of stage calls through the component runtime vs the same logic native.
//!
//! `cargo bench -p sluice --bench stage_call` (or `cargo xtask bench`). Part 1: ns per
//! batch and per sample for the `scale` component and a native loop doing the same
//! arithmetic, and their ratio, at several batch sizes. Part 2: the whole default
//! pipeline (swap_bytes, decode, scale, check_range, deadband, one `chain` call) on
//! raw register bytes at 100-sample batches, against two native baselines: the
//! stages' own code (`sluice_guest::stages::Chain`) compiled natively, fed and
//! read as the engine feeds and reads the component (rows to columns and back),
//! and a hand-written loop doing the same steps for these tags. Part 3: the same
//! pipeline with an operator's `scale` in the middle, composed with the built-in
//! stages into one call, against the three calls it took before (the built-in
//! stages before it, the operator's stage, the built-in stages after it), and
//! against the built-in pipeline's one call: what the operator's stage costs.
//! Part 2 also runs the default pipeline with bounds-checked memories (the layout
//! of address spaces too small for guard regions) beside the native layout.
#![allow(clippy::print_stdout)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice::model::{Access, Batch, ByteOrder, DataType, Quality, Sample, Span, TagSpec, Value};
use sluice::pipeline::{self, DevicePipeline, Pipeline};
use sluice::runtime::BUILTIN;
use sluice::runtime::{ComponentKind, Limits, MemoryLayout, Registry, Runtime, RuntimeConfig};
use sluice_guest::columns::Quality as GuestQuality;
use sluice_guest::columns::{Cell, Columns};
use sluice_guest::numeric::{ByteOrder as GuestOrder, DataType as GuestType};
use sluice_guest::settings::SettingValue as GuestSetting;
use sluice_guest::stages::{Chain, Stage as _, Tag};

fn tags(n: usize) -> Vec<TagSpec> {
    (0..n)
        .map(|i| TagSpec {
            key: format!("t{i}").into(),
            address: Default::default(),
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

/// The columns of `batch`, as the engine hands them to a component.
fn columns(batch: Batch) -> Columns {
    let n = batch.samples.len();
    let mut columns = Columns {
        tags: Vec::with_capacity(n),
        qualities: Vec::with_capacity(n),
        kinds: Vec::with_capacity(n),
        bits: Vec::with_capacity(n),
        ts_ms: Vec::with_capacity(n),
        bytes: batch.bytes,
        texts: Vec::new(),
        element_kinds: Vec::new(),
        element_bits: Vec::new(),
    };
    for sample in &batch.samples {
        let cell = match sample.value {
            Value::Raw(span) => Cell::Raw {
                start: span.start,
                len: span.len,
            },
            Value::Float(v) => Cell::Float(v),
            Value::Int(v) => Cell::Int(v),
            _ => Cell::None,
        };
        let quality = match sample.quality {
            Quality::Good => GuestQuality::Good,
            Quality::Uncertain => GuestQuality::Uncertain,
            Quality::Bad => GuestQuality::Bad,
        };
        columns.push_cell(sample.tag, quality, cell, sample.ts_ms);
    }
    columns
}

/// The rows of `columns`, as the engine reads a component's answer.
fn rows(columns: Columns) -> Batch {
    let samples = (0..columns.rows())
        .map(|i| Sample {
            tag: columns.tags[i],
            value: match columns.cell(i) {
                Cell::Float(v) => Value::Float(v),
                Cell::Int(v) => Value::Int(v),
                _ => Value::None,
            },
            quality: match GuestQuality::from_code(columns.qualities[i]) {
                GuestQuality::Good => Quality::Good,
                GuestQuality::Uncertain => Quality::Uncertain,
                GuestQuality::Bad => Quality::Bad,
            },
            ts_ms: columns.ts_ms[i],
        })
        .collect();
    Batch {
        samples,
        bytes: columns.bytes,
    }
}

/// The default pipeline's stages, natively, configured for `tags`.
fn chain_library(tags: &[TagSpec]) -> Chain {
    let settings = [
        ("0.use", GuestSetting::Text("swap_bytes")),
        ("1.use", GuestSetting::Text("decode")),
        ("2.use", GuestSetting::Text("scale")),
        ("2.decimals", GuestSetting::Int(6)),
        ("3.use", GuestSetting::Text("check_range")),
        ("4.use", GuestSetting::Text("deadband")),
    ];
    let tags: Vec<Tag<'_>> = tags
        .iter()
        .map(|t| Tag {
            data_type: GuestType::Uint16,
            array_len: None,
            byte_order: GuestOrder::Abcd,
            factor: t.factor,
            offset: t.offset,
            deadband: t.deadband,
            settings: Vec::new(),
        })
        .collect();
    match Chain::create(&settings, &tags) {
        Ok(chain) => chain,
        Err(issues) => panic!("the default stages refused: {issues:?}"),
    }
}

/// `yaml`'s pipeline built against `registry`, for `tags`.
fn device_pipeline(registry: &Registry, yaml: &str, tags: &[TagSpec]) -> DevicePipeline {
    let spec = pipeline::load_str("bench.yaml", yaml, "bench", std::path::Path::new("."))
        .expect("the pipeline parses");
    Pipeline::build(&spec, registry, Limits::default())
        .expect("builds")
        .for_device(&Arc::from(tags))
        .expect("for the tags")
}

/// The 100 UINT16 tags the pipeline benches run.
fn uint16_tags(n: usize) -> Vec<TagSpec> {
    let mut tags = tags(n);
    for tag in &mut tags {
        tag.data_type = DataType::Uint16;
    }
    tags
}

fn registry(memory_layout: MemoryLayout) -> Registry {
    let runtime = Runtime::new(RuntimeConfig {
        memory_layout,
        ..RuntimeConfig::default()
    })
    .expect("runtime");
    assert_eq!(runtime.config().memory_layout, memory_layout);
    Registry::with_builtins(runtime).expect("registry")
}

fn chain(budget: Duration) {
    let checked = registry(MemoryLayout::BoundsChecked);
    let registry = registry(MemoryLayout::NATIVE);
    let n = 100;
    let tags = uint16_tags(n);
    let device = device_pipeline(&registry, pipeline::DEFAULT_PIPELINE, &tags);
    let checked_device = device_pipeline(&checked, pipeline::DEFAULT_PIPELINE, &tags);
    let input = raw_batch(n);
    let mut last = vec![None; n];
    let library = chain_library(&tags);
    let wasm_ns = measure(budget, || {
        black_box(device.run(black_box(input.clone())).expect("runs"));
    });
    let checked_ns = measure(budget, || {
        black_box(checked_device.run(black_box(input.clone())).expect("runs"));
    });
    let library_ns = measure(budget, || {
        let mut batch = columns(black_box(input.clone()));
        library.process(&mut batch);
        black_box(rows(batch));
    });
    let native_ns = measure(budget, || {
        black_box(chain_native(&tags, &mut last, black_box(input.clone())));
    });
    // Every side above starts from a fresh copy of the input batch.
    let copy_ns = measure(budget, || {
        black_box(black_box(&input).clone());
    });
    println!("\n== the default pipeline (5 stages, one chain call), {n}-sample batches ==");
    println!(
        "                                     ns/batch  ns/sample  wasm / this  net of the copy"
    );
    for (what, ns) in [
        ("wasm (the engine's pipeline)", wasm_ns),
        ("the same stages' code, native", library_ns),
        ("hand-written native loop", native_ns),
    ] {
        println!(
            "{what:<36} {ns:>9.0} {:>10.1} {:>12.1} {:>16.1}",
            ns / n as f64,
            wasm_ns / ns,
            (wasm_ns - copy_ns) / (ns - copy_ns)
        );
    }
    println!("(the copy of the input batch each side starts from: {copy_ns:.0} ns)");
    println!(
        "memories {:?} (this machine's layout): {wasm_ns:.0} ns; bounds-checked: {checked_ns:.0} \
         ns ({:.2}x)",
        MemoryLayout::NATIVE,
        wasm_ns / checked_ns
    );
    println!(
        "target: the chain within 3x of the same logic native: {:.1}x against the stages' own \
         code ({:.1}x net of the copy), {:.1}x against the hand-written loop ({:.1}x net)",
        wasm_ns / library_ns,
        (wasm_ns - copy_ns) / (library_ns - copy_ns),
        wasm_ns / native_ns,
        (wasm_ns - copy_ns) / (native_ns - copy_ns)
    );
}

/// The default pipeline with an operator's `scale` (the test stage
/// `shifted_scale`, the same arithmetic plus 1000) in the middle.
fn custom_stage(budget: Duration) {
    let registry = registry(MemoryLayout::NATIVE);
    let shifted = std::fs::read(
        std::path::Path::new(env!("SLUICE_TEST_COMPONENTS")).join("shifted_scale.wasm"),
    )
    .expect("the test components are built with the engine");
    let n = 100;
    let tags = uint16_tags(n);
    let input = raw_batch(n);
    let built_in = device_pipeline(&registry, pipeline::DEFAULT_PIPELINE, &tags);
    registry
        .install(ComponentKind::Stage, "scale", "operator", &shifted)
        .expect("installs");
    let composed = device_pipeline(&registry, pipeline::DEFAULT_PIPELINE, &tags);
    // The layout before composition: three pipelines, one call each.
    let split = [
        "name: before\nstages:\n  - use: swap_bytes\n  - use: decode\n",
        "name: custom\nstages:\n  - use: scale\n    settings: {decimals: 6}\n",
        "name: after\nstages:\n  - use: check_range\n  - use: deadband\n",
    ]
    .map(|yaml| device_pipeline(&registry, yaml, &tags));
    let built_in_ns = measure(budget, || {
        black_box(built_in.run(black_box(input.clone())).expect("runs"));
    });
    let composed_ns = measure(budget, || {
        black_box(composed.run(black_box(input.clone())).expect("runs"));
    });
    let split_ns = measure(budget, || {
        let mut batch = black_box(input.clone());
        for part in &split {
            batch = part.run(batch).expect("runs");
        }
        black_box(batch);
    });
    println!(
        "\n== an operator's `scale` in the middle of the default pipeline, {n}-sample batches =="
    );
    println!("                                          calls  ns/batch  more than built-in");
    for (what, calls, ns) in [
        ("built-in stages only (one chain call)", "1", built_in_ns),
        ("composed with the built-ins", "1+1", composed_ns),
        ("three calls (chain, stage, chain)", "3", split_ns),
    ] {
        println!("{what:<41} {calls:>5} {ns:>9.0} {:>19.0}", ns - built_in_ns);
    }
    println!(
        "target: a custom stage costs at most one more crossing: composed {:.0} ns more than \
         the built-in pipeline, the three calls {:.0} ns more (1+1: one call from the engine, \
         one between the components inside it)",
        composed_ns - built_in_ns,
        split_ns - built_in_ns
    );
}

fn main() {
    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let wasm = BUILTIN
        .iter()
        .find(|b| b.name == "scale")
        .expect("scale is built in")
        .wasm
        .inflate("scale")
        .expect("inflates");
    let component = runtime
        .load(ComponentKind::Stage, "scale", &wasm)
        .expect("loads");
    let pool = runtime
        .stage_pool(&component, Limits::default())
        .expect("pool");
    println!("batch  wasm ns/batch  native ns/batch  wasm ns/sample  ratio wasm/native");
    for n in [1usize, 10, 100, 1000] {
        let tags = tags(n);
        let processor = pool
            .processor(&[], Arc::from(&tags[..]))
            .expect("processor");
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
    custom_stage(Duration::from_millis(1500));
}
