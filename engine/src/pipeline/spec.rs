//! The pipeline file: an ordered list of stages, each a component and its settings.
//!
//! ```yaml
//! name: default            # optional, defaults to the file name without extension
//! description: decode and scale Modbus registers
//! stages:
//!   - use: scale           # a registered component, by name
//!     settings:
//!       decimals: 3
//!   - path: ./my_stage.wasm   # or a component file, relative to this file
//!   - pipeline: checks     # or the stages of another pipeline, in place
//! alarms:                  # optional: settings of the device tenant's rules component
//!   thresholds:
//!     - { tag: temperature, above: 80, clearAt: 75 }
//! ```

use std::path::{Path, PathBuf};

use super::settings::{PositionedSettings, flatten};
use crate::yaml::{Diagnostics, Fields, Node, Pos, parse};

/// Where a stage's component comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum ComponentRef {
    /// A registered component by name, optionally pinned to a version.
    Named {
        name: String,
        version: Option<String>,
    },
    /// A component file, resolved against the pipeline file's folder.
    File(PathBuf),
    /// The stages of another pipeline, in place (replaced when pipeline files
    /// are loaded as a set: [`super::load_set`]).
    Pipeline(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct StageSpec {
    pub component: ComponentRef,
    pub settings: PositionedSettings,
    pub pos: Pos,
    /// For a stage taken in from another pipeline: where it is written.
    pub included: Option<Included>,
}

/// Where an included stage is written, and the include that took it in.
#[derive(Debug, Clone, PartialEq)]
pub struct Included {
    /// The pipeline whose file holds the stage.
    pub pipeline: String,
    pub file: String,
    /// The include in the pipeline being read.
    pub at: Pos,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PipelineSpec {
    pub name: String,
    pub description: Option<String>,
    pub stages: Vec<StageSpec>,
    /// `alarms`: the settings of the rules component of each device's tenant
    /// (empty when absent), and where the block starts.
    pub alarms: PositionedSettings,
    pub alarms_pos: Option<Pos>,
    /// `tests`: cases `sluice test` runs.
    pub tests: Vec<super::cases::Case>,
    /// The file it was read from, for messages.
    pub file: String,
}

/// Reads a pipeline file.
///
/// # Errors
/// Every problem in the file, each at its position.
pub fn load_file(path: &Path) -> Result<PipelineSpec, Diagnostics> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        let mut errors = Diagnostics::new(&file);
        errors.push(Pos::default(), format!("cannot read the file: {e}"));
        errors
    })?;
    let default_name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("pipeline");
    let base = path.parent().unwrap_or(Path::new("."));
    load_str(&file, &text, default_name, base)
}

/// Reads a pipeline from `text`; `file` names it in messages and `base` resolves
/// component paths.
///
/// # Errors
/// Every problem in the text, each at its position.
pub fn load_str(
    file: &str,
    text: &str,
    default_name: &str,
    base: &Path,
) -> Result<PipelineSpec, Diagnostics> {
    let root = parse(file, text)?;
    let mut errors = Diagnostics::new(file);
    let spec = read_pipeline(&root, file, default_name, base, &mut errors);
    match spec {
        Some(spec) => errors.into_result(spec),
        None => Err(errors),
    }
}

fn read_pipeline(
    root: &Node,
    file: &str,
    default_name: &str,
    base: &Path,
    errors: &mut Diagnostics,
) -> Option<PipelineSpec> {
    let mut fields = Fields::of(root, "pipeline", errors)?;
    let name = fields.optional::<String>("name", errors);
    let description = fields.optional::<String>("description", errors);
    let stages_node = fields.node("stages");
    let alarms_node = fields.node("alarms");
    let tests_node = fields.node("tests");
    let stages_pos = fields.pos();
    fields.finish(errors);

    let mut stages = Vec::new();
    match stages_node.map(|n| (n, n.as_seq())) {
        None => errors.push(stages_pos, "pipeline: missing required key `stages`"),
        Some((node, None)) => errors.push(node.pos, "`stages`: expected a list of stages"),
        Some((node, Some([]))) => {
            errors.push(node.pos, "`stages`: a pipeline needs at least one stage")
        }
        Some((_, Some(items))) => {
            stages.extend(
                items
                    .iter()
                    .filter_map(|item| read_stage(item, base, errors)),
            );
        }
    }
    Some(PipelineSpec {
        name: name.unwrap_or_else(|| default_name.to_owned()),
        description,
        stages,
        alarms: alarms_node.map(|n| flatten(n, errors)).unwrap_or_default(),
        alarms_pos: alarms_node.map(|n| n.pos),
        tests: tests_node
            .map(|n| super::cases::read_all(n, errors))
            .unwrap_or_default(),
        file: file.to_owned(),
    })
}

fn read_stage(node: &Node, base: &Path, errors: &mut Diagnostics) -> Option<StageSpec> {
    let mut fields = Fields::of(node, "stage", errors)?;
    let name = fields.optional::<String>("use", errors);
    let version = fields.optional::<String>("version", errors);
    let path = fields.optional::<String>("path", errors);
    let pipeline = fields.optional::<String>("pipeline", errors);
    let settings_node = fields.node("settings");
    let settings = settings_node
        .map(|n| flatten(n, errors))
        .unwrap_or_default();
    let pos = fields.pos();
    fields.finish(errors);
    if let Some(pipeline) = pipeline {
        if name.is_some() || path.is_some() || version.is_some() || settings_node.is_some() {
            errors.push(
                pos,
                "stage: `pipeline` includes another pipeline's stages as they are; \
                 it takes no `use`, `path`, `version` or `settings`",
            );
            return None;
        }
        return Some(StageSpec {
            component: ComponentRef::Pipeline(pipeline),
            settings,
            pos,
            included: None,
        });
    }
    let component = match (name, path) {
        (Some(name), None) => ComponentRef::Named { name, version },
        (None, Some(path)) if version.is_none() => ComponentRef::File(base.join(path)),
        (None, Some(_)) => {
            errors.push(pos, "stage: `version` applies to `use`, not to `path`");
            return None;
        }
        (Some(_), Some(_)) => {
            errors.push(
                pos,
                "stage: give either `use` (a registered component) or `path` (a file), not both",
            );
            return None;
        }
        (None, None) => {
            errors.push(
                pos,
                "stage: missing `use` (a registered component), `path` (a component file) \
                 or `pipeline` (another pipeline's stages)",
            );
            return None;
        }
    };
    Some(StageSpec {
        component,
        settings,
        pos,
        included: None,
    })
}
