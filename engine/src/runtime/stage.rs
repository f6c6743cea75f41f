//! Stage processors: one per device and stage, each a resource in its tenant's pool.

use std::sync::Arc;

use super::CallError;
use super::bindings::stage::Stage;
use super::bindings::wit;
use super::convert::{Recipe, batch_from_wit, batch_to_wit};
use super::pool::{Binding, Live, Pool};
use crate::model::{Batch, Setting, TagSpec};

/// One tenant's instances of one stage component.
pub type StagePool = Pool<Stage>;

impl Pool<Stage> {
    /// Creates a processor for one device, checking its settings and tags now so a
    /// bad configuration is refused before the first round.
    ///
    /// # Errors
    /// [`CallError::Config`] with every issue the component found, or a call failure.
    pub fn processor(
        self: &Arc<Self>,
        settings: &[Setting],
        tags: Arc<[TagSpec]>,
    ) -> Result<Processor, CallError> {
        let processor = Processor {
            binding: self.bind(),
            recipe: Recipe::new(settings, tags),
        };
        processor.reset()?;
        Ok(processor)
    }
}

/// A stage configured for one device.
pub struct Processor {
    binding: Binding<Stage>,
    recipe: Recipe,
}

impl std::fmt::Debug for Processor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Processor")
            .field("component", &self.component())
            .finish_non_exhaustive()
    }
}

impl Processor {
    /// The name of its component.
    pub fn component(&self) -> &str {
        self.binding.pool().name()
    }

    /// Permits for this pool's calls on sandbox threads.
    pub fn sandbox_permits(&self) -> &Arc<tokio::sync::Semaphore> {
        self.binding.pool().sandbox_permits()
    }

    /// Drops its resource in the component; the next call creates it again,
    /// with no memory of the batches before.
    pub fn release(&self) {
        self.binding.release();
    }

    /// How the pool this lives in is doing (failures, quarantine).
    pub fn health(&self) -> super::PoolHealth {
        self.binding.health()
    }

    fn create(
        &self,
        live: &mut Live<Stage>,
    ) -> wasmtime::Result<Result<wasmtime::component::ResourceAny, Vec<wit::ConfigError>>> {
        let (settings, tags) = self.recipe.to_wit();
        live.bindings
            .sluice_dataflow_transform()
            .processor()
            .call_create(&mut live.store, &settings, &tags)
    }

    /// Runs one batch through the stage.
    ///
    /// # Errors
    /// A trap or an exceeded limit: the batch is lost for this stage (the caller
    /// marks its samples BAD) and the instance is rebuilt for the next call.
    pub fn process(&self, batch: Batch) -> Result<Batch, CallError> {
        let input = batch_to_wit(batch);
        self.binding
            .call("process", &|live| self.create(live), |live, resource| {
                live.bindings
                    .sluice_dataflow_transform()
                    .processor()
                    .call_process(&mut live.store, resource, &input)
                    .and_then(|output| batch_from_wit(output).map_err(wasmtime::Error::new))
            })
    }

    /// Clears the memory the stage keeps between batches.
    ///
    /// # Errors
    /// As for [`Processor::process`].
    pub fn reset(&self) -> Result<(), CallError> {
        self.binding
            .call("reset", &|live| self.create(live), |live, resource| {
                live.bindings
                    .sluice_dataflow_transform()
                    .processor()
                    .call_reset(&mut live.store, resource)
            })
    }
}
