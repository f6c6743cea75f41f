//! Runs of built-in stages fused into one call of the built-in `chain` stage, so
//! a round crosses the component boundary once for all of them (docs/components.md). A stage whose component an operator
//! uploaded, even under a built-in name, keeps its own call and its own sandbox.

use std::sync::Arc;

use super::stage::{Member, Stage, StageFailure};
use crate::model::{ConfigIssue, Setting, SettingValue};
use crate::runtime::{BUILTIN_VERSION, CallError, Limits, LoadedComponent, Registry};

/// The built-in stage that runs the others.
const CHAIN: &str = "chain";

/// The built-in stages `chain` can run, by the names they are registered under.
const CHAINED: [&str; 5] = ["swap_bytes", "decode", "scale", "check_range", "deadband"];

/// Whether `component` is the engine's own version of a stage `chain` runs.
pub(super) fn chainable(registry: &Registry, component: &LoadedComponent) -> bool {
    CHAINED.contains(&component.name()) && registry.is_builtin(component)
}

/// The stages with each run of two or more chainable stages replaced by one
/// `chain` stage. A run stays as it is when `chain` cannot take it.
pub(super) fn fuse(stages: Vec<Stage>, registry: &Registry, limits: Limits) -> Vec<Stage> {
    let mut fused = Vec::with_capacity(stages.len());
    let mut run: Vec<Stage> = Vec::new();
    for stage in stages {
        if stage.members.iter().all(|m| m.chainable) {
            run.push(stage);
            continue;
        }
        flush(&mut run, &mut fused, registry, limits);
        fused.push(stage);
    }
    flush(&mut run, &mut fused, registry, limits);
    fused
}

fn flush(run: &mut Vec<Stage>, out: &mut Vec<Stage>, registry: &Registry, limits: Limits) {
    if run.len() < 2 {
        out.append(run);
        return;
    }
    let members: Vec<Member> = run.iter().flat_map(|s| s.members.clone()).collect();
    match chain_stage(members, registry, limits) {
        Ok(stage) => {
            run.clear();
            out.push(stage);
        }
        Err(error) => {
            tracing::warn!(%error, "built-in stages run one call each");
            out.append(run);
        }
    }
}

fn chain_stage(members: Vec<Member>, registry: &Registry, limits: Limits) -> Result<Stage, String> {
    let component = registry
        .version(CHAIN, BUILTIN_VERSION)
        .ok_or("the built-in `chain` stage is missing")?;
    let pool = registry
        .runtime()
        .stage_pool(&component, limits)
        .map_err(|e| e.to_string())?;
    let settings = chain_settings(&members);
    pool.processor(&settings, Arc::default())
        .map_err(|e| e.to_string())?;
    Ok(Stage {
        pool,
        settings,
        members,
        isolated: false,
    })
}

/// `N.use` = the name of member `N`, and `N.KEY` for each of its settings.
fn chain_settings(members: &[Member]) -> Vec<Setting> {
    let mut settings = Vec::new();
    for (position, member) in members.iter().enumerate() {
        settings.push(Setting {
            key: format!("{position}.use"),
            value: SettingValue::Text(member.name.clone()),
        });
        settings.extend(member.settings.iter().map(|setting| Setting {
            key: format!("{position}.{}", setting.key),
            value: setting.value.clone(),
        }));
    }
    settings
}

/// The failure of stage `members` to take a device's tags, told as the stage it
/// is about would have told it: a `chain` issue keyed `N.KEY` is member `N`'s
/// issue about `KEY`.
pub(super) fn failure(members: &[Member], error: CallError) -> StageFailure {
    let first = members.first().map_or(0, |m| m.index);
    match error {
        CallError::Config { issues, .. } if members.len() > 1 => member_failure(members, &issues)
            .unwrap_or(StageFailure {
                index: first,
                error: CallError::Config {
                    component: CHAIN.to_owned(),
                    issues,
                },
            }),
        error => StageFailure {
            index: first,
            error,
        },
    }
}

