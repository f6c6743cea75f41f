//! Each numeric tag's values over the last hour, for the console's trend
//! charts: a ring of points per tag, one point per spacing at most, in a
//! fleet-wide budget (a gateway of many tags keeps fewer points of each).

use std::collections::VecDeque;

use crate::model::{Quality, Sample, Value};

/// How far back a trend goes, ms.
pub const WINDOW_MS: i64 = 3_600_000;
/// Points the fleet keeps at most (16 bytes each: 8 MiB), shared by its tags.
const FLEET_POINTS: usize = 1 << 19;
/// Points one tag keeps at most: one every 10 s over the hour.
const MAX_TAG_POINTS: usize = 360;
/// Fewer points than this (one every 5 minutes) draw no useful trend: a fleet
/// whose tags would get fewer keeps none, and its memory.
const MIN_TAG_POINTS: usize = 12;

/// Points each of a fleet's `tags` keeps: the fleet's budget shared, at most
/// one every 10 s, none below one every 5 minutes (above about 43,000 tags).
pub fn points_per_tag(tags: usize) -> usize {
    let share = (FLEET_POINTS / tags.max(1)).min(MAX_TAG_POINTS);
    if share < MIN_TAG_POINTS { 0 } else { share }
}

/// One device's trends, tag by tag.
#[derive(Debug, Default)]
pub(super) struct Trend {
    /// Points a tag keeps; 0 keeps none.
    capacity: usize,
    /// The shortest time between two points of a tag, ms.
    spacing_ms: i64,
    /// When each tag's next point is due, ms: every sample is checked
    /// against it, next to the device's other tags, without reading the tag's
    /// ring (an allocation of its own, which a sample then rarely touches).
    due: Vec<i64>,
    /// Made when a tag first brings a number.
    rings: Vec<Option<VecDeque<(i64, f64)>>>,
}

/// A tag's points, oldest first: (ms since the Unix epoch, value).
pub type Points = Vec<(i64, f64)>;

impl Trend {
    /// Trends of `tags` tags, `capacity` points each.
    pub(super) fn new(tags: usize, capacity: usize) -> Self {
        let tags = if capacity == 0 { 0 } else { tags };
        Self {
            capacity,
            spacing_ms: WINDOW_MS / i64::try_from(capacity.max(1)).unwrap_or(i64::MAX),
            due: vec![i64::MIN; tags],
            rings: (0..tags).map(|_| None).collect(),
        }
    }

    /// The shortest time between two points kept, ms.
    pub(super) fn spacing_ms(&self) -> i64 {
        self.spacing_ms
    }

    /// Keeps `sample` if it is a number that is not BAD and comes a spacing
    /// or more after its tag's last point.
    pub(super) fn record(&mut self, sample: &Sample) {
        let tag = sample.tag as usize;
        let Some(due) = self.due.get_mut(tag) else {
            return;
        };
        // A sample from before the tag's last point (the clock was set back)
        // starts the trend again from the new time.
        let set_back = sample.ts_ms < due.saturating_sub(self.spacing_ms);
        if (sample.ts_ms < *due && !set_back) || sample.quality == Quality::Bad {
            return;
        }
        let Some(number) = number(&sample.value) else {
            return;
        };
        let Some(slot) = self.rings.get_mut(tag) else {
            return;
        };
        let ring = slot.get_or_insert_with(|| VecDeque::with_capacity(self.capacity));
        if set_back {
            ring.clear();
        }
        if ring.len() == self.capacity {
            ring.pop_front();
        }
        ring.push_back((sample.ts_ms, number));
        *due = sample.ts_ms.saturating_add(self.spacing_ms);
    }

    /// Tag `tag`'s points of the hour before `now_ms`, oldest first.
    pub(super) fn points(&self, tag: usize, now_ms: i64) -> Points {
        self.rings
            .get(tag)
            .and_then(Option::as_ref)
            .map(|ring| {
                ring.iter()
                    .filter(|(ts, _)| now_ms - ts <= WINDOW_MS)
                    .copied()
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A value a chart can draw.
fn number(value: &Value) -> Option<f64> {
    let number = match value {
        Value::Int(i) => *i as f64,
        Value::Uint(u) => *u as f64,
        Value::Float(f) => *f,
        _ => return None,
    };
    number.is_finite().then_some(number)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(tag: u32, ts_ms: i64, value: Value, quality: Quality) -> Sample {
        Sample {
            tag,
            value,
            quality,
            ts_ms,
        }
    }

    #[test]
    fn a_fleet_shares_its_budget() {
        assert_eq!(points_per_tag(0), MAX_TAG_POINTS);
        assert_eq!(points_per_tag(1_000), MAX_TAG_POINTS);
        assert_eq!(points_per_tag(40_000), 13);
        assert_eq!(points_per_tag(100_000), 0);
    }

    #[test]
    fn one_point_per_spacing_the_oldest_dropped_numbers_only() {
        // Four points an hour: one every 15 minutes.
        let mut trend = Trend::new(2, 4);
        assert_eq!(trend.spacing_ms(), 900_000);
        let minute = 60_000;
        for m in 0..=75 {
            trend.record(&sample(0, m * minute, Value::Int(m), Quality::Good));
        }
        trend.record(&sample(1, 0, Value::Bool(true), Quality::Good));
        trend.record(&sample(1, 0, Value::Float(f64::NAN), Quality::Good));
        trend.record(&sample(1, minute, Value::Float(2.5), Quality::Bad));
        let now = 75 * minute;
        assert_eq!(
            trend.points(0, now),
            [30, 45, 60, 75].map(|m| (m * minute, m as f64))
        );
        assert!(trend.points(1, now).is_empty());
        // An hour later the old points are past the window.
        assert_eq!(
            trend.points(0, now + 45 * minute),
            [60, 75].map(|m| (m * minute, m as f64))
        );
        assert!(Trend::new(3, 0).points(0, now).is_empty());
        // The clock set back an hour: the next sample is a point at once.
        trend.record(&sample(0, 20 * minute, Value::Int(-1), Quality::Good));
        assert_eq!(trend.points(0, 20 * minute + 1), [(20 * minute, -1.0)]);
    }
}
