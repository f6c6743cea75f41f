//! Decoders through the component runtime: the built-in `json` and `binary`
//! decoding messages and encoding writes as the engine calls them, and a
//! hostile decoder contained to its call, on a thread of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::common::{builtin, runtime, setting, tag, test_component};
use sluice::model::{Access, ByteOrder, DataType, Quality, SettingValue, TagSpec, Value};
use sluice::runtime::{CallError, ComponentKind, DecoderPool, Limit, Limits, Refusal, Runtime};

fn pool(runtime: &Runtime, name: &str, bytes: &[u8], limits: Limits) -> Arc<DecoderPool> {
    let component = runtime
        .load(ComponentKind::Decoder, name, bytes)
        .expect("loads");
    runtime.decoder_pool(&component, limits).expect("pool")
}

/// The test decoder that misbehaves on purpose, under `limits`.
fn hostile(runtime: &Runtime, limits: Limits) -> Arc<DecoderPool> {
    pool(
        runtime,
        "hostile_decoder",
        &test_component("hostile_decoder"),
        limits,
    )
}

fn command_topic() -> Vec<sluice::model::Setting> {
    vec![setting(
        "commandTopic",
        SettingValue::Text("meters/7/set".into()),
    )]
}

#[test]
fn json_gives_each_tag_its_value_and_refuses_only_those_at_fault() {
    let runtime = runtime();
    let pool = pool(&runtime, "json", &builtin("json"), Limits::default());
    let tags: Arc<[TagSpec]> = Arc::from([
        tag("temp", "/sensors/0/temp", DataType::Float32),
        tag("count", "/count", DataType::Uint16),
        TagSpec {
            length: 8,
            ..tag("name", "/name", DataType::String)
        },
        TagSpec {
            length: 2,
            ..tag("pair", "/pair", DataType::Int32)
        },
    ]);
    let decoder = pool
        .decoder(&command_topic(), Arc::clone(&tags), false)
        .expect("decoder");
    let decoded = decoder
        .decode(
            "meters/7/up",
            br#"{"sensors":[{"temp":21.5}],"count":70000,"name":"m7","pair":[1,-2]}"#,
            1000,
        )
        .expect("decoded");
    let values: Vec<(u32, Value, Quality, i64)> = decoded
        .samples
        .samples
        .iter()
        .map(|s| (s.tag, s.value.clone(), s.quality, s.ts_ms))
        .collect();
    assert_eq!(
        values,
        [
            (0, Value::Float(21.5), Quality::Good, 1000),
            (2, Value::Text("m7".into()), Quality::Good, 1000),
            (
                3,
                Value::Array(Box::new([Value::Int(1), Value::Int(-2)])),
                Quality::Good,
                1000
            ),
        ]
    );
    assert_eq!(
        decoded.refusals,
        [Refusal {
            tag: Some(1),
            message: "`/count`: 70000 is out of the range of UINT16".into(),
        }]
    );
    let not_json = decoder
        .decode("meters/7/up", b"\x01\x02", 1)
        .expect("decoded");
    assert!(not_json.samples.samples.is_empty());
    assert!(
        matches!(&not_json.refusals[..], [Refusal { tag: None, message }] if message.starts_with("the message is not JSON")),
        "{:?}",
        not_json.refusals
    );
    let write = decoder
        .encode(0, Value::Float(22.5))
        .expect("called")
        .expect("encoded");
    assert_eq!(write.topic, "meters/7/set");
    assert_eq!(write.payload, br#"{"sensors":{"0":{"temp":22.5}}}"#);
    assert_eq!(
        decoder.encode(3, Value::Int(1)).expect("called"),
        Err("the tag is an array of 2 values".into())
    );
}

#[test]
fn json_refuses_a_tag_that_is_no_pointer_when_it_is_made() {
    let runtime = runtime();
    let pool = pool(&runtime, "json", &builtin("json"), Limits::default());
    let refused = pool
        .decoder(
            &[],
            Arc::from([tag("temp", "temp", DataType::Float32)]),
            false,
        )
        .expect_err("refused");
    assert!(
        refused
            .to_string()
            .contains("`temp` is not a JSON Pointer: it starts with `/` (`/temp`)"),
        "{refused}"
    );
}

#[test]
fn binary_hands_the_pipeline_each_tags_bytes_as_a_register_would() {
    let runtime = runtime();
    let pool = pool(&runtime, "binary", &builtin("binary"), Limits::default());
    let tags: Arc<[TagSpec]> = Arc::from([
        TagSpec {
            byte_order: ByteOrder::Cdab,
            ..tag("flow", "0", DataType::Float32)
        },
        tag("alarm", "4.3", DataType::Bool),
        TagSpec {
            access: Access::Read,
            ..tag("late", "6", DataType::Uint32)
        },
    ]);
    let decoder = pool
        .decoder(&command_topic(), Arc::clone(&tags), false)
        .expect("decoder");
    let decoded = decoder
        .decode("meters/7/up", &[0x00, 0x00, 0x41, 0xA8, 0b1000, 0xFF], 5)
        .expect("decoded");
    let samples = &decoded.samples.samples;
    assert_eq!(samples.len(), 2);
    let Value::Raw(span) = &samples[0].value else {
        panic!("raw bytes: {samples:?}");
    };
    let start = span.start as usize;
    assert_eq!(
        &decoded.samples.bytes[start..start + span.len as usize],
        [0x00, 0x00, 0x41, 0xA8]
    );
    assert_eq!(samples[1].value, Value::Bool(true));
    assert_eq!(
        decoded.refusals,
        [Refusal {
            tag: Some(2),
            message: "the message has 6 bytes; `late` takes bytes 6 to 9".into(),
        }]
    );
    let write = decoder
        .encode(0, Value::Float(21.0))
        .expect("called")
        .expect("encoded");
    assert_eq!(write.payload, [0x00, 0x00, 0x41, 0xA8]);
}

#[test]
fn a_hostile_decoder_fails_its_call_only_and_decodes_the_next_message() {
    let runtime = runtime();
    let limits = Limits {
        memory_bytes: 4 << 20,
        fuel_per_call: 2_000_000,
        instances: 1,
        ..Limits::DEFAULT
    };
    let pool = hostile(&runtime, limits);
    let tags: Arc<[TagSpec]> = Arc::from([tag("n", "0", DataType::Uint16)]);
    for (mode, expected) in [("loop", "fuel"), ("memory", "memory"), ("trap", "trap")] {
        let decoder = pool
            .decoder(
                &[setting("mode", SettingValue::Text(mode.into()))],
                Arc::clone(&tags),
                true,
            )
            .expect("decoder");
        let error = decoder.decode("t", b"boom", 1).expect_err("contained");
        let matched = matches!(
            (&error, expected),
            (
                CallError::LimitExceeded {
                    limit: Limit::Cpu { .. },
                    ..
                },
                "fuel"
            ) | (
                CallError::LimitExceeded {
                    limit: Limit::Memory { .. },
                    ..
                },
                "memory"
            ) | (CallError::Trap { .. }, "trap")
        );
        assert!(matched, "{mode}: {error}");
        // The instance is rebuilt: the next message of the same device decodes.
        let next = decoder.decode("t", b"fine", 2).expect("decoded after");
        assert_eq!(next.samples.samples[0].value, Value::Uint(4), "{mode}");
    }
    assert_eq!(pool.failures(), 3);
}

/// A decoder that loops until its budget: `isolated` (an upload), or the
/// engine's own way of calling, on the calling thread. Returns how often a
/// task that wants the only async thread every millisecond got it meanwhile.
async fn ticks_while_a_decoder_loops(isolated: bool) -> u32 {
    let runtime = runtime();
    let limits = Limits {
        // ~50 ms of looping at this machine's ~10 M fuel units a millisecond.
        fuel_per_call: 500_000_000,
        ..Limits::DEFAULT
    };
    let pool = hostile(&runtime, limits);
    let mode = [setting("mode", SettingValue::Text("loop".into()))];
    let tags = Arc::from([tag("n", "0", DataType::Uint16)]);
    let decoder = Arc::new(pool.decoder(&mode, tags, isolated).expect("decoder"));
    let ticks = Arc::new(AtomicU32::new(0));
    let ticker = tokio::spawn({
        let ticks = Arc::clone(&ticks);
        async move {
            loop {
                tokio::time::sleep(Duration::from_millis(1)).await;
                ticks.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    // The ticker has started and sleeps: the loop is what holds or frees the thread.
    tokio::task::yield_now().await;
    let error = decoder
        .call_in_round("decode", |decoder| decoder.decode("t", b"boom", 1))
        .await
        .expect_err("the budget stops it");
    ticker.abort();
    assert!(error.to_string().contains("fuel"), "{error}");
    ticks.load(Ordering::Relaxed)
}

#[tokio::test(flavor = "current_thread")]
async fn an_uploaded_decoder_loops_on_a_sandbox_thread_not_the_devices_async_one() {
    let apart = ticks_while_a_decoder_loops(true).await;
    assert!(apart >= 3, "the async thread was held: {apart} ticks");
    // Called in place (the built-ins' way), the same loop holds the thread.
    assert_eq!(ticks_while_a_decoder_loops(false).await, 0);
}
