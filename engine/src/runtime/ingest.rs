//! One component call a message (docs/push.md, "One call a message"): for a
//! device whose decoder is one of the engine's and whose pipeline is built-in
//! stages only, the decoder's own component runs the stages behind it (`ingest`
//! of `wit/decoder.wit`), so a message's batch comes back into the engine
//! once, already through the pipeline, instead of out of the decoder and into
//! the pipeline's `chain`.

use std::sync::Arc;

use wasmtime::component::ResourceAny;

use super::CallError;
use super::bindings::builtin_decoder::BuiltinDecoder;
use super::bindings::wit;
use super::convert::{Recipe, batch_from_wit, settings_to_wit};
use super::decoder::Refusal;
use super::pool::{Binding, Live, Pool};
use crate::model::{Batch, Setting, TagSpec};

/// One tenant's instances of one of the engine's decoders, for [`Ingester`]s.
pub type IngestPool = Pool<BuiltinDecoder>;

impl Pool<BuiltinDecoder> {
    /// A decoder with `chain_settings` (the built-in `chain` stage's) behind
    /// it, for one device's tags; the component checks both now.
    ///
    /// # Errors
    /// [`CallError::Config`] with every issue found, or a call failure.
    pub fn ingester(
        self: &Arc<Self>,
        decoder_settings: &[Setting],
        chain_settings: &[Setting],
        tags: Arc<[TagSpec]>,
    ) -> Result<Ingester, CallError> {
        let ingester = Ingester {
            binding: self.bind(),
            recipe: Recipe::new(decoder_settings, tags),
            chain: chain_settings.to_vec(),
        };
        ingester
            .binding
            .call("create", &|live| ingester.create(live), |_, _| Ok(()))?;
        Ok(ingester)
    }
}

/// What one message gave, through the pipeline.
#[derive(Debug, Default)]
pub struct Ingested {
    /// The pipeline's output, with a BAD sample for each readable tag the
    /// message refused and gave no value.
    pub samples: Batch,
    /// Whether the decoder gave any tag a value.
    pub gave: bool,
    pub refusals: Vec<Refusal>,
}

/// A decoder and the device's built-in stages in one resource.
pub struct Ingester {
    binding: Binding<BuiltinDecoder>,
    recipe: Recipe,
    chain: Vec<Setting>,
}

impl std::fmt::Debug for Ingester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingester")
            .field("component", &self.binding.pool().name())
            .finish_non_exhaustive()
    }
}

impl Ingester {
    /// How the pool this lives in is doing (failures, quarantine): its
    /// failures are its decoder's, as a driver (docs/push.md).
    pub fn health(&self) -> super::PoolHealth {
        self.binding.health()
    }

    fn create(
        &self,
        live: &mut Live<BuiltinDecoder>,
    ) -> wasmtime::Result<Result<ResourceAny, Vec<wit::ConfigError>>> {
        let (settings, tags) = self.recipe.to_wit();
        live.bindings
            .sluice_dataflow_ingest()
            .ingester()
            .call_create(
                &mut live.store,
                &settings,
                &settings_to_wit(&self.chain),
                &tags,
            )
    }

    /// Decodes a message that arrived on `topic` at `ts_ms` and runs its
    /// samples through the stages.
    ///
    /// # Errors
    /// A trap, an exceeded limit or a malformed answer: the message gives no
    /// tag a value, and the instance (the stages' memory with it) is rebuilt
    /// for the next call.
    pub fn ingest(&self, topic: &str, payload: &[u8], ts_ms: i64) -> Result<Ingested, CallError> {
        self.binding
            .call("ingest", &|live| self.create(live), |live, resource| {
                let ingested = live
                    .bindings
                    .sluice_dataflow_ingest()
                    .ingester()
                    .call_ingest(&mut live.store, resource, topic, payload, ts_ms)?;
                Ok(Ingested {
                    samples: batch_from_wit(ingested.samples).map_err(wasmtime::Error::new)?,
                    gave: ingested.gave,
                    refusals: ingested
                        .refusals
                        .into_iter()
                        .map(|r| Refusal {
                            tag: r.tag,
                            message: r.message,
                        })
                        .collect(),
                })
            })
    }
}
