//! Pipelines made of pipelines: a stage `pipeline: NAME` stands for the stages of
//! pipeline `NAME`, in place. Pipeline files are loaded as one set so they can
//! name each other (and the built-in `default`); every include is replaced by
//! the stages it names, recursively. An include of an unknown pipeline, or one
//! that leads back to the pipeline itself, is reported at the include.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::spec::{ComponentRef, Included, PipelineSpec, StageSpec, load_file, load_str};
use crate::yaml::Diagnostics;

/// The built-in default pipeline (`pipelines/default.yaml`).
pub const DEFAULT_PIPELINE: &str = include_str!("../../../pipelines/default.yaml");

/// The built-in default pipeline.
///
/// # Errors
/// Never for a correct build (the embedded file is checked by the tests).
pub fn builtin() -> Result<PipelineSpec, Diagnostics> {
    load_str(
        "pipelines/default.yaml",
        DEFAULT_PIPELINE,
        "default",
        Path::new("."),
    )
}

/// Loads pipeline files as one set: each file's pipeline with its includes
/// replaced, or every problem of that file (its own, and its includes').
/// Includes may name any of these files' pipelines, or the built-in `default`
/// unless one of the files replaces it.
pub fn load_set(paths: &[PathBuf]) -> Vec<Result<PipelineSpec, Diagnostics>> {
    let loaded: Vec<_> = paths.iter().map(|p| load_file(p)).collect();
    let mut known: HashMap<String, PipelineSpec> = HashMap::new();
    if let Ok(default) = builtin() {
        known.insert(default.name.clone(), default);
    }
    for spec in loaded.iter().flatten() {
        known.insert(spec.name.clone(), spec.clone());
    }
    let mut expander = Expander {
        known: &known,
        done: HashMap::new(),
    };
    loaded
        .into_iter()
        .map(|result| {
            result.and_then(|mut spec| {
                let mut errors = Diagnostics::new(&spec.file);
                match expander.stages(&spec, &mut vec![spec.name.clone()]) {
                    Ok(stages) => spec.stages = stages,
                    Err(problems) => {
                        for (pos, problem) in problems {
                            errors.push(pos, problem);
                        }
                    }
                }
                errors.into_result(spec)
            })
        })
        .collect()
}

struct Expander<'a> {
    known: &'a HashMap<String, PipelineSpec>,
    /// Expanded stages of the pipelines that expanded whole.
    done: HashMap<String, Vec<StageSpec>>,
}

impl Expander<'_> {
    /// `spec`'s stages with includes replaced, or the problem of each of its
    /// includes that cannot be. `path` holds the pipelines being expanded,
    /// `spec` last.
    fn stages(
        &mut self,
        spec: &PipelineSpec,
        path: &mut Vec<String>,
    ) -> Result<Vec<StageSpec>, Vec<(crate::yaml::Pos, String)>> {
        let mut stages = Vec::new();
        let mut problems = Vec::new();
        for stage in &spec.stages {
            let ComponentRef::Pipeline(name) = &stage.component else {
                stages.push(stage.clone());
                continue;
            };
            if let Some(start) = path.iter().position(|p| p == name) {
                let cycle = [&path[start..], std::slice::from_ref(name)].concat();
                problems.push((stage.pos, format!("a cycle: {}", cycle.join(" -> "))));
                continue;
            }
            let Some(included) = self.known.get(name) else {
                problems.push((stage.pos, format!("unknown pipeline `{name}`")));
                continue;
            };
            match self.expanded(included, path) {
                Ok(inner) => stages.extend(inner.into_iter().map(|s| s.included_at(stage.pos))),
                Err(reason) => problems.push((
                    stage.pos,
                    format!("pipeline `{name}` ({}): {reason}", included.file),
                )),
            }
        }
        if problems.is_empty() {
            Ok(stages)
        } else {
            Err(problems)
        }
    }

    /// The stages of an included pipeline, or why it cannot be included.
    fn expanded(
        &mut self,
        spec: &PipelineSpec,
        path: &mut Vec<String>,
    ) -> Result<Vec<StageSpec>, String> {
        if let Some(done) = self.done.get(&spec.name) {
            return Ok(done.clone());
        }
        path.push(spec.name.clone());
        let result = self.stages(spec, path);
        path.pop();
        let stages: Vec<StageSpec> = result
            .map_err(|problems| {
                let reasons: Vec<String> = problems.into_iter().map(|(_, reason)| reason).collect();
                reasons.join("; ")
            })?
            .into_iter()
            .map(|stage| stage.within(&spec.name, &spec.file))
            .collect();
        self.done.insert(spec.name.clone(), stages.clone());
        Ok(stages)
    }
}

