//! Read planning: the tables are the areas of the session kit's range planner
//! ([`sluice_guest::session::ranges`]). Tags of one table are sorted by address
//! and merged into one request while the gap between them is at most `mergeGap`
//! addresses and the request stays within `maxRegisters` or `maxBits`; a split
//! made after a device exception is kept for later plans.

use sluice_guest::session::ranges::Area;

use crate::address::Table;

impl Area for Table {
    fn is_bits(self) -> bool {
        Table::is_bits(self)
    }

    /// Coils, discrete inputs, input registers, holding registers.
    fn rank(self) -> u32 {
        self as u32
    }
}

#[cfg(test)]
mod tests {
    use alloc::collections::BTreeSet;
    use alloc::vec::Vec;
    use sluice_guest::session::merge::halves;
    use sluice_guest::session::ranges::{self, Extent, RangeLimits};

    use crate::address::Table;

    fn hr(start: u32, count: u32) -> Extent<Table> {
        Extent {
            area: Table::HoldingRegisters,
            start,
            count,
        }
    }

    const LIMITS: RangeLimits = RangeLimits {
        merge_gap: 16,
        max_words: 120,
        max_bits: 2000,
    };

    #[test]
    fn nearby_tags_merge_and_far_ones_do_not() {
        let tags = [hr(0, 2), hr(2, 1), hr(19, 2), hr(100, 4)];
        let requests = ranges::plan(&tags, &[0, 1, 2, 3], LIMITS, &BTreeSet::new());
        assert_eq!(requests.len(), 2);
        assert_eq!(
            (
                requests[0].start,
                requests[0].count,
                requests[0].tags.clone()
            ),
            (0, 21, alloc::vec![0, 1, 2])
        );
        assert_eq!((requests[1].start, requests[1].count), (100, 4));
    }

    #[test]
    fn requests_split_at_the_register_limit() {
        let tags: Vec<Extent<Table>> = (0..100).map(|i| hr(i * 2, 2)).collect();
        let due: Vec<u32> = (0..100).collect();
        let requests = ranges::plan(&tags, &due, LIMITS, &BTreeSet::new());
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0].count, 120);
        assert_eq!(requests[1].start, 120);
        assert!(requests.iter().all(|r| r.count <= 120));
    }

    #[test]
    fn a_split_is_remembered_as_a_boundary() {
        let tags = [hr(0, 1), hr(1, 1), hr(2, 1), hr(3, 1)];
        let all = ranges::plan(&tags, &[0, 1, 2, 3], LIMITS, &BTreeSet::new());
        let (a, b) = halves(&all[0], ranges::single(&tags)).expect("splits");
        assert_eq!((a.start, a.count, b.start, b.count), (0, 2, 2, 2));
        let again = ranges::plan(&tags, &[0, 1, 2, 3], LIMITS, &BTreeSet::from([b.tags[0]]));
        assert_eq!(again, alloc::vec![a, b]);
    }
}
