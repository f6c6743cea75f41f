//! Instances of one component for one tenant, generic over the component's world.
//!
//! A pool holds `instances` stores, each with one instance of the component; a
//! [`Binding`] is one resource (a device's processor or codec session) pinned to one
//! store. When a call fails the store is discarded; bindings notice the new
//! generation and recreate their resource on their next call (COMP-2).

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmtime::component::{InstancePre, ResourceAny};
use wasmtime::{Engine, Store, Trap};

use super::bindings::wit;
use super::convert::{MalformedBatch, issues_from_wit};
use super::sandbox::Sandbox;
use super::{CallError, Limit, Limits};
use crate::sync::lock;

/// A world's generated bindings, as the pool needs them (sealed: the module is private).
pub trait World: Sized + Send + 'static {
    type Pre: Send + Sync;

    /// Checks that a linked component exports this world.
    fn prepare(pre: InstancePre<Sandbox>) -> wasmtime::Result<Self::Pre>;

    fn instantiate(pre: &Self::Pre, store: &mut Store<Sandbox>) -> wasmtime::Result<Self>;
}

macro_rules! world {
    ($world:ty, $pre:ty) => {
        impl World for $world {
            type Pre = $pre;

            fn prepare(pre: InstancePre<Sandbox>) -> wasmtime::Result<Self::Pre> {
                <$pre>::new(pre)
            }

            fn instantiate(pre: &Self::Pre, store: &mut Store<Sandbox>) -> wasmtime::Result<Self> {
                pre.instantiate(store)
            }
        }
    };
}

world!(
    super::bindings::stage::Stage,
    super::bindings::stage::StagePre<Sandbox>
);
world!(
    super::bindings::codec::Codec,
    super::bindings::codec::CodecPre<Sandbox>
);
world!(
    super::bindings::rules::Rules,
    super::bindings::rules::RulesPre<Sandbox>
);
world!(
    super::bindings::decoder::Decoder,
    super::bindings::decoder::DecoderPre<Sandbox>
);
world!(
    super::bindings::builtin_decoder::BuiltinDecoder,
    super::bindings::builtin_decoder::BuiltinDecoderPre<Sandbox>
);

/// Calls failing in a row take a pool out of service for a while: a component
/// that keeps trapping or looping stops costing its tenant a full budget per call
/// (COMP-8).
#[derive(Debug)]
pub(super) struct Quarantine {
    after: u32,
    period: Duration,
    /// Failed calls in a row.
    in_a_row: AtomicU32,
    until: Mutex<Option<Instant>>,
    /// Times the pool was quarantined.
    count: AtomicU64,
}

impl Quarantine {
    pub(super) fn new(after: u32, period: Duration) -> Self {
        Self {
            after: after.max(1),
            period,
            in_a_row: AtomicU32::new(0),
            until: Mutex::new(None),
            count: AtomicU64::new(0),
        }
    }

    /// `Err` with the time left while the quarantine lasts.
    fn check(&self) -> Result<(), Duration> {
        let until = *lock(&self.until);
        match until {
            Some(until) => match until.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Err(left),
                _ => Ok(()),
            },
            None => Ok(()),
        }
    }

    fn succeeded(&self) {
        self.in_a_row.store(0, Ordering::Relaxed);
    }

    /// Counts a failed call; true when it starts a quarantine.
    fn failed(&self) -> bool {
        let in_a_row = self.in_a_row.fetch_add(1, Ordering::Relaxed) + 1;
        if in_a_row < self.after {
            return false;
        }
        self.in_a_row.store(0, Ordering::Relaxed);
        *lock(&self.until) = Some(Instant::now() + self.period);
        self.count.fetch_add(1, Ordering::Relaxed);
        true
    }
}

/// One tenant's instances of one component.
pub struct Pool<W: World> {
    name: String,
    engine: Engine,
    pre: W::Pre,
    limits: Limits,
    slots: Vec<Mutex<Slot<W>>>,
    next_slot: AtomicUsize,
    failures: AtomicU64,
    /// Calls that entered the component.
    calls: AtomicU64,
    quarantine: Quarantine,
    /// Calls of this pool that may run on sandbox threads at once: one a store,
    /// so the others wait for a permit without holding a thread.
    sandbox_permits: Arc<tokio::sync::Semaphore>,
}

impl<W: World> std::fmt::Debug for Pool<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.name)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// A store and the instance in it, or nothing after a failure.
pub(super) struct Slot<W> {
    live: Option<Live<W>>,
    /// Bumped for each new instance, so stale resource handles are recognised.
    generation: u64,
}

pub(super) struct Live<W> {
    pub(super) store: Store<Sandbox>,
    pub(super) bindings: W,
}

