//! Each device's last value of every tag, for whoever looks at the devices (the
//! console), and a signal that rounds finished, so a watcher waits for rounds
//! rather than asking every device over and over.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

use super::trend::{Points, Trend};
use crate::model::{Quality, Sample, Value};
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

/// The last samples, kept compact: every tag of the fleet has one (100,000 at
/// 1,000 devices of 100 tags), and a [`Sample`] of its own would take 40 bytes
/// where these take 17 (docs/performance.md, "Memory: the console's last values
/// and the codecs' tag keys").
#[derive(Debug)]
struct Latest {
    /// A tag's value as bits ([`Value::to_bits`]) and its timestamp.
    values: Vec<(u64, i64)>,
    /// A tag's value kind in the low four bits, its quality's code above them.
    marks: Vec<u8>,
    /// The last values that are texts or arrays, by tag: rarer, so kept aside.
    aside: HashMap<u32, Value>,
    /// The [`RoundsDone`] generation of the last round that brought samples.
    generation: u64,
    /// When that round finished, ms since the Unix epoch.
    round_at_ms: Option<i64>,
    /// The numeric tags' last hour.
    trend: Trend,
}

/// The bits of a mark that hold the value's kind; the quality's code is above.
const KIND_BITS: u8 = 0x0f;

/// The mark of a value of `kind` at `quality`.
fn pack(kind: u8, quality: Quality) -> u8 {
    kind | (quality.code() << 4)
}

impl Latest {
    fn set(&mut self, sample: &Sample) {
        let tag = sample.tag as usize;
        let (Some(value), Some(mark)) = (self.values.get_mut(tag), self.marks.get_mut(tag)) else {
            return;
        };
        let (kind, bits) = sample.value.to_bits();
        if Value::kept_aside(kind) {
            self.aside.insert(sample.tag, sample.value.clone());
        } else if Value::kept_aside(*mark & KIND_BITS) {
            self.aside.remove(&sample.tag);
        }
        *value = (bits, sample.ts_ms);
        *mark = pack(kind, sample.quality);
    }

    fn get(&self, tag: usize) -> Option<Sample> {
        let (&(bits, ts_ms), &mark) = (self.values.get(tag)?, self.marks.get(tag)?);
        let index = u32::try_from(tag).ok()?;
        let kind = mark & KIND_BITS;
        let value = Value::from_bits(kind, bits, self.aside.get(&index).cloned())?;
        Some(Sample {
            tag: index,
            value,
            quality: Quality::from_code(mark >> 4)?,
            ts_ms,
        })
    }
}

/// What a watcher reads of a device.
#[derive(Debug, Clone)]
pub struct LatestView {
    /// One a tag; a tag never read yet has [`Value::None`] and `ts_ms` 0.
    pub samples: Vec<Sample>,
    pub round_at_ms: Option<i64>,
}

/// How a tag's values are shown on the console.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TagDisplay {
    pub unit: Option<Box<str>>,
    /// Decimals; four significant digits without.
    pub precision: Option<u8>,
}

/// The numeric tags' values over the last hour, at one point per `spacing_ms`
/// at most: one entry a tag, indexed like its tag list.
#[derive(Debug, Clone)]
pub struct TrendView {
    pub spacing_ms: i64,
    pub tags: Vec<Points>,
}

impl LatestValues {
    /// Nothing read yet of `tags` tags, whose trends keep `trend_points` points
    /// each ([`super::trend::points_per_tag`]).
    pub fn new(tags: usize, trend_points: usize) -> Self {
        let tags = tags.min(u32::MAX as usize);
        Self {
            slots: Mutex::new(Latest {
                values: vec![(0, 0); tags],
                marks: vec![pack(Value::None.to_bits().0, Quality::Bad); tags],
                aside: HashMap::new(),
                generation: 0,
                round_at_ms: None,
                trend: Trend::new(tags, trend_points),
            }),
        }
    }

    /// Keeps a round's samples (each replaces its tag's, and joins its
    /// trend) and tells `done`.
    pub fn record(&self, samples: &[Sample], now_ms: i64, done: &RoundsDone) {
        let mut latest = lock(&self.slots);
        for sample in samples {
            latest.set(sample);
            latest.trend.record(sample);
        }
        latest.round_at_ms = Some(now_ms);
        latest.generation = done.bump();
    }

    /// A copy of what was last read.
    pub fn view(&self) -> LatestView {
        let latest = lock(&self.slots);
        LatestView {
            samples: (0..latest.values.len())
                .filter_map(|tag| latest.get(tag))
                .collect(),
            round_at_ms: latest.round_at_ms,
        }
    }

    /// Every tag's trend over the hour before `now_ms`.
    pub fn trend(&self, now_ms: i64) -> TrendView {
        let latest = lock(&self.slots);
        TrendView {
            spacing_ms: latest.trend.spacing_ms(),
            tags: (0..latest.values.len())
                .map(|tag| latest.trend.points(tag, now_ms))
                .collect(),
        }
    }

    /// The last sample of `tag`, if it has one.
    pub fn get(&self, tag: u32) -> Option<Sample> {
        lock(&self.slots).get(tag as usize)
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
    use crate::model::Span;

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
        let latest = LatestValues::new(3, 0);
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

    #[test]
    fn every_kind_of_value_and_quality_comes_back_as_it_was_recorded() {
        let done = RoundsDone::default();
        let values = [
            Value::None,
            Value::Raw(Span { start: 7, len: 4 }),
            Value::Bool(true),
            Value::Int(-5),
            Value::Int(i64::MIN),
            Value::Uint(u64::MAX),
            Value::Float(-0.25),
            Value::Text("ok".into()),
        ];
        let qualities = [Quality::Good, Quality::Uncertain, Quality::Bad];
        let samples: Vec<Sample> = values
            .iter()
            .enumerate()
            .map(|(i, value)| Sample {
                tag: i as u32,
                value: value.clone(),
                quality: qualities[i % 3],
                ts_ms: -(i as i64) * 1_000_000_007,
            })
            .collect();
        let latest = LatestValues::new(samples.len(), 0);
        latest.record(&samples, 1, &done);
        assert_eq!(latest.view().samples, samples);
    }

    #[test]
    fn texts_and_arrays_are_kept_aside_and_forgotten_when_a_number_replaces_them() {
        let done = RoundsDone::default();
        let latest = LatestValues::new(1, 0);
        let text = Sample {
            tag: 0,
            value: Value::Text("first".into()),
            quality: Quality::Good,
            ts_ms: 1,
        };
        latest.record(std::slice::from_ref(&text), 1, &done);
        latest.record(&[sample(0, 3, 2), sample(1, 4, 2)], 2, &done);
        assert_eq!(latest.view().samples, vec![sample(0, 3, 2)]);
        assert!(lock(&latest.slots).aside.is_empty());
        latest.record(std::slice::from_ref(&text), 3, &done);
        assert_eq!(latest.view().samples, vec![text.clone()]);
        let array = Sample {
            value: Value::Array(Box::new([Value::Int(1), Value::Bool(false)])),
            ..text
        };
        latest.record(std::slice::from_ref(&array), 4, &done);
        assert_eq!(latest.view().samples, vec![array]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_watcher_wakes_for_the_round_after_the_one_it_saw() {
        let done = Arc::new(RoundsDone::default());
        let latest = LatestValues::new(1, 0);
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
