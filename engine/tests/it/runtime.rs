//! The component runtime against real components: the embedded defaults and the
//! hostile guests of `components/testing`.

use std::path::PathBuf;
use std::sync::Arc;

use crate::common::{batch, builtin, runtime, setting, test_component};
use sluice::model::{DataType, Quality, SettingValue, TagSpec, Value};
use sluice::runtime::BUILTIN;
use sluice::runtime::{
    CallError, ComponentKind, Limit, Limits, LoadError, MemoryLayout, Registry, Runtime,
    RuntimeConfig, StagePool,
};

fn tag(key: &str, factor: f64, offset: f64) -> TagSpec {
    TagSpec {
        factor,
        offset,
        ..crate::common::tag(key, "40001", DataType::Int16)
    }
}

fn pool(runtime: &Runtime, name: &str, bytes: &[u8], limits: Limits) -> Arc<StagePool> {
    let component = runtime
        .load(ComponentKind::Stage, name, bytes)
        .expect("loads");
    runtime.stage_pool(&component, limits).expect("pool")
}

const SMALL: Limits = Limits {
    memory_bytes: 4 << 20,
    fuel_per_call: 2_000_000,
    instances: 1,
    ..Limits::DEFAULT
};

/// Every built-in component must have host tests; add its name here with them
/// (`scale`: this file; stages and `chain`: `stages.rs`; `modbus_tcp`: `modbus_codec.rs`;
/// `modbus_rtu`: `modbus_rtu.rs`; `alarm_rules`: `alarms.rs`; `s7`, `mc`: `s7_mc_peers.rs`;
/// every codec: `codec_fuzz.rs`; `json`, `binary`: `decoders.rs`).
#[test]
fn every_builtin_component_is_tested() {
    let tested = [
        "alarm_rules",
        "binary",
        "chain",
        "check_range",
        "deadband",
        "decode",
        "json",
        "mc",
        "modbus_rtu",
        "modbus_tcp",
        "s7",
        "scale",
        "swap_bytes",
    ];
    let mut names: Vec<_> = BUILTIN.iter().map(|b| b.name).collect();
    names.sort_unstable();
    assert_eq!(names, tested, "a built-in component has no host test");
}

#[test]
fn scale_applies_factor_and_offset_per_tag() {
    let runtime = runtime();
    let pool = pool(&runtime, "scale", &builtin("scale"), Limits::default());
    let tags = [
        tag("t", 0.1, 0.0),
        tag("p", 2.0, -5.0),
        tag("n", 1.0, 0.0),
        tag("f", 0.5, 0.0),
    ];
    let processor = pool
        .processor(
            &[setting("decimals", SettingValue::Int(3))],
            Arc::from(&tags[..]),
        )
        .expect("processor");
    let out = processor
        .process(batch(&[
            Value::Int(123),
            Value::Uint(10),
            Value::Int(-7),
            Value::Bool(true),
        ]))
        .expect("process");
    let values: Vec<_> = out.samples.iter().map(|s| s.value.clone()).collect();
    assert_eq!(
        values,
        [
            Value::Float(12.3),
            Value::Float(15.0),
            Value::Int(-7),
            Value::Bool(true)
        ],
        "identity scaling keeps integers exact; booleans pass through"
    );
}

#[test]
fn scale_marks_non_finite_results_bad() {
    let runtime = runtime();
    let pool = pool(&runtime, "scale", &builtin("scale"), Limits::default());
    let processor = pool
        .processor(&[], Arc::from([tag("x", 1e300, 0.0)]))
        .expect("processor");
    let out = processor
        .process(batch(&[Value::Float(1e300)]))
        .expect("process");
    assert_eq!(out.samples[0].quality, Quality::Bad);
    assert_eq!(out.samples[0].value, Value::None);
}