impl StageSpec {
    /// This stage as written in pipeline `pipeline` of `file` (kept when it is
    /// already marked, so the innermost pipeline is named).
    fn within(mut self, pipeline: &str, file: &str) -> Self {
        if self.included.is_none() {
            self.included = Some(Included {
                pipeline: pipeline.to_owned(),
                file: file.to_owned(),
                at: self.pos,
            });
        }
        self
    }

    /// This (included) stage, reported at the include `at` of the pipeline that
    /// takes it in.
    fn included_at(mut self, at: crate::yaml::Pos) -> Self {
        if let Some(included) = &mut self.included {
            included.at = at;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        path
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sluice-include-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        dir
    }

    fn uses(spec: &PipelineSpec) -> Vec<String> {
        spec.stages
            .iter()
            .map(|s| match &s.component {
                ComponentRef::Named { name, .. } => name.clone(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn includes_are_replaced_by_the_stages_they_name_recursively() {
        let dir = scratch("nested");
        let inner = write(&dir, "inner.yaml", "stages:\n  - use: scale\n");
        let middle = write(
            &dir,
            "middle.yaml",
            "stages:\n  - pipeline: inner\n  - use: deadband\n",
        );
        let outer = write(
            &dir,
            "outer.yaml",
            "stages:\n  - use: swap_bytes\n  - pipeline: middle\n  - pipeline: default\n",
        );
        let set = load_set(&[inner, middle, outer]);
        let outer = set[2].as_ref().expect("expands");
        let stages = uses(outer);
        assert_eq!(&stages[..3], ["swap_bytes", "scale", "deadband"]);
        assert_eq!(stages.len(), 3 + builtin().expect("default").stages.len());
        // An included stage names where it is written and where it was taken in.
        let scale = outer.stages[1].included.as_ref().expect("included");
        assert_eq!(scale.pipeline, "inner");
        assert!(scale.file.ends_with("inner.yaml"));
        assert_eq!((scale.at.line, scale.at.column), (3, 5));
    }

    #[test]
    fn cycles_and_unknown_pipelines_are_reported_at_the_include() {
        let dir = scratch("cycle");
        let a = write(&dir, "a.yaml", "stages:\n  - use: scale\n  - pipeline: b\n");
        let b = write(&dir, "b.yaml", "stages:\n  - pipeline: a\n");
        let c = write(&dir, "c.yaml", "stages:\n  - pipeline: nowhere\n");
        let set = load_set(&[a, b, c]);
        let problems: Vec<String> = set
            .iter()
            .map(|r| r.as_ref().map_or_else(ToString::to_string, |_| "ok".into()))
            .collect();
        assert!(
            problems[0].contains("a.yaml:3:5: pipeline `b` (")
                && problems[0].ends_with("a cycle: a -> b -> a"),
            "{problems:?}"
        );
        assert!(
            problems[1].ends_with("): a cycle: b -> a -> b"),
            "{problems:?}"
        );
        assert!(
            problems[2].contains("c.yaml:2:5: unknown pipeline `nowhere`"),
            "{problems:?}"
        );
    }
}
