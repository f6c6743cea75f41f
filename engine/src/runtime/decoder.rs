//! Decoders: one per device that pushes its messages (MQTT), each a resource in
//! its tenant's pool. A call's outer error is a failed call (trap, limit); what
//! the decoder said of a message is inside its answer.

use std::sync::Arc;

use wasmtime::component::ResourceAny;

use super::bindings::decoder::Decoder;
use super::bindings::decoder::exports::sluice::dataflow::payload as wit_payload;
use super::bindings::wit;
use super::convert::{Recipe, batch_from_wit, value_to_wit};
use super::pool::{Binding, Live, Pool};
use super::{CallError, threads};
use crate::model::{Batch, Setting, TagSpec, Value};

/// One tenant's instances of one decoder component.
pub type DecoderPool = Pool<Decoder>;

impl Pool<Decoder> {
    /// A decoder for one device's tags, its settings and tags checked now;
    /// an `isolated` one's calls in a round run on sandbox threads (an
    /// uploaded component's, as for stages).
    ///
    /// # Errors
    /// [`CallError::Config`] with every issue the decoder found, or a call failure.
    pub fn decoder(
        self: &Arc<Self>,
        settings: &[Setting],
        tags: Arc<[TagSpec]>,
        isolated: bool,
    ) -> Result<PayloadDecoder, CallError> {
        let decoder = PayloadDecoder {
            binding: self.bind(),
            recipe: Recipe::new(settings, tags),
            isolated,
        };
        decoder
            .binding
            .call("create", &|live| decoder.create(live), |_, _| Ok(()))?;
        Ok(decoder)
    }
}

/// Why a message gave a tag (or, with none, every tag) no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub tag: Option<u32>,
    pub message: String,
}

/// What a message said: samples of the tags it gave values, and why others got none.
#[derive(Debug, Default)]
pub struct Decoded {
    pub samples: Batch,
    pub refusals: Vec<Refusal>,
}

/// A message to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    pub topic: String,
    pub payload: Vec<u8>,
}

/// A decoder configured for one device.
pub struct PayloadDecoder {
    binding: Binding<Decoder>,
    recipe: Recipe,
    /// Its calls in a round run on a sandbox thread.
    isolated: bool,
}

impl std::fmt::Debug for PayloadDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PayloadDecoder")
            .field("component", &self.binding.pool().name())
            .finish_non_exhaustive()
    }
}

impl PayloadDecoder {
    /// The name of its component.
    pub fn component(&self) -> &str {
        self.binding.pool().name()
    }

    /// How the pool this lives in is doing (failures, quarantine).
    pub fn health(&self) -> super::PoolHealth {
        self.binding.health()
    }

    /// Drops its resource in the component (a device whose messages go
    /// through an [`Ingester`](super::Ingester) calls it only to write); the
    /// next call creates it again.
    pub fn release(&self) {
        self.binding.release();
    }

    /// The pool this lives in: a new decoder of the same tenant and component shares it.
    pub fn pool(&self) -> Arc<DecoderPool> {
        Arc::clone(self.binding.pool())
    }

    /// Runs `call` where this decoder's calls in a round run: the engine's own
    /// decoders on the caller's thread (a hand-off would cost more than the
    /// call), an uploaded one on a sandbox thread, so one that loops until its
    /// budget holds up its own device only (docs/components.md, "Where
    /// component calls run").
    ///
    /// # Errors
    /// The call's own, or [`CallError::Lost`] when it gave no answer.
    pub async fn call_in_round<T, F>(
        self: Arc<Self>,
        function: &'static str,
        call: F,
    ) -> Result<T, CallError>
    where
        T: Send + 'static,
        F: FnOnce(&Self) -> Result<T, CallError> + Send + 'static,
    {
        if !self.isolated {
            return call(&self);
        }
        let pool = Arc::clone(self.binding.pool());
        threads::call_in_sandbox(pool.sandbox_permits(), pool.name(), function, move || {
            call(&self)
        })
        .await
    }

    fn create(
        &self,
        live: &mut Live<Decoder>,
    ) -> wasmtime::Result<Result<ResourceAny, Vec<wit::ConfigError>>> {
        let (settings, tags) = self.recipe.to_wit();
        live.bindings
            .sluice_dataflow_payload()
            .decoder()
            .call_create(&mut live.store, &settings, &tags)
    }

    /// Decodes a message that arrived on `topic` at `ts_ms`.
    ///
    /// # Errors
    /// A trap, an exceeded limit or a malformed answer: the message gives no
    /// tag a value, and the instance is rebuilt for the next call.
    pub fn decode(&self, topic: &str, payload: &[u8], ts_ms: i64) -> Result<Decoded, CallError> {
        self.binding
            .call("decode", &|live| self.create(live), |live, resource| {
                let decoded = live
                    .bindings
                    .sluice_dataflow_payload()
                    .decoder()
                    .call_decode(&mut live.store, resource, topic, payload, ts_ms)?;
                let samples = batch_from_wit(decoded.samples).map_err(wasmtime::Error::new)?;
                Ok(Decoded {
                    samples,
                    refusals: decoded.refusals.into_iter().map(refusal_from_wit).collect(),
                })
            })
    }

    /// The message that writes `value` to tag `tag` (outer: a failed call;
    /// inner: why the decoder cannot write it).
    ///
    /// # Errors
    /// A trap or an exceeded limit.
    pub fn encode(&self, tag: u32, value: Value) -> Result<Result<Outgoing, String>, CallError> {
        let value = value_to_wit(value);
        self.binding
            .call("encode", &|live| self.create(live), |live, resource| {
                let encoded = live
                    .bindings
                    .sluice_dataflow_payload()
                    .decoder()
                    .call_encode(&mut live.store, resource, tag, &value)?;
                Ok(encoded.map(|o| Outgoing {
                    topic: o.topic,
                    payload: o.payload,
                }))
            })
    }
}

fn refusal_from_wit(refusal: wit_payload::Refusal) -> Refusal {
    Refusal {
        tag: refusal.tag,
        message: refusal.message,
    }
}
