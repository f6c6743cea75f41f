//! A stage of a built pipeline: the pipeline stages it runs and how it failed.

use std::sync::Arc;

use crate::model::Setting;
use crate::runtime::{CallError, LoadedComponent, StagePool};

#[derive(Debug)]
pub(super) struct Stage {
    /// The component its pool runs.
    pub(super) component: Arc<LoadedComponent>,
    pub(super) pool: Arc<StagePool>,
    /// What its processors are created with.
    pub(super) settings: Vec<Setting>,
    /// The stages of the pipeline it runs, in order: one, a run of built-in
    /// stages fused into one `chain` call, or an operator's stage with the
    /// built-in stages around it composed into one call (`pipeline/chain.rs`).
    pub(super) members: Vec<Member>,
    /// Its component is not one the engine ships: its calls run on a sandbox
    /// thread (docs/components.md, "Where component calls run").
    pub(super) isolated: bool,
}

impl Stage {
    /// The place in the pipeline its failures are reported at: its operator's
    /// stage if it has one (the built-in stages do not fail a batch), else its first.
    pub(super) fn blamed(&self) -> usize {
        blamed(&self.members)
    }
}

/// See [`Stage::blamed`].
pub(super) fn blamed(members: &[Member]) -> usize {
    members
        .iter()
        .find(|m| !m.chainable)
        .or(members.first())
        .map_or(0, |m| m.index)
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
