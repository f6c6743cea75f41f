//! Read planning: the devices are the areas of the session kit's range planner
//! ([`sluice_guest::session::ranges`]). Word devices are read in words, bit
//! devices in bits; tags of one device are sorted by device number and merged
//! into one request while the gap between them is at most 16 points and the
//! request stays within the limit of its unit. A split made after an end code
//! is kept for later plans.

use sluice_guest::session::ranges::{Area, RangeLimits};

use crate::address::Device;
use crate::frame::{FrameType, MAX_POINTS_1E};

/// The limits of the 3E and 4E frames: a gap of 16 points, 960 words per word
/// read (the 3E limit) and 3584 points per bit read (half the 3E limit of 7168,
/// which older modules and some CPUs do not reach).
pub const LIMITS: RangeLimits = RangeLimits {
    merge_gap: 16,
    max_words: 960,
    max_bits: 3584,
};

/// The limits of the 1E frame: 256 points a request, in words or bits.
pub const LIMITS_1E: RangeLimits = RangeLimits {
    merge_gap: 16,
    max_words: MAX_POINTS_1E,
    max_bits: MAX_POINTS_1E,
};

/// The limits of requests in `frame`.
pub fn limits(frame: FrameType) -> RangeLimits {
    match frame {
        FrameType::E1 => LIMITS_1E,
        FrameType::E3 | FrameType::E4 => LIMITS,
    }
}

impl Area for Device {
    fn is_bits(self) -> bool {
        self.bits
    }

    /// By device code.
    fn rank(self) -> u32 {
        u32::from(self.code)
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;
    use sluice_guest::session::merge::halves;
    use sluice_guest::session::ranges::{self, Extent, RangeRequest};

    use super::*;
    use crate::address::DEVICES;

    fn range(name: &str, start: u32, count: u32) -> Extent<Device> {
        let area = *DEVICES.iter().find(|d| d.name == name).expect(name);
        Extent { area, start, count }
    }

    fn plan(tags: &[Extent<Device>], due: &[u32], split: &[u32]) -> Vec<RangeRequest<Device>> {
        ranges::plan(tags, due, LIMITS, &split.iter().copied().collect())
    }

    fn summary(requests: &[RangeRequest<Device>]) -> Vec<(&'static str, u32, u32, Vec<u32>)> {
        requests
            .iter()
            .map(|r| (r.area.name, r.start, r.count, r.tags.clone()))
            .collect()
    }

    fn starts_and_counts(requests: &[RangeRequest<Device>]) -> Vec<(u32, u32)> {
        requests.iter().map(|r| (r.start, r.count)).collect()
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
        let requests = plan(&tags, &due, &[]);
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
        let tags = ["D", "R", "X", "Y"].map(|name| range(name, 0, 1));
        let requests = plan(&tags, &[0, 1, 2, 3, 3, 99], &[]);
        assert_eq!(requests.len(), 4);
        assert!(requests.iter().all(|r| r.tags.len() == 1));
    }

    #[test]
    fn requests_split_at_the_limits() {
        let words: Vec<Extent<Device>> = (0..1000).map(|i| range("D", i * 2, 2)).collect();
        let due: Vec<u32> = (0..1000).collect();
        assert_eq!(
            starts_and_counts(&plan(&words, &due, &[])),
            [(0, 960), (960, 960), (1920, 80)]
        );
        let bits: Vec<Extent<Device>> = (0..8000).map(|i| range("M", i, 1)).collect();
        let due: Vec<u32> = (0..8000).collect();
        assert_eq!(
            starts_and_counts(&plan(&bits, &due, &[])),
            [(0, 3584), (3584, 3584), (7168, 832)]
        );
    }

    #[test]
    fn gaps_above_16_points_split() {
        let tags = [range("D", 0, 1), range("D", 17, 1), range("D", 35, 1)];
        let requests = plan(&tags, &[0, 1, 2], &[]);
        assert_eq!(summary(&requests)[0], ("D", 0, 18, alloc::vec![0, 1]));
        assert_eq!(summary(&requests)[1], ("D", 35, 1, alloc::vec![2]));
    }

    #[test]
    fn a_split_is_remembered_as_a_boundary() {
        let tags = [(0, 1), (1, 2), (5, 1), (6, 1)].map(|(start, count)| range("D", start, count));
        let single = ranges::single(&tags);
        let all = plan(&tags, &[0, 1, 2, 3], &[]);
        let (a, b) = halves(&all[0], &single).expect("splits");
        assert_eq!(starts_and_counts(&[a.clone(), b.clone()]), [(0, 3), (5, 2)]);
        assert_eq!(b.tags[0], 2, "the split point");
        let again = plan(&tags, &[0, 1, 2, 3], &[2]);
        assert_eq!(again, alloc::vec![a, b]);
        assert!(halves(&plan(&tags, &[0], &[])[0], &single).is_none());
    }
}
