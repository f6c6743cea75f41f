//! Declarative pipelines: an ordered list of stage components with their settings,
//! read from YAML, resolved against the component registry, and run per device.

mod cases;
mod chain;
mod device;
mod include;
mod set;
mod settings;
mod spec;
mod stage;
mod verify;

use std::sync::Arc;

pub use cases::Case;
pub(crate) use cases::{Expected, hex, read_expected, value_of};
pub use device::DevicePipeline;
pub use include::{DEFAULT_PIPELINE, builtin, load_set};
pub use set::{PipelineSet, files_in};
pub use settings::{PositionedSettings, flatten};
pub use spec::{ComponentRef, Included, PipelineSpec, StageSpec, load_file, load_str};
pub use stage::StageFailure;
pub(crate) use verify::check_expected;
pub use verify::run as run_tests;

use crate::model::{Setting, TagSpec};
use crate::runtime::{CallError, ComponentKind, Limits, LoadedComponent, Registry};
use crate::yaml::Diagnostics;
use device::Step;
use stage::{Member, Stage};

/// A pipeline whose components are resolved and instantiated for one tenant.
#[derive(Debug)]
pub struct Pipeline {
    name: String,
    stages: Vec<Stage>,
    /// The settings of one `chain` call that runs it all, when every stage
    /// is a built-in one `chain` runs.
    chained: Option<Arc<[Setting]>>,
}

impl Pipeline {
    /// Resolves each stage's component and lets the component check its settings.
    ///
    /// # Errors
    /// Every problem, at the position of the stage or setting it concerns: an
    /// unknown component, a component of another kind, settings it refuses.
    pub fn build(
        spec: &PipelineSpec,
        registry: &Registry,
        limits: Limits,
    ) -> Result<Self, Diagnostics> {
        let mut errors = Diagnostics::new(&spec.file);
        let mut stages = Vec::new();
        for (index, stage) in spec.stages.iter().enumerate() {
            let mut own = Diagnostics::new(&spec.file);
            let built = Self::stage(index, stage, registry, limits, &mut own);
            match &stage.included {
                None => errors.extend(own),
                // An included stage's problems show at the include, naming the
                // place in the other file.
                Some(included) => {
                    for item in own.items() {
                        errors.push(
                            included.at,
                            format!(
                                "in pipeline `{}` at {}:{}: {}",
                                included.pipeline, included.file, item.pos, item.message
                            ),
                        );
                    }
                }
            }
            stages.extend(built);
        }
        let chained = chain::whole_chain(&stages).map(Arc::from);
        errors.into_result(Self {
            name: spec.name.clone(),
            stages: chain::fuse(stages, registry, limits),
            chained,
        })
    }

    /// One stage: its component resolved and its settings checked.
    fn stage(
        index: usize,
        stage: &StageSpec,
        registry: &Registry,
        limits: Limits,
        errors: &mut Diagnostics,
    ) -> Option<Stage> {
        let component = resolve(stage, registry, errors)?;
        if component.kind() != ComponentKind::Stage {
            errors.push(
                stage.pos,
                format!(
                    "component `{}` is a {} component; a pipeline stage needs a stage component",
                    component.name(),
                    component.kind()
                ),
            );
            return None;
        }
        let pool = match registry.runtime().stage_pool(&component, limits) {
            Ok(pool) => pool,
            Err(error) => {
                errors.push(stage.pos, error.to_string());
                return None;
            }
        };
        // The component checks its own settings; no tags are involved yet.
        if let Err(error) = pool.processor(&stage.settings.settings, Arc::default()) {
            report(&error, stage, errors);
            return None;
        }
        let member = Member {
            index,
            name: pool.name().to_owned(),
            settings: stage.settings.settings.clone(),
            chainable: chain::chainable(registry, &component),
        };
        let isolated = !registry.is_builtin(&component);
        Some(Stage {
            component,
            pool,
            settings: member.settings.clone(),
            members: vec![member],
            isolated,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Processors of every stage for one device's tags.
    ///
    /// # Errors
    /// When a stage refuses the device's tags (for example a tag its decoder cannot handle).
    pub fn for_device(&self, tags: &Arc<[TagSpec]>) -> Result<DevicePipeline, StageFailure> {
        let mut steps = Vec::with_capacity(self.stages.len());
        for stage in &self.stages {
            match stage.pool.processor(&stage.settings, Arc::clone(tags)) {
                Ok(processor) => steps.push(Step {
                    index: stage.blamed(),
                    processor,
                    isolated: stage.isolated,
                }),
                Err(error) => return Err(chain::failure(&stage.members, error)),
            }
        }
        Ok(DevicePipeline::new(steps, self.chained.clone()))
    }
}

fn resolve(
    stage: &StageSpec,
    registry: &Registry,
    errors: &mut Diagnostics,
) -> Option<Arc<LoadedComponent>> {
    match &stage.component {
        ComponentRef::Named {
            name,
            version: None,
        } => registry.active(name).or_else(|| {
            errors.push(stage.pos, format!("unknown component `{name}`"));
            None
        }),
        ComponentRef::Named {
            name,
            version: Some(version),
        } => match registry.version(name, version) {
            Some(component) => Some(component),
            None => {
                errors.push(
                    stage.pos,
                    format!("component `{name}` has no version `{version}`"),
                );
                None
            }
        },
        ComponentRef::Pipeline(name) => {
            errors.push(
                stage.pos,
                format!(
                    "pipeline `{name}`: includes are resolved when pipeline files are loaded as a set"
                ),
            );
            None
        }
        ComponentRef::File(path) => {
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("component");
            let bytes = std::fs::read(path)
                .map_err(|e| {
                    errors.push(
                        stage.pos,
                        format!("cannot read component {}: {e}", path.display()),
                    )
                })
                .ok()?;
            registry
                .runtime()
                .load(ComponentKind::Stage, name, &bytes)
                .map_err(|e| errors.push(stage.pos, e.to_string()))
                .ok()
        }
    }
}

/// Reports a component's refusal at the settings it names.
fn report(error: &CallError, stage: &StageSpec, errors: &mut Diagnostics) {
    match error {
        CallError::Config { component, issues } => {
            for issue in issues {
                let pos = stage.settings.position_of(&issue.key).unwrap_or(stage.pos);
                errors.push(pos, format!("stage `{component}`: {}", issue.message));
            }
        }
        other => errors.push(stage.pos, other.to_string()),
    }
}
