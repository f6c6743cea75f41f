//! Codec sessions: one per device and channel, each a resource in its tenant's pool.
//! Every call returns the codec's own answer inside the runtime's: the outer error
//! is a failed call (trap, limit), the inner one what the codec said of the frame.

use std::sync::{Arc, Mutex, OnceLock};

use wasmtime::Store;
use wasmtime::component::ResourceAny;

use super::CallError;
use super::bindings::codec::Codec;
use super::bindings::codec::exports::sluice::dataflow::protocol as wit_protocol;
use super::bindings::wit;
use super::convert::{Recipe, batch_from_wit, value_to_wit};
use super::last_plan::LastPlan;
use super::pool::{Binding, Live, Pool};
use super::sandbox::Sandbox;
use crate::model::{
    Batch, DeviceError, FrameError, FrameSize, PlannedRead, Setting, TagSpec, Value,
};
use crate::sync::lock;

/// One tenant's instances of one codec component.
pub type CodecPool = Pool<Codec>;

impl Pool<Codec> {
    /// Opens a session for one device's tags on one channel, checking the channel
    /// settings and tags now.
    ///
    /// # Errors
    /// [`CallError::Config`] with every issue the codec found, or a call failure.
    pub fn session(
        self: &Arc<Self>,
        settings: &[Setting],
        tags: Arc<[TagSpec]>,
    ) -> Result<CodecSession, CallError> {
        let session = CodecSession {
            binding: self.bind(),
            recipe: Recipe::new(settings, tags),
            last_plan: Mutex::default(),
            header_len: OnceLock::new(),
        };
        session.reset()?;
        Ok(session)
    }
}

/// Protocol state of one device on one channel.
pub struct CodecSession {
    binding: Binding<Codec>,
    recipe: Recipe,
    /// The last plan the codec made, handed out again for the same due tags
    /// (as the WIT `plan` allows) while the resource it came from lives and no
    /// call since failed or reset it: a steady round does not cross for it.
    last_plan: Mutex<Option<LastPlan>>,
    /// `header-len`, asked once: the WIT makes it the session's constant.
    header_len: OnceLock<u32>,
}

impl std::fmt::Debug for CodecSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodecSession")
            .field("component", &self.binding.pool().name())
            .finish_non_exhaustive()
    }
}

fn planned_from_wit(read: wit_protocol::PlannedRead) -> PlannedRead {
    PlannedRead {
        id: read.id,
        tags: read.tags,
    }
}

fn frame_size_from_wit(size: wit_protocol::FrameSize) -> FrameSize {
    match size {
        wit_protocol::FrameSize::Length(len) => FrameSize::Length(len),
        wit_protocol::FrameSize::Skip(len) => FrameSize::Skip(len),
        wit_protocol::FrameSize::Need(len) => FrameSize::Need(len),
    }
}

fn frame_error_from_wit(error: wit_protocol::FrameError) -> FrameError {
    match error {
        wit_protocol::FrameError::Malformed(message) => FrameError::Malformed(message),
        wit_protocol::FrameError::Device(device) => FrameError::Device(DeviceError {
            code: device.code,
            message: device.message,
            retry: device.retry.into_iter().map(planned_from_wit).collect(),
        }),
    }
}

type Session<'a> = wit_protocol::GuestSession<'a>;
type Outcome<T> = Result<Result<T, FrameError>, CallError>;

impl CodecSession {
    /// The pool this lives in: new sessions of the same tenant and codec share it.
    pub fn pool(&self) -> Arc<CodecPool> {
        Arc::clone(self.binding.pool())
    }

    /// How the pool this lives in is doing (failures, quarantine).
    pub fn health(&self) -> super::PoolHealth {
        self.binding.health()
    }

    fn create(
        &self,
        live: &mut Live<Codec>,
    ) -> wasmtime::Result<Result<ResourceAny, Vec<wit::ConfigError>>> {
        let (settings, tags) = self.recipe.to_wit();
        live.bindings
            .sluice_dataflow_protocol()
            .session()
            .call_open(&mut live.store, &settings, &tags)
    }

