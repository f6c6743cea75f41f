//! Wall-clock time for timestamps, and the ticks of periodic background tasks.
//! Scheduling uses tokio's monotonic clock; only the times written into payloads
//! and records come from the wall clock.

use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio::time::Interval;

/// Waits for the next tick of `timer`; `false` as soon as `shutdown` turns true
/// (or its sender is gone), so a task loops `while next_tick(..).await`.
pub async fn next_tick(timer: &mut Interval, shutdown: &mut watch::Receiver<bool>) -> bool {
    loop {
        tokio::select! {
            _ = timer.tick() => return true,
            changed = shutdown.changed() => {
                if changed.is_err() || *shutdown.borrow() {
                    return false;
                }
            }
        }
    }
}

/// Sleeps until `deadline`; without one, never wakes (a `select!` branch that
/// has nothing to wait for).
pub async fn sleep_until_some(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
