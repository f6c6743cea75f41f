//! A stage of a built pipeline: the pipeline stages it runs and how it failed.

use std::sync::Arc;

use crate::model::Setting;
use crate::runtime::{CallError, StagePool};

#[derive(Debug)]
pub(super) struct Stage {
    pub(super) pool: Arc<StagePool>,
    /// What its processors are created with.
    pub(super) settings: Vec<Setting>,
    /// The stages of the pipeline it runs, in order: one, or a run of built-in
    /// stages fused into one `chain` call.
    pub(super) members: Vec<Member>,
    /// Its component is not one the engine ships: its calls run on a sandbox
    /// thread (docs/components.md, "Where component calls run").
    pub(super) isolated: bool,
}

/// A stage of the pipeline as written.
#[derive(Debug, Clone)]
pub(super) struct Member {
    /// Its place in the pipeline.
    pub(super) index: usize,
    /// The name of its component.
    pub(super) name: String,
    pub(super) settings: Vec<Setting>,
    /// Whether its component is the engine's own version of a stage `chain` runs.
    pub(super) chainable: bool,
}

/// A stage failed for a batch: the device's values of that round are lost (BAD).
/// The error names the component; `index` is the stage's place in the pipeline.
#[derive(Debug, Clone, thiserror::Error)]
#[error("stage {} of the pipeline: {error}", .index + 1)]
pub struct StageFailure {
    pub index: usize,
    pub error: CallError,
}
