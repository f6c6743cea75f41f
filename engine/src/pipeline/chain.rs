//! Runs of built-in stages fused into one call of the built-in `chain` stage, so
//! a round crosses the component boundary once for all of them; an operator's
//! stage with built-in stages beside it composed with them into one component
//! (docs/components.md, "One call for the built-in stages"). A stage whose
//! component an operator uploaded, even under a built-in name, keeps its own
//! instance, its own memory and a sandbox thread.

use std::sync::Arc;

use super::stage::{Member, Stage, StageFailure, blamed};
use crate::model::{ConfigIssue, Setting, SettingValue};
use crate::runtime::{BUILTIN_VERSION, CallError, Limits, LoadedComponent, Registry};

/// The built-in stage that runs the others.
const CHAIN: &str = "chain";

/// The built-in stages `chain` can run, by the names they are registered under.
const CHAINED: [&str; 5] = ["swap_bytes", "decode", "scale", "check_range", "deadband"];

/// The `chain_socket` setting that names the position of the stage plugged in.
const PLUG: &str = "plug";

/// Whether `component` is the engine's own version of a stage `chain` runs.
pub(super) fn chainable(registry: &Registry, component: &LoadedComponent) -> bool {
    CHAINED.contains(&component.name()) && registry.is_builtin(component)
}

fn is_chainable(stage: &Stage) -> bool {
    stage.members.iter().all(|m| m.chainable)
}

/// An operator's stage, alone in its call.
fn is_pluggable(stage: &Stage) -> bool {
    stage.isolated && stage.members.len() == 1
}

/// The stages with each operator's stage composed with the runs of chainable
/// stages on either side of it (one call), and each other run of two or more
/// chainable stages replaced by one `chain` stage. What cannot be composed or
/// chained stays as it is, with a warning.
pub(super) fn fuse(stages: Vec<Stage>, registry: &Registry, limits: Limits) -> Vec<Stage> {
    let mut fused = Vec::with_capacity(stages.len());
    let mut before: Vec<Stage> = Vec::new();
    let mut stages = stages.into_iter().peekable();
    while let Some(stage) = stages.next() {
        if is_chainable(&stage) {
            before.push(stage);
            continue;
        }
        if !is_pluggable(&stage) {
            flush(&mut before, &mut fused, registry, limits);
            fused.push(stage);
            continue;
        }
        let mut after = Vec::new();
        while let Some(next) = stages.next_if(is_chainable) {
            after.push(next);
        }
        if before.is_empty() && after.is_empty() {
            fused.push(stage);
            continue;
        }
        match plugged_stage(&before, &stage, &after, registry, limits) {
            Ok(composed) => {
                before.clear();
                fused.push(composed);
            }
            Err(error) => {
                tracing::warn!(%error, stage = stage.pool.name(), "operator's stage runs in a call of its own");
                flush(&mut before, &mut fused, registry, limits);
                fused.push(stage);
                before = after;
            }
        }
    }
    flush(&mut before, &mut fused, registry, limits);
    fused
}

/// The settings of one `chain` call that runs every stage of a pipeline of
/// built-in stages only: what one of the engine's decoders runs behind itself
/// (docs/push.md, "One call a message"). `None` for an empty pipeline, or one
/// with a stage `chain` does not run.
pub(super) fn whole_chain(stages: &[Stage]) -> Option<Vec<Setting>> {
    if stages.is_empty() || !stages.iter().all(is_chainable) {
        return None;
    }
    let members: Vec<Member> = stages.iter().flat_map(|s| s.members.clone()).collect();
    Some(chain_settings(&members))
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
    let settings = chain_settings(&members);
    built(component, settings, members, false, registry, limits)
}