#[test]
fn scale_reports_every_bad_setting() {
    let runtime = runtime();
    let pool = pool(&runtime, "scale", &builtin("scale"), Limits::default());
    let error = pool
        .processor(
            &[
                setting("decimals", SettingValue::Int(40)),
                setting("rounding", SettingValue::Bool(true)),
            ],
            Arc::default(),
        )
        .expect_err("refused");
    let CallError::Config { issues, .. } = error else {
        panic!("expected a config error, got {error}");
    };
    let keys: Vec<_> = issues.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(keys, ["decimals", "rounding"]);
    assert!(
        issues[1].message.contains("expected one of: decimals"),
        "{}",
        issues[1].message
    );
    // Refused settings are the configuration's fault: the component's calls
    // did not fail (its driver stays online through a refused reload).
    assert_eq!(pool.failures(), 0);
}

#[test]
fn an_infinite_loop_is_stopped_by_the_cpu_budget() {
    let runtime = runtime();
    let pool = pool(&runtime, "hostile", &test_component("hostile"), SMALL);
    let spinner = pool
        .processor(
            &[setting("mode", SettingValue::Text("loop".into()))],
            Arc::default(),
        )
        .expect("processor");
    let error = spinner
        .process(batch(&[Value::Int(1)]))
        .expect_err("stopped");
    assert!(
        matches!(
            error,
            CallError::LimitExceeded {
                limit: Limit::Cpu { budget: 2_000_000 },
                ..
            }
        ),
        "{error}"
    );
    assert!(
        error.to_string().contains("hostile") && error.to_string().contains("2000000 fuel"),
        "{error}"
    );
    // The failed instance is rebuilt: a well-behaved processor of the same pool works.
    let echo = pool
        .processor(&[], Arc::default())
        .expect("processor after rebuild");
    assert_eq!(
        echo.process(batch(&[Value::Int(5)]))
            .expect("echo")
            .samples
            .len(),
        1
    );
    assert_eq!(pool.failures(), 1);
}

#[test]
fn a_memory_bomb_is_refused_at_the_cap() {
    let runtime = runtime();
    let pool = pool(&runtime, "hostile", &test_component("hostile"), SMALL);
    let bomb = pool
        .processor(
            &[setting("mode", SettingValue::Text("memory".into()))],
            Arc::default(),
        )
        .expect("processor");
    let error = bomb.process(batch(&[Value::Int(1)])).expect_err("refused");
    match error {
        CallError::LimitExceeded {
            limit: Limit::Memory { cap, requested },
            ..
        } => {
            assert_eq!(cap, 4 << 20);
            assert!(requested > cap);
        }
        other => panic!("expected the memory cap, got {other}"),
    }
    assert!(
        bomb.process(batch(&[Value::Int(1)])).is_err(),
        "it misbehaves again, and is stopped again"
    );
}

#[test]
fn a_trap_fails_only_that_call_and_leaves_other_instances_working() {
    let runtime = runtime();
    let hostile = pool(&runtime, "hostile", &test_component("hostile"), SMALL);
    let scale = pool(&runtime, "scale", &builtin("scale"), SMALL);
    let scaler = scale
        .processor(&[], Arc::from([tag("x", 2.0, 0.0)]))
        .expect("processor");
    // Traps only on a batch carrying 666: the same processor recovers afterwards.
    let trapper = hostile
        .processor(
            &[
                setting("mode", SettingValue::Text("trap".into())),
                setting("trigger", SettingValue::Int(666)),
            ],
            Arc::default(),
        )
        .expect("processor");
    let neighbour = hostile.processor(&[], Arc::default()).expect("processor");
    for round in 0..5 {
        let error = trapper
            .process(batch(&[Value::Int(666)]))
            .expect_err("traps");
        assert!(
            matches!(
                &error,
                CallError::Trap {
                    function: "process",
                    detail,
                    ..
                } if detail.contains("unreachable")
            ),
            "{error}"
        );
        assert!(
            trapper.process(batch(&[Value::Int(round)])).is_ok(),
            "rebuilt after the trap"
        );
        assert!(
            neighbour.process(batch(&[Value::Int(round)])).is_ok(),
            "same pool, other device"
        );
        let out = scaler
            .process(batch(&[Value::Int(round)]))
            .expect("other pool unaffected");
        assert_eq!(out.samples[0].value, Value::Float(2.0 * round as f64));
    }
    assert_eq!(hostile.failures(), 5);
    assert_eq!(scale.failures(), 0);
}

