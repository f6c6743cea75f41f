//! What the log says about a device that cannot be reached: one WARN naming the
//! device, its channel, the address and the cause when the channel's connection
//! first fails, again
//! only when the cause changes or it has lasted another [`REPEAT`], and one
//! INFO when the device is reached again. Between them, the failed connects of
//! its backoff are the device's `lastError` only.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::sync::lock;

/// How often a problem that lasts is told again.
pub(super) const REPEAT: Duration = Duration::from_secs(300);

/// One channel's connection problem, as far as the log was told of it.
#[derive(Debug, Default)]
pub(super) struct Reach {
    /// Whether a problem was told and not yet cleared: read on every round
    /// that connects, without the lock.
    told: AtomicBool,
    last: Mutex<Option<Told>>,
}

#[derive(Debug)]
struct Told {
    cause: String,
    at: Instant,
}

impl Reach {
    /// A connect of `device`'s `channel` to `address` failed with `cause` at
    /// `now`: tells the log when it is due; whether it did.
    pub(super) fn failed(
        &self,
        device: &str,
        channel: &str,
        address: &str,
        cause: &str,
        now: Instant,
    ) -> bool {
        let mut last = lock(&self.last);
        let due = last.as_ref().is_none_or(|told| {
            told.cause != cause || now.saturating_duration_since(told.at) >= REPEAT
        });
        if !due {
            return false;
        }
        tracing::warn!(
            device,
            channel,
            address,
            error = cause,
            "device unreachable; retrying"
        );
        *last = Some(Told {
            cause: cause.to_owned(),
            at: now,
        });
        self.told.store(true, Ordering::Relaxed);
        true
    }

    /// `device`'s `channel` reached `address` (made only when it is told):
    /// tells the log if a problem was told; whether it did.
    pub(super) fn reached(
        &self,
        device: &str,
        channel: &str,
        address: impl FnOnce() -> String,
    ) -> bool {
        if !self.told.load(Ordering::Relaxed) {
            return false;
        }
        self.told.store(false, Ordering::Relaxed);
        let cleared = lock(&self.last).take().is_some();
        if cleared {
            tracing::info!(
                device,
                channel,
                address = address(),
                "device reachable again"
            );
        }
        cleared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lasting_problem_is_told_once_then_when_it_changes_or_lasts_and_when_it_ends() {
        let reach = Reach::default();
        let start = Instant::now();
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        let refused = "connecting to 127.0.0.1:1 failed: connection refused";
        let told = (0..60)
            .filter(|s| reach.failed("meter", "ch1", "127.0.0.1:1", refused, at(*s)))
            .count();
        assert_eq!(told, 1, "a minute of failed connects: one WARN");

        assert!(
            reach.failed("meter", "ch1", "127.0.0.1:1", "timed out", at(61)),
            "a new cause"
        );
        let later = at(61) + REPEAT / 2;
        assert!(!reach.failed("meter", "ch1", "127.0.0.1:1", "timed out", later));
        let lasting = at(61) + REPEAT;
        assert!(
            reach.failed("meter", "ch1", "127.0.0.1:1", "timed out", lasting),
            "after REPEAT"
        );

        assert!(
            reach.reached("meter", "ch1", || "127.0.0.1:1".into()),
            "reached again: one INFO"
        );
        assert!(!reach.reached("meter", "ch1", || "127.0.0.1:1".into()));
        assert!(
            reach.failed("meter", "ch1", "127.0.0.1:1", refused, lasting),
            "a new outage"
        );
    }

    #[test]
    fn a_device_never_unreachable_tells_nothing() {
        assert!(!Reach::default().reached("meter", "ch1", || "127.0.0.1:502".into()));
    }
}
