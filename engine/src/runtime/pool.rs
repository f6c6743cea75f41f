//! Instances of one component for one tenant, generic over the component's world.
//!
//! A pool holds `instances` stores, each with one instance of the component; a
//! [`Binding`] is one resource (a device's processor or codec session) pinned to one
//! store. When a call fails the store is discarded; bindings notice the new
//! generation and recreate their resource on their next call.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use wasmtime::component::{InstancePre, ResourceAny};
use wasmtime::{Engine, Store, Trap};

use super::bindings::wit;
use super::convert::issues_from_wit;
use super::{CallError, Limit, Limits, Sandbox};

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

/// One tenant's instances of one component.
pub struct Pool<W: World> {
    name: String,
    engine: Engine,
    pre: W::Pre,
    limits: Limits,
    slots: Vec<Mutex<Slot<W>>>,
    next_slot: AtomicUsize,
    failures: AtomicU64,
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

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while a slot is locked can at worst leave a dead instance, which the
    // next call rebuilds, so a poisoned lock is used as is.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<W: World> Pool<W> {
    pub(super) fn new(engine: Engine, name: &str, pre: W::Pre, limits: Limits) -> Arc<Self> {
        let slots = (0..limits.instances.max(1))
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
            slots,
            next_slot: AtomicUsize::new(0),
            failures: AtomicU64::new(0),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
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
        let index = self.next_slot.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = lock(&self.slots[index]);
        if slot.live.is_none() {
            self.instantiate(&mut slot)?;
        }
        self.budgeted(&mut slot, call)
            .map_err(|error| self.fail(&mut slot, function, error))
    }

    fn budgeted<R>(
        &self,
        slot: &mut Slot<W>,
        f: impl FnOnce(&mut Live<W>) -> wasmtime::Result<R>,
    ) -> wasmtime::Result<R> {
        let Some(live) = slot.live.as_mut() else {
            return Err(wasmtime::Error::msg("instance missing"));
        };
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
        let detail = format!("{error:#}");
        let detail = detail.lines().next().unwrap_or_default().to_owned();
        CallError::Trap {
            component,
            function,
            detail,
        }
    }
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
    pub(super) fn pool(&self) -> &Pool<W> {
        &self.pool
    }

    /// Runs `call` on the resource with a fresh CPU budget, first creating the
    /// instance and the resource (with `create`) when either is missing.
    pub(super) fn call<R>(
        &self,
        function: &'static str,
        create: Create<'_, W>,
        call: impl FnOnce(&mut Live<W>, ResourceAny) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let mut handle = lock(&self.handle);
        let mut slot = lock(&self.pool.slots[self.slot]);
        let resource = self.ensure(&mut handle, &mut slot, create)?;
        let result = self.pool.budgeted(&mut slot, |live| call(live, resource));
        result.map_err(|error| {
            *handle = None;
            self.pool.fail(&mut slot, function, error)
        })
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
            Ok(Err(issues)) => {
                self.pool.failures.fetch_add(1, Ordering::Relaxed);
                Err(CallError::Config {
                    component: self.pool.name.clone(),
                    issues: issues_from_wit(issues),
                })
            }
            Err(error) => Err(self.pool.fail(slot, "create", error)),
        }
    }
}

impl<W: World> Drop for Binding<W> {
    fn drop(&mut self) {
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