/// Guard regions (no bounds checks in the compiled code) and bounds checks both
/// stop a read far past a component's memory, and compute the same values.
#[test]
fn a_read_past_the_memory_traps_in_both_memory_layouts() {
    for layout in [MemoryLayout::Guarded, MemoryLayout::BoundsChecked] {
        let runtime = Runtime::new(RuntimeConfig {
            memory_layout: layout,
            ..RuntimeConfig::default()
        })
        .expect("runtime");
        assert_eq!(runtime.config().memory_layout, layout, "no fallback here");
        let hostile = pool(&runtime, "hostile", &test_component("hostile"), SMALL);
        let stray = hostile
            .processor(
                &[
                    setting("mode", SettingValue::Text("stray".into())),
                    setting("trigger", SettingValue::Int(666)),
                ],
                Arc::default(),
            )
            .expect("processor");
        let error = stray
            .process(batch(&[Value::Int(666)]))
            .expect_err("stopped");
        assert!(
            matches!(
                &error,
                CallError::Trap {
                    function: "process",
                    detail,
                    ..
                } if detail.contains("out of bounds memory access")
            ),
            "{layout:?}: {error}"
        );
        let echoed = stray
            .process(batch(&[Value::Int(1)]))
            .expect("rebuilt after the trap");
        assert_eq!(echoed.samples.len(), 1);
        let scaler = pool(&runtime, "scale", &builtin("scale"), SMALL)
            .processor(&[], Arc::from([tag("x", 0.5, -3.0)]))
            .expect("processor");
        let out = scaler.process(batch(&[Value::Int(-7)])).expect("scaled");
        assert_eq!(out.samples[0].value, Value::Float(-6.5), "{layout:?}");
    }
}

#[test]
fn a_component_of_the_wrong_world_is_refused_at_load() {
    let runtime = runtime();
    for kind in [ComponentKind::Codec, ComponentKind::Rules] {
        let error = runtime
            .load(kind, "scale", &builtin("scale"))
            .expect_err("wrong world");
        assert!(matches!(error, LoadError::WrongWorld { .. }), "{error}");
        let text = error.to_string();
        assert!(
            text.contains("`scale`") && text.contains(kind.as_str()),
            "{text}"
        );
    }
    let error = runtime
        .load(ComponentKind::Stage, "junk", b"\0asm not really")
        .expect_err("junk");
    assert!(matches!(error, LoadError::Invalid { .. }), "{error}");
    // A file that is no WebAssembly at all says so in one line.
    let error = runtime
        .load(ComponentKind::Stage, "text", b"hello world")
        .expect_err("text");
    assert_eq!(
        error.to_string(),
        "component `text` is not a valid WebAssembly component: not a .wasm file: it starts \
         with [68 65 6c 6c], a WebAssembly binary with `\\0asm` (00 61 73 6d)"
    );
}

#[test]
fn a_component_built_against_an_older_wit_is_refused_naming_the_versions() {
    // `scale` as it was built against the first version of the WIT package.
    let old = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scale-wit-0.1.0.wasm"),
    )
    .expect("fixture");
    let error = runtime()
        .load(ComponentKind::Stage, "scale", &old)
        .expect_err("an older WIT");
    assert!(matches!(error, LoadError::WitVersion { .. }), "{error}");
    let text = error.to_string();
    assert!(
        text.contains("`scale` was built against sluice:dataflow@0.1.0")
            && text.contains("this engine needs sluice:dataflow@0.7.0"),
        "{text}"
    );
}