impl<W: World> Pool<W> {
    pub(super) fn new(
        engine: Engine,
        name: &str,
        pre: W::Pre,
        limits: Limits,
        quarantine: Quarantine,
    ) -> Arc<Self> {
        let slots: Vec<_> = (0..limits.instances.max(1))
            .map(|_| {
                Mutex::new(Slot {
                    live: None,
                    generation: 0,
                })
            })
            .collect();
        Arc::new(Self {
            name: name.to_owned(),
            engine,
            pre,
            limits,
            sandbox_permits: Arc::new(tokio::sync::Semaphore::new(slots.len())),
            slots,
            next_slot: AtomicUsize::new(0),
            failures: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            quarantine,
        })
    }

    /// Whether calls are refused right now because too many failed in a row.
    pub fn quarantined(&self) -> bool {
        self.quarantine.check().is_err()
    }

    /// Times this pool was quarantined.
    pub fn quarantines(&self) -> u64 {
        self.quarantine.count.load(Ordering::Relaxed)
    }

    /// Refuses the call while quarantined.
    fn admit(&self) -> Result<(), CallError> {
        self.quarantine
            .check()
            .map_err(|remaining| CallError::Quarantined {
                period: self.quarantine.period,
                component: self.name.clone(),
                failures: self.quarantine.after,
                remaining,
            })
    }

    /// Books the outcome of a call for the quarantine.
    fn outcome<R>(&self, result: Result<R, CallError>) -> Result<R, CallError> {
        match &result {
            Ok(_) => self.quarantine.succeeded(),
            Err(CallError::Config { .. } | CallError::Quarantined { .. }) => {}
            Err(error) => {
                if self.quarantine.failed() {
                    tracing::warn!(component = %self.name, %error, period = ?self.quarantine.period, "component quarantined");
                }
            }
        }
        result
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Permits for calls run on sandbox threads (`runtime/threads.rs`, `pipeline/device.rs`).
    pub fn sandbox_permits(&self) -> &Arc<tokio::sync::Semaphore> {
        &self.sandbox_permits
    }

    /// Calls that failed (trap, limit, refused configuration) since the pool was made.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// A new binding, placed on the next store in turn.
    pub(super) fn bind(self: &Arc<Self>) -> Binding<W> {
        let slot = self.next_slot.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        Binding {
            pool: Arc::clone(self),
            slot,
            handle: Mutex::new(None),
        }
    }

    fn instantiate(&self, slot: &mut Slot<W>) -> Result<(), CallError> {
        let mut store = Store::new(&self.engine, Sandbox::new(self.limits.memory_bytes));
        store.limiter(|sandbox| sandbox);
        let instantiated = store
            .set_fuel(self.limits.fuel_per_call)
            .and_then(|()| W::instantiate(&self.pre, &mut store));
        match instantiated {
            Ok(bindings) => {
                slot.generation += 1;
                slot.live = Some(Live { store, bindings });
                Ok(())
            }
            Err(error) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                Err(CallError::Instantiate {
                    component: self.name.clone(),
                    detail: format!("{error:#}"),
                })
            }
        }
    }

    /// Runs `call` on an instance itself (a function of the world, no resource),
    /// with a fresh CPU budget; the instances take such calls in turn.
    pub(super) fn call_instance<R>(
        &self,
        function: &'static str,
        call: impl FnOnce(&mut Live<W>) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        self.admit()?;
        let index = self.next_slot.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = lock(&self.slots[index]);
        let result = if slot.live.is_none() {
            self.instantiate(&mut slot)
        } else {
            Ok(())
        }
        .and_then(|()| {
            self.budgeted(&mut slot, call)
                .map_err(|error| self.fail(&mut slot, function, error))
        });
        self.outcome(result)
    }

    fn budgeted<R>(
        &self,
        slot: &mut Slot<W>,
        f: impl FnOnce(&mut Live<W>) -> wasmtime::Result<R>,
    ) -> wasmtime::Result<R> {
        let Some(live) = slot.live.as_mut() else {
            return Err(wasmtime::Error::msg("instance missing"));
        };
        self.calls.fetch_add(1, Ordering::Relaxed);
        live.store.data_mut().begin_call();
        live.store.set_fuel(self.limits.fuel_per_call)?;
        f(live)
    }

    /// Turns a failed call into an error naming the limit, and drops the instance.
    fn fail(
        &self,
        slot: &mut Slot<W>,
        function: &'static str,
        error: wasmtime::Error,
    ) -> CallError {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let refused = slot
            .live
            .as_ref()
            .and_then(|live| live.store.data().refused());
        slot.live = None;
        let component = self.name.clone();
        if matches!(error.downcast_ref::<Trap>(), Some(Trap::OutOfFuel)) {
            let limit = Limit::Cpu {
                budget: self.limits.fuel_per_call,
            };
            return CallError::LimitExceeded {
                component,
                function,
                limit,
            };
        }
        if let Some(malformed) = error.downcast_ref::<MalformedBatch>() {
            return CallError::Malformed {
                component,
                function,
                detail: malformed.to_string(),
            };
        }
        if let Some(requested) = refused {
            let limit = Limit::Memory {
                cap: self.limits.memory_bytes,
                requested,
            };
            return CallError::LimitExceeded {
                component,
                function,
                limit,
            };
        }
        // The trap's own words ("out of bounds memory access"), not the line
        // that introduces the backtrace wasmtime puts before them.
        let detail = match error.downcast_ref::<Trap>() {
            Some(trap) => trap.to_string(),
            None => {
                let detail = format!("{error:#}");
                detail.lines().next().unwrap_or_default().to_owned()
            }
        };
        CallError::Trap {
            component,
            function,
            detail,
        }
    }
}

