//! Each device's last value of every tag, for whoever looks at the devices (the
//! console), and a signal that rounds finished, so a watcher waits for rounds
//! rather than asking every device over and over.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

use crate::model::{Sample, Value};
use crate::sync::lock;

/// Counts the rounds that brought samples, fleet-wide, and wakes who waits for one.
#[derive(Debug, Default)]
pub struct RoundsDone {
    generation: AtomicU64,
    notify: Notify,
}

impl RoundsDone {
    /// Rounds counted so far.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Waits until a round finishes after generation `seen`; returns the new
    /// generation.
    pub async fn after(&self, seen: u64) -> u64 {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so a round in between still wakes us.
            notified.as_mut().enable();
            let now = self.generation();
            if now > seen {
                return now;
            }
            notified.await;
        }
    }

    fn bump(&self) -> u64 {
        let generation = self.generation.fetch_add(1, Ordering::AcqRel) + 1;
        self.notify.notify_waiters();
        generation
    }
}

/// A device's last sample of every tag, indexed like its tag list.
#[derive(Debug)]
pub struct LatestValues {
    slots: Mutex<Latest>,
}

#[derive(Debug)]
struct Latest {
    samples: Vec<Sample>,
    /// The [`RoundsDone`] generation of the last round that brought samples.
    generation: u64,
    /// When that round finished, ms since the Unix epoch.
    round_at_ms: Option<i64>,
}

/// What a watcher reads of a device.
#[derive(Debug, Clone)]
pub struct LatestView {
    /// One a tag; a tag never read yet has [`Value::None`] and `ts_ms` 0.
    pub samples: Vec<Sample>,
    pub round_at_ms: Option<i64>,
}

impl LatestValues {
    /// Nothing read yet of `tags` tags.
    pub fn new(tags: usize) -> Self {
        let empty = |tag| Sample {
            tag,
            value: Value::None,
            quality: crate::model::Quality::Bad,
            ts_ms: 0,
        };
        let samples = (0..u32::try_from(tags).unwrap_or(u32::MAX))
            .map(empty)
            .collect();
        Self {
            slots: Mutex::new(Latest {
                samples,
                generation: 0,
                round_at_ms: None,
            }),
        }
    }

    /// Keeps a round's samples (each replaces its tag's) and tells `done`.
    pub fn record(&self, samples: &[Sample], now_ms: i64, done: &RoundsDone) {
        let mut latest = lock(&self.slots);
        for sample in samples {
            if let Some(slot) = usize::try_from(sample.tag)
                .ok()
                .and_then(|tag| latest.samples.get_mut(tag))
            {
                slot.clone_from(sample);
            }
        }
        latest.round_at_ms = Some(now_ms);
        latest.generation = done.bump();
    }

    /// A copy of what was last read.
    pub fn view(&self) -> LatestView {
        let latest = lock(&self.slots);
        LatestView {
            samples: latest.samples.clone(),
            round_at_ms: latest.round_at_ms,
        }
    }

    /// The generation of the last round that brought samples (0: none yet).
    pub fn generation(&self) -> u64 {
        lock(&self.slots).generation
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::model::Quality;

    fn sample(tag: u32, value: i64, ts_ms: i64) -> Sample {
        Sample {
            tag,
            value: Value::Int(value),
            quality: Quality::Good,
            ts_ms,
        }
    }

    #[test]
    fn each_sample_replaces_its_tag_and_others_keep_theirs() {
        let done = RoundsDone::default();
        let latest = LatestValues::new(3);
        assert_eq!(latest.view().round_at_ms, None);
        latest.record(&[sample(0, 1, 10), sample(2, 5, 10)], 11, &done);
        latest.record(&[sample(2, 6, 20), sample(7, 9, 20)], 21, &done);
        let view = latest.view();
        assert_eq!(view.samples[0], sample(0, 1, 10));
        assert_eq!(view.samples[1].value, Value::None);
        assert_eq!(view.samples[2], sample(2, 6, 20));
        assert_eq!((latest.generation(), view.round_at_ms), (2, Some(21)));
        assert_eq!(done.generation(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_watcher_wakes_for_the_round_after_the_one_it_saw() {
        let done = Arc::new(RoundsDone::default());
        let latest = LatestValues::new(1);
        latest.record(&[sample(0, 1, 1)], 1, &done);
        // Already past what it saw: no wait.
        assert_eq!(done.after(0).await, 1);
        let waiter = tokio::spawn({
            let done = Arc::clone(&done);
            async move { done.after(1).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiter.is_finished());
        latest.record(&[sample(0, 2, 2)], 2, &done);
        assert_eq!(waiter.await.expect("joined"), 2);
    }
}