/// The issues of the first member that has any, keys unprefixed.
fn member_failure(members: &[Member], issues: &[ConfigIssue]) -> Option<StageFailure> {
    let about = |issue: &ConfigIssue| {
        let (position, key) = issue.key.split_once('.')?;
        let member = members.get(position.parse::<usize>().ok()?)?;
        Some((member, key.to_owned()))
    };
    let (member, _) = issues.iter().find_map(about)?;
    let issues = issues
        .iter()
        .filter_map(|issue| {
            let (of, key) = about(issue)?;
            (of.index == member.index).then(|| ConfigIssue {
                key,
                ..issue.clone()
            })
        })
        .collect();
    Some(StageFailure {
        index: member.index,
        error: CallError::Config {
            component: member.name.clone(),
            issues,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Batch, ByteOrder, DataType, Quality, Sample, Span, TagSpec, Value};
    use crate::pipeline::{Pipeline, load_str};
    use crate::runtime::{ComponentKind, Runtime, RuntimeConfig};

    fn registry() -> Registry {
        Registry::with_builtins(Runtime::new(RuntimeConfig::default()).expect("runtime"))
            .expect("registry")
    }

    fn build(registry: &Registry, yaml: &str) -> Pipeline {
        let spec = load_str("test.yaml", yaml, "p", std::path::Path::new(".")).expect("parses");
        Pipeline::build(&spec, registry, Limits::default()).expect("builds")
    }

    fn names(stage: &Stage) -> Vec<&str> {
        stage.members.iter().map(|m| m.name.as_str()).collect()
    }

    fn calls(pipeline: &Pipeline) -> Vec<Vec<&str>> {
        pipeline.stages.iter().map(names).collect()
    }

    const FIVE: &str = "name: p\nstages:\n  - use: swap_bytes\n  - use: decode\n  - use: scale\n    settings: {decimals: 2}\n  - use: check_range\n  - use: deadband\n";

    fn tag(deadband: f64) -> TagSpec {
        TagSpec {
            byte_order: ByteOrder::Badc,
            factor: 0.5,
            deadband,
            ..TagSpec::plain("t", DataType::Uint16)
        }
    }

    #[test]
    fn built_in_stages_run_in_one_call() {
        let registry = registry();
        let pipeline = build(&registry, FIVE);
        assert_eq!(
            calls(&pipeline),
            [vec![
                "swap_bytes",
                "decode",
                "scale",
                "check_range",
                "deadband"
            ]]
        );
        let device = pipeline.for_device(&Arc::from([tag(0.0)])).expect("device");
        let batch = Batch {
            samples: vec![Sample {
                tag: 0,
                value: Value::Raw(Span { start: 0, len: 2 }),
                quality: Quality::Good,
                ts_ms: 1,
            }],
            bytes: vec![0x03, 0x00],
        };
        let out = device.run(batch).expect("runs");
        assert_eq!(out.samples[0].value, Value::Float(1.5));
        assert_eq!(device.health().len(), 1);
        assert_eq!(device.health()[0].component, CHAIN);
    }

    #[test]
    fn an_uploaded_stage_keeps_its_own_call_between_the_runs() {
        let registry = registry();
        let shifted = std::fs::read(
            std::path::Path::new(env!("SLUICE_TEST_COMPONENTS")).join("shifted_scale.wasm"),
        )
        .expect("test component");
        // An operator's own `scale`, registered under the built-in name.
        registry
            .install(ComponentKind::Stage, "scale", "2.0.0", &shifted)
            .expect("installs");
        let pipeline = build(&registry, FIVE);
        assert_eq!(
            calls(&pipeline),
            [
                vec!["swap_bytes", "decode"],
                vec!["scale"],
                vec!["check_range", "deadband"]
            ]
        );
        // Pinned to the engine's own version, `scale` joins the chain again.
        let pinned = FIVE.replace(
            "use: scale\n",
            &format!("use: scale\n    version: {BUILTIN_VERSION}\n"),
        );
        assert_eq!(calls(&build(&registry, &pinned)).len(), 1);
    }

    #[test]
    fn a_refused_tag_is_reported_at_the_stage_that_refused_it() {
        let registry = registry();
        let failure = build(&registry, FIVE)
            .for_device(&Arc::from([tag(-1.0)]))
            .expect_err("refused");
        assert_eq!(failure.index, 4);
        let text = failure.to_string();
        assert!(
            text.starts_with("stage 5 of the pipeline: component `deadband` refused")
                && text.contains("tag #0 `deadband`: deadband must be a number >= 0"),
            "{text}"
        );
    }
}
