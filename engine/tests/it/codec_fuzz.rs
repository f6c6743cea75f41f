//! Fuzzing every built-in codec through the component boundary: arbitrary and
//! mutated response bytes go to `frame-length`, `check-handshake`, `parse-read`
//! and `check-write`. A panic in the guest is a trap, a hang runs out of the CPU
//! budget and an unbounded allocation hits the memory cap: all three fail the
//! call with a `CallError`, which fails this test. The codec may refuse a frame
//! (`FrameError`); it may not fail.
//!
//! A smoke run by default; `SLUICE_FUZZ_ITERATIONS=1000000 cargo test --release
//! --test codec_fuzz` runs longer, `SLUICE_FUZZ_SEED` replays a run. The same
//! codecs compiled natively are fuzzed with coverage guidance in `fuzz/`
//! (docs/fuzzing.md); this test checks what only the boundary can: the built
//! components as the engine loads them, under its limits.

use std::sync::Arc;

use crate::common::{Rng, builtin, runtime, setting, tag};
use sluice::model::{DataType, Setting, SettingValue, TagSpec, Value};
use sluice::runtime::BUILTIN;
use sluice::runtime::{CallError, CodecPool, CodecSession, ComponentKind, Limits};

/// Tight limits: a frame of a few KiB never needs more.
const LIMITS: Limits = Limits {
    memory_bytes: 8 << 20,
    fuel_per_call: 5_000_000,
    instances: 1,
    ..Limits::DEFAULT
};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A codec's settings and a few tags of every kind, as a device would have them.
fn setup(codec: &str) -> (Vec<Setting>, Vec<TagSpec>) {
    let text = |k: &str, v: &str| setting(k, SettingValue::Text(v.into()));
    let int = |k: &str, v: i64| setting(k, SettingValue::Int(v));
    match codec {
        "modbus_tcp" | "modbus_rtu" => (
            vec![int("unitId", 1)],
            vec![
                tag("a", "40001", DataType::Int16),
                tag("b", "40003", DataType::Float32),
                tag("c", "40010.3", DataType::Bool),
                tag("d", "00001", DataType::Bool),
                tag("e", "30001", DataType::Uint32),
            ],
        ),
        "s7" => (
            vec![text("plcType", "S1200"), int("rack", 0), int("slot", 1)],
            vec![
                tag("a", "DB1.0", DataType::Float32),
                tag("b", "DB1.6.0", DataType::Bool),
                tag("c", "DB2.DBW4", DataType::Int16),
                tag("d", "M10.1", DataType::Bool),
                tag("e", "MD20", DataType::Uint32),
            ],
        ),
        "mc" => (
            vec![
                text("series", "Q_L"),
                text("frameType", "FRAME_3E"),
                int("monitorTimer", 4),
            ],
            vec![
                tag("a", "D100", DataType::Int16),
                tag("b", "D300", DataType::Int32),
                tag("c", "M10", DataType::Bool),
                tag("d", "X1F", DataType::Bool),
                tag("e", "D200.3", DataType::Bool),
            ],
        ),
        other => panic!("codec `{other}` has no fuzz setup: add one here"),
    }
}

fn pool(name: &str) -> Arc<CodecPool> {
    let runtime = runtime();
    let component = runtime
        .load(ComponentKind::Codec, name, &builtin(name))
        .expect("loads");
    runtime.codec_pool(&component, LIMITS).expect("pool")
}

/// A frame built from `seed` (a frame the codec itself produced) by one of a few
/// mutations, or plain random bytes.
fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut frame = seed.to_vec();
    match rng.below(6) {
        0 => (0..rng.below(300)).map(|_| rng.byte()).collect(),
        1 => {
            for _ in 0..=rng.below(4) {
                if !frame.is_empty() {
                    let at = rng.below(frame.len());
                    frame[at] ^= 1 << rng.below(8);
                }
            }
            frame
        }
        2 => {
            frame.truncate(rng.below(frame.len() + 1));
            frame
        }
        3 => {
            frame.extend((0..rng.below(600)).map(|_| rng.byte()));
            frame
        }
        4 => {
            // Random bytes over the length fields, wherever a codec keeps them.
            for at in 0..frame.len().min(12) {
                if rng.below(3) == 0 {
                    frame[at] = rng.byte();
                }
            }
            frame
        }
        _ => {
            let at = rng.below(frame.len() + 1);
            frame.splice(at..at, (0..rng.below(16)).map(|_| 0xFF));
            frame
        }
    }
}

fn survived<T>(codec: &str, what: &str, frame: &[u8], result: Result<T, CallError>) {
    if let Err(error) = result {
        panic!("{codec}: {what} failed on {frame:02x?}: {error}");
    }
}

fn fuzz(codec: &str, iterations: u64, seed: u64) {
    let (settings, tags) = setup(codec);
    let pool = pool(codec);
    let session: CodecSession = pool
        .session(&settings, Arc::from(&tags[..]))
        .expect("session");
    let all: Vec<u32> = (0..tags.len() as u32).collect();
    let plan = session.plan(&all).expect("plan");
    let mut seeds: Vec<(Option<u32>, Vec<u8>)> = Vec::new();
    for step in 0..4 {
        match session.handshake(step).expect("handshake") {
            Some(frame) => seeds.push((None, frame)),
            None => break,
        }
    }
    for request in &plan {
        if let Ok(Ok(frame)) = session.encode_read(request.id) {
            seeds.push((Some(request.id), frame));
        }
    }
    if let Ok(Ok(frame)) = session.encode_write(0, Value::Int(1)) {
        seeds.push((None, frame));
    }
    assert!(!seeds.is_empty(), "{codec}: nothing to mutate");
    let header = session.header_len().expect("header") as usize;
    let mut rng = Rng(seed | 1);
    for _ in 0..iterations {
        let (request, base) = &seeds[rng.below(seeds.len())];
        let frame = mutate(&mut rng, base);
        let head = &frame[..header.min(frame.len())];
        survived(codec, "frame-length", head, session.frame_length(head));
        match rng.below(3) {
            0 => {
                let step = rng.below(3) as u32;
                survived(
                    codec,
                    "check-handshake",
                    &frame,
                    session.check_handshake(step, &frame),
                );
            }
            1 => {
                let id = request.unwrap_or_else(|| plan.first().map_or(0, |r| r.id));
                survived(
                    codec,
                    "parse-read",
                    &frame,
                    session.parse_read(id, &frame, 0),
                );
                // A fresh read in flight, as the engine would have sent.
                let _ = session.encode_read(id);
            }
            _ => {
                let _ = session.encode_write(rng.below(tags.len()) as u32, Value::Int(1));
                survived(codec, "check-write", &frame, session.check_write(&frame));
            }
        }
    }
    assert_eq!(pool.failures(), 0, "{codec}: no call may fail");
}

#[test]
fn every_builtin_codec_survives_arbitrary_response_bytes() {
    let iterations = env_u64("SLUICE_FUZZ_ITERATIONS", 20_000);
    let seed = env_u64("SLUICE_FUZZ_SEED", 0x5EED_CAFE);
    let codecs: Vec<&str> = BUILTIN
        .iter()
        .filter(|b| b.kind == ComponentKind::Codec)
        .map(|b| b.name)
        .collect();
    assert!(codecs.contains(&"modbus_tcp") && codecs.contains(&"modbus_rtu"));
    for codec in codecs {
        fuzz(codec, iterations, seed);
    }
}
