//! The threads that uploaded components' calls run on, off the async runtime.
//!
//! A blocking pool of their own, apart from tokio's (which also does the engine's
//! file work), whose threads the kernel schedules after every thread of the
//! engine's (`SCHED_IDLE` on Linux). On a gateway with two cores, a stage that
//! loops until its budget would otherwise share a core equally with the polling
//! thread, the broker client and the PLC links, and a round that fell due while
//! it ran waited for its time slice; under `SCHED_IDLE` the engine's threads take
//! the core from it the moment they wake, so one tenant's heavy or looping code
//! takes only CPU the engine leaves idle (docs/components.md, "Where component
//! calls run"). A call still gets a whole core while nothing else wants it.

use std::sync::{Arc, OnceLock};

use tokio::runtime::{Builder, Handle};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::CallError;

/// How much lower than the engine's threads the sandbox threads run where the
/// kernel refuses `SCHED_IDLE`.
#[cfg(target_os = "linux")]
const NICE_INCREMENT: i32 = 10;

/// Runs `call` on a sandbox thread; the handle gives its result, or how the
/// thread ended without one.
pub fn spawn<T, F>(call: F) -> JoinHandle<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match pool() {
        Some(pool) => pool.spawn_blocking(call),
        None => tokio::task::spawn_blocking(call),
    }
}

/// Runs `call` on a sandbox thread once one of `permits` (one a store of the
/// component's pool) is free: calls beyond the pool's stores wait here without
/// holding a thread each, blocked on a store's lock. The permit goes with the
/// call, so a caller that stops waiting does not let another call start beside
/// it. `function` names the call in the error when the thread ended without an
/// answer (or the permits were closed).
///
/// # Errors
/// [`CallError::Lost`] when the call gave no answer; else the call's own.
pub async fn call_in_sandbox<T, F>(
    permits: &Arc<Semaphore>,
    component: &str,
    function: &'static str,
    call: F,
) -> Result<T, CallError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, CallError> + Send + 'static,
{
    let lost = |detail: String| CallError::Lost {
        component: component.to_owned(),
        function,
        detail,
    };
    let permit = Arc::clone(permits)
        .acquire_owned()
        .await
        .map_err(|closed| lost(closed.to_string()))?;
    spawn(move || {
        let _permit = permit;
        call()
    })
    .await
    .unwrap_or_else(|ended| Err(lost(ended.to_string())))
}

/// The sandbox threads' pool, built on first use and kept for the process's
/// life; `None` (calls go to tokio's own blocking pool) if it cannot be built.
fn pool() -> Option<&'static Handle> {
    static POOL: OnceLock<Option<tokio::runtime::Runtime>> = OnceLock::new();
    POOL.get_or_init(|| {
        // Only its blocking pool is used: nothing drives its scheduler.
        Builder::new_current_thread()
            .thread_name("sluice-sandbox")
            .on_thread_start(lower_priority)
            .build()
            .inspect_err(|error| {
                tracing::warn!(%error, "no sandbox threads; uploaded stages run at normal priority");
            })
            .ok()
    })
    .as_ref()
    .map(tokio::runtime::Runtime::handle)
}

/// Puts the calling thread under `SCHED_IDLE` (on Linux a scheduling policy
/// belongs to the thread, not the process): the kernel gives it a core only when
/// no thread of normal policy wants it, and a normal thread that wakes takes the
/// core from it at once. Where that is refused, a nice value 10 lower.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `sched_param` is plain integers (musl adds fields for
        // SCHED_SPORADIC); all zeros is priority 0, the one SCHED_IDLE takes. The
        // system calls change only the calling thread's scheduling (pid 0) and read
        // nothing but the parameter passed by reference, which outlives the call.
        // The system call, not libc's wrapper: musl's `sched_setscheduler` refuses
        // every call (ENOSYS), since POSIX makes the policy the process's. A refusal
        // leaves the thread as it was.
        #[allow(unsafe_code)]
        unsafe {
            let idle: libc::sched_param = std::mem::zeroed();
            let set = libc::syscall(
                libc::SYS_sched_setscheduler,
                0,
                libc::SCHED_IDLE,
                &raw const idle,
            );
            if set != 0 {
                libc::nice(NICE_INCREMENT);
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn policy_of_this_thread() -> i32 {
        // SAFETY: the system call reads the calling thread's policy only (musl's
        // wrapper refuses it, as `lower_priority` says).
        #[allow(unsafe_code)]
        let policy = unsafe { libc::syscall(libc::SYS_sched_getscheduler, 0) };
        i32::try_from(policy).expect("a policy number")
    }

    #[tokio::test]
    async fn calls_run_on_named_threads_below_the_engines_priority() {
        let engine = policy_of_this_thread();
        assert_ne!(engine, libc::SCHED_IDLE);
        let (name, policy) = spawn(|| {
            (
                std::thread::current().name().map(str::to_owned),
                policy_of_this_thread(),
            )
        })
        .await
        .expect("the call ran");
        assert_eq!(name.as_deref(), Some("sluice-sandbox"));
        assert_eq!(policy, libc::SCHED_IDLE);
        assert_eq!(
            policy_of_this_thread(),
            engine,
            "the caller's policy is kept"
        );
        let other = tokio::task::spawn_blocking(policy_of_this_thread)
            .await
            .expect("ran");
        assert_eq!(other, engine, "tokio's own blocking threads are untouched");
    }
}
