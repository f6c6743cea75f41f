//! Read planning: which batch reads cover a set of due tags.
//!
//! Tags are grouped by device and unit (word reads of a word device, bit reads of
//! a bit device), sorted by device number and merged into one request while the
//! gap between them is at most `merge_gap` points and the request stays within the
//! limit of its unit. A tag listed in `boundaries` always starts a new request:
//! that is how a split made after an end code is remembered.

use alloc::collections::BTreeSet;
use alloc::vec::Vec;

use crate::address::Device;

/// How a request counts its points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unit {
    /// 16-bit words, two bytes each in the response.
    Word,
    /// Single bits, four bits per response byte.
    Bit,
}

/// What the planner needs of a tag.
#[derive(Debug, Clone, Copy)]
pub struct TagRange {
    pub device: Device,
    pub unit: Unit,
    /// Head device number.
    pub start: u32,
    /// Points (words or bits) the tag occupies, at least 1.
    pub count: u32,
}

impl TagRange {
    fn end(&self) -> u64 {
        u64::from(self.start) + u64::from(self.count)
    }
}

/// One batch read: a contiguous range of one device and the tags inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub device: Device,
    pub unit: Unit,
    pub start: u32,
    pub count: u32,
    pub tags: Vec<u32>,
}

impl Request {
    fn end(&self) -> u64 {
        u64::from(self.start) + u64::from(self.count)
    }
}

/// Limits of one request.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub merge_gap: u32,
    pub max_words: u32,
    pub max_bits: u32,
}

/// The limits used: a gap of 16 points, 960 words per word read (the 3E limit) and
/// 3584 points per bit read (half the 3E limit of 7168, which older modules and
/// some CPUs do not reach).
pub const LIMITS: Limits = Limits {
    merge_gap: 16,
    max_words: 960,
    max_bits: 3584,
};

impl Limits {
    pub fn max_for(&self, unit: Unit) -> u32 {
        match unit {
            Unit::Word => self.max_words,
            Unit::Bit => self.max_bits,
        }
    }
}

/// Requests covering `due` (indexes into `tags`).
pub fn plan(
    tags: &[TagRange],
    due: &[u32],
    limits: Limits,
    boundaries: &BTreeSet<u32>,
) -> Vec<Request> {
    let mut sorted: Vec<(TagRange, u32)> = due
        .iter()
        .filter_map(|&t| tags.get(t as usize).map(|range| (*range, t)))
        .collect();
    sorted.sort_by_key(|(r, t)| (r.device.code, r.unit, r.start, *t));
    sorted.dedup_by_key(|(_, t)| *t);
    let mut requests: Vec<Request> = Vec::new();
    for (tag, index) in sorted {
        let mergeable = requests.last().is_some_and(|current| {
            current.device == tag.device
                && current.unit == tag.unit
                && !boundaries.contains(&index)
                && u64::from(tag.start) <= current.end() + u64::from(limits.merge_gap)
                && tag.end().max(current.end()) - u64::from(current.start)
                    <= u64::from(limits.max_for(current.unit))
        });
        match requests.last_mut() {
            Some(current) if mergeable => {
                let end = tag.end().max(current.end());
                current.count = (end - u64::from(current.start)) as u32;
                current.tags.push(index);
            }
            _ => requests.push(Request {
                device: tag.device,
                unit: tag.unit,
                start: tag.start,
                count: tag.count,
                tags: alloc::vec![index],
            }),
        }
    }
    requests
}