/// `plug` composed with the chainable stages `before` and `after` it.
fn plugged_stage(
    before: &[Stage],
    plug: &Stage,
    after: &[Stage],
    registry: &Registry,
    limits: Limits,
) -> Result<Stage, String> {
    let component = registry
        .plugged_into_chain(&plug.component)
        .map_err(|e| e.to_string())?;
    let members: Vec<Member> = [before, std::slice::from_ref(plug), after]
        .into_iter()
        .flatten()
        .flat_map(|s| s.members.clone())
        .collect();
    let mut settings = chain_settings(&members);
    settings.push(Setting {
        key: PLUG.to_owned(),
        value: SettingValue::Int(
            i64::try_from(before.iter().map(|s| s.members.len()).sum::<usize>())
                .map_err(|e| e.to_string())?,
        ),
    });
    built(component, settings, members, true, registry, limits)
}

/// A stage running `component` with `settings`, checked by creating a processor.
fn built(
    component: Arc<LoadedComponent>,
    settings: Vec<Setting>,
    members: Vec<Member>,
    isolated: bool,
    registry: &Registry,
    limits: Limits,
) -> Result<Stage, String> {
    let pool = registry
        .runtime()
        .stage_pool(&component, limits)
        .map_err(|e| e.to_string())?;
    pool.processor(&settings, Arc::default())
        .map_err(|e| e.to_string())?;
    Ok(Stage {
        component,
        pool,
        settings,
        members,
        isolated,
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
    let index = blamed(members);
    match error {
        CallError::Config { component, issues } if members.len() > 1 => {
            member_failure(members, &issues).unwrap_or(StageFailure {
                index,
                error: CallError::Config { component, issues },
            })
        }
        error => StageFailure { index, error },
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
        let out = device.run(raw_sample()).expect("runs");
        assert_eq!(out.samples[0].value, Value::Float(1.5));
        assert_eq!(device.health().len(), 1);
        assert_eq!(device.health()[0].component, CHAIN);
    }

    fn test_component(name: &str) -> Vec<u8> {
        std::fs::read(std::path::Path::new(env!("SLUICE_TEST_COMPONENTS")).join(name))
            .expect("test component")
    }

    /// Registers test component `file` as an operator's stage `name`.
    fn upload(registry: &Registry, name: &str, file: &str) {
        registry
            .install(
                ComponentKind::Stage,
                name,
                "2.0.0",
                &test_component(&format!("{file}.wasm")),
            )
            .expect("installs");
    }

    /// An operator's own `scale` (adds 1000), registered under `name`.
    fn upload_shifted(registry: &Registry, name: &str) {
        upload(registry, name, "shifted_scale");
    }

    /// `failure` is at stage `index` (0-based) and its message starts with
    /// `start` and holds `part`.
    fn assert_failure(failure: &StageFailure, index: usize, start: &str, part: &str) {
        assert_eq!(failure.index, index, "{failure}");
        let text = failure.to_string();
        assert!(text.starts_with(start) && text.contains(part), "{text}");
    }

    fn raw_sample() -> Batch {
        Batch {
            samples: vec![Sample {
                tag: 0,
                value: Value::Raw(Span { start: 0, len: 2 }),
                quality: Quality::Good,
                ts_ms: 1,
            }],
            bytes: vec![0x03, 0x00],
        }
    }

    #[test]
    fn an_uploaded_stage_between_built_ins_is_composed_with_them_into_one_call() {
        let registry = registry();
        // Under the built-in's name: the operator's build, not the engine's.
        upload_shifted(&registry, "scale");
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
        assert!(
            pipeline.stages[0].isolated,
            "operator's code: sandbox thread"
        );
        let device = pipeline.for_device(&Arc::from([tag(0.0)])).expect("device");
        // BADC 03 00 is 3; the operator's scale: 3 x 0.5 + 1000.
        let out = device.run(raw_sample()).expect("runs");
        assert_eq!(out.samples[0].value, Value::Float(1001.5));
        assert_eq!(out.samples[0].quality, Quality::Good);
        // Health and failures name the operator's component.
        assert_eq!(device.health()[0].component, "scale");
        // Pinned to the engine's own version, `scale` joins the plain chain again.
        let pinned = FIVE.replace(
            "use: scale\n",
            &format!("use: scale\n    version: {BUILTIN_VERSION}\n"),
        );
        let pinned = build(&registry, &pinned);
        assert_eq!(pinned.stages.len(), 1);
        assert!(!pinned.stages[0].isolated);
    }

    #[test]
    fn each_uploaded_stage_takes_the_built_in_stages_up_to_the_next_one() {
        let registry = registry();
        upload_shifted(&registry, "first");
        upload_shifted(&registry, "second");
        let yaml = "name: p\nstages:\n  - use: swap_bytes\n  - use: decode\n  - use: first\n  - use: check_range\n  - use: second\n  - use: deadband\n";
        let pipeline = build(&registry, yaml);
        assert_eq!(
            calls(&pipeline),
            [
                vec!["swap_bytes", "decode", "first", "check_range"],
                vec!["second", "deadband"]
            ]
        );
        let device = pipeline.for_device(&Arc::from([tag(0.0)])).expect("device");
        let out = device.run(raw_sample()).expect("runs");
        // 3 x 0.5 + 1000, then that x 0.5 + 1000.
        assert_eq!(out.samples[0].value, Value::Float(1500.75));
        // Alone, an uploaded stage is called as it is.
        let alone = build(&registry, "name: p\nstages:\n  - use: first\n");
        assert_eq!(calls(&alone), [vec!["first"]]);
        assert!(Arc::ptr_eq(
            &alone.stages[0].component,
            &registry.active("first").expect("registered")
        ));
    }

    #[test]
    fn a_composed_stage_that_breaks_its_batch_fails_the_round_at_its_place() {
        let registry = registry();
        upload(&registry, "hostile", "hostile");
        let yaml = "name: p\nstages:\n  - use: swap_bytes\n  - use: hostile\n    settings: {mode: ragged}\n  - use: decode\n";
        let pipeline = build(&registry, yaml);
        assert_eq!(pipeline.stages.len(), 1);
        let device = pipeline.for_device(&Arc::from([tag(0.0)])).expect("device");
        let failure = device.run(raw_sample()).expect_err("refused");
        assert_failure(
            &failure,
            1,
            "stage 2 of the pipeline: component `hostile`",
            "tags but",
        );
    }

    #[test]
    fn a_stage_built_with_std_is_composed_and_granted_no_capability() {
        let registry = registry();
        upload(&registry, "std_echo", "std_echo");
        let yaml = |print: bool| {
            format!(
                "name: p\nstages:\n  - use: swap_bytes\n  - use: decode\n  - use: std_echo\n    settings: {{print: {print}}}\n  - use: scale\n"
            )
        };
        let quiet = build(&registry, &yaml(false));
        assert_eq!(
            calls(&quiet),
            [vec!["swap_bytes", "decode", "std_echo", "scale"]]
        );
        let device = quiet.for_device(&Arc::from([tag(0.0)])).expect("device");
        let out = device.run(raw_sample()).expect("runs");
        assert_eq!(out.samples[0].value, Value::Float(1.5));
        // Writing to stdout is a WASI call: it traps inside the composition too.
        let failure = build(&registry, &yaml(true))
            .for_device(&Arc::from([tag(0.0)]))
            .expect("device")
            .run(raw_sample())
            .expect_err("no stdout");
        assert_failure(
            &failure,
            2,
            "stage 3 of the pipeline: component `std_echo` trapped",
            "",
        );
    }

    #[test]
    fn a_refused_tag_is_reported_at_the_stage_that_refused_it() {
        let registry = registry();
        let refused = |registry: &Registry| {
            build(registry, FIVE)
                .for_device(&Arc::from([tag(-1.0)]))
                .expect_err("refused")
        };
        let start = "stage 5 of the pipeline: component `deadband` refused";
        let part = "tag #0 `deadband`: deadband must be a number >= 0";
        assert_failure(&refused(&registry), 4, start, part);
        // The same inside a stage composed with an operator's `scale`.
        upload_shifted(&registry, "scale");
        assert_failure(&refused(&registry), 4, start, part);
    }
}
