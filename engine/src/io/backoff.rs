//! Reconnect delays: exponential from a base, capped, with random jitter so that
//! devices that dropped together do not all reconnect in the same instant (a PLC
//! that allows a handful of connections would be flooded again).

use std::time::Duration;

use crate::config::BackoffConfig;

/// The delay before reconnect attempt `attempt` (1-based): `base x 2^(attempt-1)`,
/// at most `max`, then scaled by a random factor in `1 +/- jitter`.
///
/// `unit_random` is a number in `[0, 1)`; callers pass [`Jitter::sample`].
pub fn delay(config: &BackoffConfig, attempt: u32, unit_random: f64) -> Duration {
    let raw = exponential(config.base_ms, config.max_ms, attempt);
    let factor = 1.0 + (unit_random * 2.0 - 1.0) * config.jitter;
    Duration::from_millis((raw as f64 * factor).max(0.0) as u64)
}

/// `base x 2^(attempt-1)` for attempt `attempt` (1-based), at most `max`: the
/// delay before a retry, without jitter.
pub fn exponential(base: u64, max: u64, attempt: u32) -> u64 {
    let exponent = attempt.saturating_sub(1).min(32);
    base.saturating_mul(1u64 << exponent).min(max)
}

/// A small xorshift generator for jitter: spreading reconnects needs no more.
#[derive(Debug, Clone)]
pub struct Jitter(u64);

impl Jitter {
    /// A generator seeded from `seed` (any value; zero is replaced).
    pub fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    /// The next number in `[0, 1)`.
    pub fn sample(&mut self) -> f64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULTS: BackoffConfig = BackoffConfig {
        base_ms: 1000,
        max_ms: 60_000,
        jitter: 0.3,
    };

    #[test]
    fn doubles_up_to_the_cap() {
        let mid = |attempt| delay(&DEFAULTS, attempt, 0.5).as_millis();
        assert_eq!(
            [mid(1), mid(2), mid(3), mid(6), mid(7), mid(100)],
            [1000, 2000, 4000, 32_000, 60_000, 60_000]
        );
    }

    #[test]
    fn jitter_stays_within_its_ratio() {
        let mut jitter = Jitter::new(42);
        let delays: Vec<u128> = (0..1000)
            .map(|_| delay(&DEFAULTS, 1, jitter.sample()).as_millis())
            .collect();
        assert!(
            delays.iter().all(|d| (700..=1300).contains(d)),
            "{delays:?}"
        );
        let low = delays.iter().filter(|d| **d < 900).count();
        let high = delays.iter().filter(|d| **d > 1100).count();
        assert!(
            low > 200 && high > 200,
            "spread over the range: {low} low, {high} high"
        );
    }
}