/// How one pool (one tenant's instances of one component) is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolHealth {
    /// Tells pools apart (devices share them): the pool's address.
    pub pool: usize,
    pub component: String,
    /// Calls that entered the component since the pool was made.
    pub calls: u64,
    /// Failed calls since the pool was made.
    pub failures: u64,
    pub quarantined: bool,
    /// Times it was quarantined.
    pub quarantines: u64,
}

/// What creates a binding's resource in a (new) instance.
pub(super) type Create<'a, W> =
    &'a dyn Fn(&mut Live<W>) -> wasmtime::Result<Result<ResourceAny, Vec<wit::ConfigError>>>;

/// One resource in one store of a pool.
pub(super) struct Binding<W: World> {
    pool: Arc<Pool<W>>,
    slot: usize,
    /// The resource and the instance generation it belongs to.
    handle: Mutex<Option<(u64, ResourceAny)>>,
}

impl<W: World> Binding<W> {
    pub(super) fn pool(&self) -> &Arc<Pool<W>> {
        &self.pool
    }

    /// How the pool this resource lives in is doing.
    pub(super) fn health(&self) -> PoolHealth {
        PoolHealth {
            pool: Arc::as_ptr(&self.pool) as *const () as usize,
            component: self.pool.name.clone(),
            calls: self.pool.calls.load(Ordering::Relaxed),
            failures: self.pool.failures(),
            quarantined: self.pool.quarantined(),
            quarantines: self.pool.quarantines(),
        }
    }

    /// The instance generation the resource was created in, while it is still
    /// alive there; `None` once the instance is gone or before the first call.
    pub(super) fn live_generation(&self) -> Option<u64> {
        let handle = *lock(&self.handle);
        let slot = lock(&self.pool.slots[self.slot]);
        handle
            .map(|(generation, _)| generation)
            .filter(|generation| slot.live.is_some() && *generation == slot.generation)
    }

    /// Runs `call` on the resource with a fresh CPU budget, first creating the
    /// instance and the resource (with `create`) when either is missing.
    pub(super) fn call<R>(
        &self,
        function: &'static str,
        create: Create<'_, W>,
        call: impl FnOnce(&mut Live<W>, ResourceAny) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        self.pool.admit()?;
        let mut handle = lock(&self.handle);
        let mut slot = lock(&self.pool.slots[self.slot]);
        let result = self
            .ensure(&mut handle, &mut slot, create)
            .and_then(|resource| {
                self.pool
                    .budgeted(&mut slot, |live| call(live, resource))
                    .map_err(|error| {
                        *handle = None;
                        self.pool.fail(&mut slot, function, error)
                    })
            });
        self.pool.outcome(result)
    }

    fn ensure(
        &self,
        handle: &mut Option<(u64, ResourceAny)>,
        slot: &mut Slot<W>,
        create: Create<'_, W>,
    ) -> Result<ResourceAny, CallError> {
        if slot.live.is_none() {
            self.pool.instantiate(slot)?;
        }
        if let Some((generation, resource)) = *handle
            && generation == slot.generation
        {
            return Ok(resource);
        }
        match self.pool.budgeted(slot, create) {
            Ok(Ok(resource)) => {
                *handle = Some((slot.generation, resource));
                Ok(resource)
            }
            // Settings the component refuses are the configuration's fault,
            // not the component's: its driver stays online (a refused
            // reload changes no state).
            Ok(Err(issues)) => Err(CallError::Config {
                component: self.pool.name.clone(),
                issues: issues_from_wit(issues),
            }),
            Err(error) => Err(self.pool.fail(slot, "create", error)),
        }
    }
}

impl<W: World> Drop for Binding<W> {
    fn drop(&mut self) {
        self.release();
    }
}

impl<W: World> Binding<W> {
    /// Drops the resource in its instance, whose heap takes its memory back;
    /// the next call creates it again.
    pub(super) fn release(&self) {
        let handle = lock(&self.handle).take();
        let mut slot = lock(&self.pool.slots[self.slot]);
        if let Some((generation, resource)) = handle
            && generation == slot.generation
            && let Some(live) = slot.live.as_mut()
            && let Err(error) = resource.resource_drop(&mut live.store)
        {
            tracing::debug!(component = %self.pool.name, %error, "dropping a resource failed");
        }
    }
}