    fn call<R>(
        &self,
        function: &'static str,
        call: impl FnOnce(Session<'_>, &mut Store<Sandbox>, ResourceAny) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        self.binding
            .call(function, &|live| self.create(live), |live, resource| {
                let Live { store, bindings } = live;
                call(
                    bindings.sluice_dataflow_protocol().session(),
                    store,
                    resource,
                )
            })
            .inspect_err(|_| self.forget_plan())
    }

    /// A call whose answer may be the codec's error: either failure ends the
    /// last plan's reuse (a device error may have split a request).
    fn answer<T>(
        &self,
        outcome: Result<Result<T, wit_protocol::FrameError>, CallError>,
    ) -> Outcome<T> {
        let answer = outcome?;
        if answer.is_err() {
            self.forget_plan();
        }
        Ok(answer.map_err(frame_error_from_wit))
    }

    fn forget_plan(&self) {
        *lock(&self.last_plan) = None;
    }

    /// Bytes to read before [`CodecSession::frame_length`] can size a frame.
    ///
    /// # Errors
    /// A failed call.
    pub fn header_len(&self) -> Result<u32, CallError> {
        if let Some(len) = self.header_len.get() {
            return Ok(*len);
        }
        let len = self.call("header-len", |s, store, r| s.call_header_len(store, r))?;
        Ok(*self.header_len.get_or_init(|| len))
    }

    /// What `head` tells of the answer's frame.
    ///
    /// # Errors
    /// A failed call (outer) or a header the codec rejects (inner).
    pub fn frame_length(&self, head: &[u8]) -> Outcome<FrameSize> {
        let answer = self.answer(self.call("frame-length", |s, store, r| {
            s.call_frame_length(store, r, head)
        }))?;
        Ok(answer.map(frame_size_from_wit))
    }

    /// The lease the codec knows for its device, in seconds, if any.
    ///
    /// # Errors
    /// A failed call.
    pub fn lease_seconds(&self) -> Result<Option<u32>, CallError> {
        self.call("lease-seconds", |s, store, r| {
            s.call_lease_seconds(store, r)
        })
    }

    /// Frame of handshake step `step`, none when the handshake is complete.
    ///
    /// # Errors
    /// A failed call.
    pub fn handshake(&self, step: u32) -> Result<Option<Vec<u8>>, CallError> {
        self.call("handshake", |s, store, r| s.call_handshake(store, r, step))
    }

    /// Checks the answer to handshake step `step`.
    ///
    /// # Errors
    /// A failed call (outer) or a refused answer (inner).
    pub fn check_handshake(&self, step: u32, frame: &[u8]) -> Outcome<()> {
        self.answer(self.call("check-handshake", |s, store, r| {
            s.call_check_handshake(store, r, step, frame)
        }))
    }

    /// Requests that read the due tags.
    ///
    /// # Errors
    /// A failed call.
    pub fn plan(&self, due: &[u32]) -> Result<Vec<PlannedRead>, CallError> {
        let again = lock(&self.last_plan)
            .as_ref()
            .and_then(|plan| plan.reads_for(self.binding.live_generation(), due));
        if let Some(reads) = again {
            return Ok(reads);
        }
        let reads: Vec<PlannedRead> = self
            .call("plan", |s, store, r| s.call_plan(store, r, due))?
            .into_iter()
            .map(planned_from_wit)
            .collect();
        *lock(&self.last_plan) = self
            .binding
            .live_generation()
            .map(|generation| LastPlan::new(generation, due, &reads));
        Ok(reads)
    }

    /// Frame for a planned request.
    ///
    /// # Errors
    /// A failed call (outer) or a request the codec does not know (inner).
    pub fn encode_read(&self, request: u32) -> Outcome<Vec<u8>> {
        self.answer(self.call("encode-read", |s, store, r| {
            s.call_encode_read(store, r, request)
        }))
    }

    /// Raw samples from the answer to `request`.
    ///
    /// # Errors
    /// A failed call (outer); a malformed frame or a device error (inner).
    pub fn parse_read(&self, request: u32, frame: &[u8], ts_ms: i64) -> Outcome<Batch> {
        self.answer(self.call("parse-read", |s, store, r| {
            match s.call_parse_read(store, r, request, frame, ts_ms)? {
                Ok(batch) => Ok(Ok(batch_from_wit(batch).map_err(wasmtime::Error::new)?)),
                Err(error) => Ok(Err(error)),
            }
        }))
    }

    /// Frame that writes `value` (in device units) to `tag`.
    ///
    /// # Errors
    /// A failed call (outer) or a value the codec cannot write (inner).
    pub fn encode_write(&self, tag: u32, value: Value) -> Outcome<Vec<u8>> {
        let value = value_to_wit(value);
        self.answer(self.call("encode-write", |s, store, r| {
            s.call_encode_write(store, r, tag, &value)
        }))
    }

    /// Checks the answer to the last write.
    ///
    /// # Errors
    /// A failed call (outer); a malformed frame or a device error (inner).
    pub fn check_write(&self, frame: &[u8]) -> Outcome<()> {
        self.answer(self.call("check-write", |s, store, r| {
            s.call_check_write(store, r, frame)
        }))
    }

    /// Forgets in-flight state after a reconnect.
    ///
    /// # Errors
    /// A failed call.
    pub fn reset(&self) -> Result<(), CallError> {
        self.forget_plan();
        self.call("reset", |s, store, r| s.call_reset(store, r))
    }
}