#[test]
fn a_batch_whose_columns_do_not_line_up_fails_the_call() {
    let runtime = runtime();
    let hostile = pool(&runtime, "hostile", &test_component("hostile"), SMALL);
    let ragged = hostile
        .processor(
            &[setting("mode", SettingValue::Text("ragged".into()))],
            Arc::default(),
        )
        .expect("processor");
    let error = ragged
        .process(batch(&[Value::Int(1), Value::Int(2)]))
        .expect_err("refused");
    assert!(
        matches!(
            error,
            CallError::Malformed {
                function: "process",
                ..
            }
        ),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("a batch with 3 tags but 2 qualities"),
        "{error}"
    );
    assert_eq!(hostile.failures(), 1);
}

#[test]
fn a_failed_install_never_replaces_the_active_version() {
    let registry = Registry::with_builtins(runtime()).expect("registry");
    let before = registry.active("scale").expect("builtin scale");
    let error = registry
        .install(ComponentKind::Stage, "scale", "2.0.0", b"garbage")
        .expect_err("refused");
    assert!(matches!(error, LoadError::Invalid { .. }), "{error}");
    assert!(Arc::ptr_eq(
        &before,
        &registry.active("scale").expect("still there")
    ));
    assert!(
        registry
            .install(ComponentKind::Codec, "scale", "2.0.0", &builtin("scale"))
            .is_err()
    );

    // A good new version takes over; rollback restores the earlier one.
    let hostile = test_component("hostile");
    let new = registry
        .install(ComponentKind::Stage, "scale", "2.0.0", &hostile)
        .expect("installs");
    assert_eq!(registry.active("scale").expect("active").hash(), new.hash());
    registry
        .activate("scale", sluice::runtime::BUILTIN_VERSION)
        .expect("rollback");
    assert!(Arc::ptr_eq(
        &before,
        &registry.active("scale").expect("active")
    ));
    let listed = registry.list();
    assert_eq!(listed.iter().filter(|c| c.name == "scale").count(), 2);
}

#[test]
fn precompiled_artifacts_are_cached_by_content_hash() {
    let dir = tempdir();
    let config = RuntimeConfig {
        cache_dir: Some(dir.clone()),
        ..RuntimeConfig::default()
    };
    let first = Runtime::new(config.clone()).expect("runtime");
    let loaded = first
        .load(ComponentKind::Stage, "scale", &builtin("scale"))
        .expect("loads");
    let files: Vec<_> = std::fs::read_dir(&dir)
        .expect("cache dir")
        .filter_map(Result::ok)
        .collect();
    assert_eq!(files.len(), 1);
    let file = files[0].path();
    assert!(
        file.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(loaded.hash()))
    );

    // A second engine uses the artifact; a corrupt artifact is recompiled, not fatal.
    let second = Runtime::new(config.clone()).expect("runtime");
    second
        .load(ComponentKind::Stage, "scale", &builtin("scale"))
        .expect("from cache");
    std::fs::write(&file, b"corrupt").expect("write");
    let third = Runtime::new(config).expect("runtime");
    let reloaded = third
        .load(ComponentKind::Stage, "scale", &builtin("scale"))
        .expect("recompiled");
    let pool = third
        .stage_pool(&reloaded, Limits::default())
        .expect("pool");
    assert!(pool.processor(&[], Arc::default()).is_ok());
    assert!(std::fs::read(&file).expect("rewritten").len() > 1000);
    std::fs::remove_dir_all(&dir).ok();
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "sluice-test-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn a_pool_failing_calls_in_a_row_is_quarantined_then_tried_again() {
    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let limits = Limits {
        quarantine_after: 3,
        quarantine_for: std::time::Duration::from_millis(300),
        ..SMALL
    };
    let pool = pool(&runtime, "hostile", &test_component("hostile"), limits);
    // Traps on batches carrying 666 only: a good batch in between resets the count.
    let trapper = pool
        .processor(
            &[
                setting("mode", SettingValue::Text("trap".into())),
                setting("trigger", SettingValue::Int(666)),
            ],
            Arc::default(),
        )
        .expect("processor");
    let bad = || trapper.process(batch(&[Value::Int(666)]));
    let good = || trapper.process(batch(&[Value::Int(1)]));
    assert!(bad().is_err() && bad().is_err());
    good().expect("a success breaks the run of failures");
    assert!(bad().is_err() && bad().is_err() && !pool.quarantined());
    assert!(bad().is_err(), "the third failure in a row");
    assert!(pool.quarantined());
    assert_eq!(pool.quarantines(), 1);
    let failures = pool.failures();
    // Quarantined: refused at once, without running the component (not counted as a failure).
    match good() {
        Err(
            error @ CallError::Quarantined {
                failures: 3,
                remaining,
                ..
            },
        ) => {
            let text = error.to_string();
            assert!(
                text.starts_with("component `hostile` is quarantined for 300 ms after failing 3"),
                "{text}"
            );
            assert!(remaining <= std::time::Duration::from_millis(300));
        }
        other => panic!("expected a quarantine refusal, got {other:?}"),
    }
    assert_eq!(pool.failures(), failures);
    std::thread::sleep(std::time::Duration::from_millis(350));
    assert!(!pool.quarantined());
    good().expect("tried again after the quarantine");
}