/// Splits a failed request's tags in two halves by device number, returning the
/// halves as requests and the tag that must start a request from now on.
pub fn split(tags: &[TagRange], failed: &Request) -> Option<(Request, Request, u32)> {
    if failed.tags.len() < 2 {
        return None;
    }
    let (first, second) = failed.tags.split_at(failed.tags.len() / 2);
    let half = |part: &[u32]| {
        let ranges = part.iter().filter_map(|&t| tags.get(t as usize));
        let start = ranges.clone().map(|r| r.start).min().unwrap_or(0);
        let end = ranges.map(TagRange::end).max().unwrap_or(0);
        Request {
            device: failed.device,
            unit: failed.unit,
            start,
            count: end.saturating_sub(u64::from(start)) as u32,
            tags: part.to_vec(),
        }
    };
    Some((half(first), half(second), *second.first()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::DEVICES;

    fn device(name: &str) -> Device {
        *DEVICES.iter().find(|d| d.name == name).expect(name)
    }

    fn range(name: &str, start: u32, count: u32) -> TagRange {
        let device = device(name);
        TagRange {
            device,
            unit: if device.bits { Unit::Bit } else { Unit::Word },
            start,
            count,
        }
    }

    fn summary(requests: &[Request]) -> Vec<(&'static str, u32, u32, Vec<u32>)> {
        requests
            .iter()
            .map(|r| (r.device.name, r.start, r.count, r.tags.clone()))
            .collect()
    }

    #[test]
    fn nearby_points_of_one_device_merge() {
        let tags = [
            range("D", 100, 2),
            range("D", 102, 1),
            range("D", 119, 2),
            range("D", 200, 4),
            range("M", 0, 1),
            range("M", 16, 1),
            range("W", 0x10, 1),
            range("D", 101, 1),
        ];
        let due: Vec<u32> = (0..8).collect();
        let requests = plan(&tags, &due, LIMITS, &BTreeSet::new());
        assert_eq!(
            summary(&requests),
            [
                ("M", 0, 17, alloc::vec![4, 5]),
                ("D", 100, 21, alloc::vec![0, 7, 1, 2]),
                ("D", 200, 4, alloc::vec![3]),
                ("W", 0x10, 1, alloc::vec![6]),
            ]
        );
    }

    #[test]
    fn devices_and_units_never_mix() {
        let tags = [
            range("D", 0, 1),
            range("R", 0, 1),
            range("X", 0, 1),
            range("Y", 0, 1),
        ];
        let requests = plan(&tags, &[0, 1, 2, 3, 3, 99], LIMITS, &BTreeSet::new());
        assert_eq!(requests.len(), 4);
        assert!(requests.iter().all(|r| r.tags.len() == 1));
    }

    #[test]
    fn requests_split_at_the_limits() {
        let words: Vec<TagRange> = (0..1000).map(|i| range("D", i * 2, 2)).collect();
        let due: Vec<u32> = (0..1000).collect();
        let requests = plan(&words, &due, LIMITS, &BTreeSet::new());
        assert_eq!(
            requests
                .iter()
                .map(|r| (r.start, r.count))
                .collect::<Vec<_>>(),
            [(0, 960), (960, 960), (1920, 80)]
        );
        let bits: Vec<TagRange> = (0..8000).map(|i| range("M", i, 1)).collect();
        let due: Vec<u32> = (0..8000).collect();
        let requests = plan(&bits, &due, LIMITS, &BTreeSet::new());
        assert_eq!(
            requests
                .iter()
                .map(|r| (r.start, r.count))
                .collect::<Vec<_>>(),
            [(0, 3584), (3584, 3584), (7168, 832)]
        );
    }

    #[test]
    fn gaps_above_16_points_split() {
        let tags = [range("D", 0, 1), range("D", 17, 1), range("D", 35, 1)];
        let requests = plan(&tags, &[0, 1, 2], LIMITS, &BTreeSet::new());
        assert_eq!(summary(&requests)[0], ("D", 0, 18, alloc::vec![0, 1]));
        assert_eq!(summary(&requests)[1], ("D", 35, 1, alloc::vec![2]));
    }

    #[test]
    fn a_split_is_remembered_as_a_boundary() {
        let tags = [
            range("D", 0, 1),
            range("D", 1, 2),
            range("D", 5, 1),
            range("D", 6, 1),
        ];
        let all = plan(&tags, &[0, 1, 2, 3], LIMITS, &BTreeSet::new());
        let (a, b, boundary) = split(&tags, &all[0]).expect("splits");
        assert_eq!((a.start, a.count, b.start, b.count), (0, 3, 5, 2));
        assert_eq!(boundary, 2);
        let again = plan(&tags, &[0, 1, 2, 3], LIMITS, &BTreeSet::from([boundary]));
        assert_eq!(again, alloc::vec![a, b]);
        assert!(split(&tags, &plan(&tags, &[0], LIMITS, &BTreeSet::new())[0]).is_none());
    }
}