#[test]
fn an_operators_stage_is_composed_into_the_chain_once_and_dropped_when_unused() {
    let registry = Registry::with_builtins(runtime()).expect("registry");
    let shifted = registry
        .install(
            ComponentKind::Stage,
            "shifted",
            "1",
            &test_component("shifted_scale"),
        )
        .expect("installs");
    let composed = registry.plugged_into_chain(&shifted).expect("composes");
    assert_eq!(composed.name(), "shifted");
    assert_eq!(composed.kind(), ComponentKind::Stage);
    let again = registry.plugged_into_chain(&shifted).expect("composes");
    assert!(Arc::ptr_eq(&composed, &again), "composed once while in use");
    // The composition runs the built-in stages and the plugged one, in order.
    let pool = registry
        .runtime()
        .stage_pool(&composed, Limits::default())
        .expect("pool");
    let settings = [
        setting("0.use", SettingValue::Text("scale".into())),
        setting("1.use", SettingValue::Text("shifted".into())),
        setting("plug", SettingValue::Int(1)),
    ];
    let processor = pool
        .processor(&settings, Arc::from([tag("t", 2.0, 0.0)]))
        .expect("processor");
    let out = processor.process(batch(&[Value::Int(3)])).expect("runs");
    // 3 x 2, then the plugged stage: 6 x 2 + 1000.
    assert_eq!(out.samples[0].value, Value::Float(1012.0));
    // The plugged stage's refusal comes back keyed by its position.
    let refused = pool
        .processor(
            &[
                setting("0.use", SettingValue::Text("shifted".into())),
                setting("0.bogus", SettingValue::Int(1)),
                setting("plug", SettingValue::Int(0)),
            ],
            Arc::default(),
        )
        .expect_err("refused");
    assert!(refused.to_string().contains("`0.bogus`"), "{refused}");
    let unplaced = pool
        .processor(&settings[..2], Arc::default())
        .expect_err("no plug position");
    assert!(unplaced.to_string().contains("`plug`"), "{unplaced}");

    // No pipeline holds it: the next composition drops it.
    let first = Arc::downgrade(&composed);
    drop((composed, again, processor, pool));
    assert!(first.upgrade().is_some(), "kept until the next composition");
    let other = registry
        .install(
            ComponentKind::Stage,
            "hostile",
            "1",
            &test_component("hostile"),
        )
        .expect("installs");
    let _hostile = registry.plugged_into_chain(&other).expect("composes");
    assert!(first.upgrade().is_none(), "dropped");

    let codec = registry.active("modbus_tcp").expect("built in");
    let error = registry
        .plugged_into_chain(&codec)
        .expect_err("not a stage");
    assert!(
        error.to_string().contains("`modbus_tcp`") && error.to_string().contains("not a stage"),
        "{error}"
    );
}
