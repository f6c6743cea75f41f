//! Requests for contiguous ranges of points of one area: the reads of Modbus
//! (an area is a table, points are registers or coils) and of MC (an area is a
//! device, points are words or bits).
//!
//! Tags are sorted by area rank and start, and a tag joins the request before it
//! while it is of the same area, starts at most `merge_gap` points past the
//! request's end, and the request stays within the limit of its kind of points.
//!
//! The Modbus and MC planners this replaces had drifted apart; this one keeps
//! the MC behaviour where they differed, as it is the more robust and plans the
//! same requests for every Modbus address: arithmetic in `u64` (a 4-byte MC
//! device number plus a count overflows `u32`), unknown tags skipped rather than
//! indexed (a panic), and the kind of points taken from the area rather than
//! compared on its own.

use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::exchange::InFlight;
use super::merge::{Request, merge, singles};
use super::plans::{Planned, Plans};
use crate::numeric::DataType;

/// A memory area of a device.
pub trait Area: Copy + Eq {
    /// Whether the area counts single bits (else words or registers).
    fn is_bits(self) -> bool;
    /// Where the area's requests stand in a plan: lower ranks first.
    fn rank(self) -> u32;
}

/// The points a tag occupies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent<A> {
    pub area: A,
    pub start: u32,
    /// Points, at least 1.
    pub count: u32,
}

/// Why a tag cannot be read at its address: a single bit reads only as a BOOL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotBool {
    /// The address is in an area of bits.
    BitArea,
    /// The address names one bit of a word.
    BitOfWord,
    /// An array tag at one bit of a word: its elements would run into the
    /// next words, which no protocol addresses so.
    ArrayInWord,
}

/// The points a tag of `data_type` takes: one for a bit, of an area of bits
/// (`in_bits`) or of a word (`bit_of_word`), else `words`; `array_len` times
/// that for an array tag.
///
/// # Errors
/// A bit whose tag is not a BOOL, or an array of bits of a word.
pub fn points(
    data_type: DataType,
    in_bits: bool,
    bit_of_word: bool,
    words: u64,
    array_len: Option<u32>,
) -> Result<u64, NotBool> {
    let elements = u64::from(array_len.unwrap_or(1));
    match (in_bits, bit_of_word) {
        (false, false) => Ok(words * elements),
        (false, true) if array_len.is_some() => Err(NotBool::ArrayInWord),
        _ if data_type == DataType::Bool => Ok(elements),
        (true, _) => Err(NotBool::BitArea),
        (false, true) => Err(NotBool::BitOfWord),
    }
}

/// Limits of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeLimits {
    /// Points between two tags that are read rather than starting a new request.
    pub merge_gap: u32,
    /// Points of a request of words or registers.
    pub max_words: u32,
    /// Points of a request of bits.
    pub max_bits: u32,
}

impl RangeLimits {
    /// Checks that a value of `count` points (`unit` in the message) of an
    /// area of bits (`bits`) or of words fits one request.
    ///
    /// # Errors
    /// The message for a value too large.
    pub fn fits(self, bits: bool, count: u64, unit: &str) -> Result<(), String> {
        let max = if bits { self.max_bits } else { self.max_words };
        if count > u64::from(max) {
            return Err(format!(
                "the value needs {count} {unit}, more than one request may read ({max})"
            ));
        }
        Ok(())
    }

    fn max_for(self, area: impl Area) -> u32 {
        if area.is_bits() {
            self.max_bits
        } else {
            self.max_words
        }
    }
}

/// One read: a contiguous range of one area and the tags inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeRequest<A> {
    pub area: A,
    pub start: u32,
    pub count: u32,
    pub tags: Vec<u32>,
}

impl<A> RangeRequest<A> {
    /// The request that reads `extent`, the points of tag `tag`.
    pub fn of(extent: Extent<A>, tag: u32) -> Self {
        RangeRequest {
            area: extent.area,
            start: extent.start,
            count: extent.count,
            tags: alloc::vec![tag],
        }
    }

    /// The point after the last.
    pub fn end(&self) -> u64 {
        u64::from(self.start) + u64::from(self.count)
    }
}

impl<A: Area> Request for RangeRequest<A> {
    type Limits = RangeLimits;

    fn tags(&self) -> &[u32] {
        &self.tags
    }

    fn can_merge(&self, next: &Self, limits: RangeLimits) -> bool {
        self.area == next.area
            && u64::from(next.start) <= self.end() + u64::from(limits.merge_gap)
            && next.end().max(self.end()) - u64::from(self.start)
                <= u64::from(limits.max_for(self.area))
    }

    fn merge(&mut self, other: Self) {
        let start = self.start.min(other.start);
        let end = self.end().max(other.end());
        self.start = start;
        self.count = (end - u64::from(start)) as u32;
        self.tags.extend(other.tags);
    }
}

/// Requests covering `due`, indexes into `extents`.
pub fn plan<A: Area>(
    extents: &[Extent<A>],
    due: &[u32],
    limits: RangeLimits,
    boundaries: &BTreeSet<u32>,
) -> Vec<RangeRequest<A>> {
    let sorted = singles(due, single(extents), |r| (r.area.rank(), r.start));
    merge(sorted, limits, boundaries)
}

/// The single-tag requests of `extents`: what [`plan`] merges, and what
/// [`Plans::split`] joins into halves.
pub fn single<A: Copy>(extents: &[Extent<A>]) -> impl Fn(u32) -> Option<RangeRequest<A>> + '_ {
    |tag| extents.get(tag as usize).map(|&e| RangeRequest::of(e, tag))
}

/// The read planning of a session whose requests are ranges: the [`Plans`] of
/// its tags' extents under its limits.
#[derive(Debug)]
pub struct RangePlans<A> {
    plans: Plans<RangeRequest<A>>,
    extents: Vec<Extent<A>>,
    limits: RangeLimits,
}

impl<A: Area> RangePlans<A> {
    /// Planning for tags of `extents` (indexed by tag).
    pub fn new(extents: Vec<Extent<A>>, limits: RangeLimits) -> Self {
        RangePlans {
            plans: Plans::default(),
            extents,
            limits,
        }
    }

    /// The plan for `due` (see [`Plans::plan`]).
    pub fn plan(&mut self, due: Vec<u32>) -> Vec<Planned> {
        let (extents, limits) = (&self.extents, self.limits);
        self.plans.plan(due, |due, boundaries| {
            plan(extents, due, limits, boundaries)
        })
    }

    /// The request planned under `id`.
    ///
    /// # Errors
    /// No request has that id.
    pub fn request(&self, id: u32) -> Result<&RangeRequest<A>, String> {
        self.plans.request(id)
    }

    /// The retries of `failed`, split in two (see [`Plans::split`]).
    pub fn split(&mut self, failed: &RangeRequest<A>) -> Vec<Planned> {
        self.plans.split(failed, single(&self.extents))
    }
}

/// What a session that reads ranges keeps between calls: its reads and its
/// exchanges in flight (`W` as in [`InFlight`]).
#[derive(Debug)]
pub struct RangeState<A, W = ()> {
    pub reads: RangePlans<A>,
    pub exchange: InFlight<W>,
}

impl<A: Area, W> RangeState<A, W> {
    /// The state of a new session whose tags have `extents`.
    pub fn new(extents: impl IntoIterator<Item = Extent<A>>, limits: RangeLimits) -> Self {
        RangeState {
            reads: RangePlans::new(extents.into_iter().collect(), limits),
            exchange: InFlight::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::merge::halves;
    use alloc::vec;

    /// Area 0 holds words, area 1 bits; area 2 words ranked first.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Zone(u8);

    impl Area for Zone {
        fn is_bits(self) -> bool {
            self.0 == 1
        }

        fn rank(self) -> u32 {
            u32::from(self.0).wrapping_sub(2)
        }
    }

    const LIMITS: RangeLimits = RangeLimits {
        merge_gap: 4,
        max_words: 10,
        max_bits: 100,
    };

    fn at(area: u8, start: u32, count: u32) -> Extent<Zone> {
        Extent {
            area: Zone(area),
            start,
            count,
        }
    }

    fn summary(tags: &[Extent<Zone>], due: &[u32]) -> Vec<(u8, u32, u32, Vec<u32>)> {
        plan(tags, due, LIMITS, &BTreeSet::new())
            .into_iter()
            .map(|r| (r.area.0, r.start, r.count, r.tags))
            .collect()
    }

    #[test]
    fn tags_merge_within_the_gap_and_the_limit_of_their_kind() {
        let tags = [
            at(0, 0, 2),
            at(0, 6, 1),
            at(0, 12, 1),
            at(1, 0, 1),
            at(1, 60, 1),
        ];
        assert_eq!(
            summary(&tags, &[4, 3, 2, 1, 0, 9]),
            [
                (0, 0, 7, vec![0, 1]),
                (0, 12, 1, vec![2]),
                (1, 0, 1, vec![3]),
                (1, 60, 1, vec![4]),
            ]
        );
        let words: Vec<Extent<Zone>> = (0..12).map(|i| at(0, i, 1)).collect();
        let bits: Vec<Extent<Zone>> = (0..12).map(|i| at(1, i, 1)).collect();
        let all: Vec<u32> = (0..12).collect();
        assert_eq!(summary(&words, &all).len(), 2, "10 words a request");
        assert_eq!(summary(&bits, &all).len(), 1, "100 bits a request");
    }

    #[test]
    fn areas_never_mix_and_sort_by_rank() {
        let tags = [at(0, 0, 1), at(2, 0, 1), at(1, 1, 1)];
        let areas: Vec<u8> = summary(&tags, &[0, 1, 2]).iter().map(|r| r.0).collect();
        assert_eq!(areas, [2, 0, 1]);
    }

    #[test]
    fn values_fit_one_request() {
        assert_eq!(LIMITS.fits(false, 10, "words"), Ok(()));
        assert_eq!(
            LIMITS.fits(false, 11, "words"),
            Err("the value needs 11 words, more than one request may read (10)".into())
        );
        assert_eq!(LIMITS.fits(true, 11, "bits"), Ok(()));
    }

    #[test]
    fn single_bits_are_bools() {
        let words = points(DataType::Float32, false, false, 2, None);
        assert_eq!(words, Ok(2));
        assert_eq!(points(DataType::Bool, true, false, 1, None), Ok(1));
        assert_eq!(points(DataType::Bool, false, true, 1, None), Ok(1));
        let area = points(DataType::Int16, true, false, 1, None);
        assert_eq!(area, Err(NotBool::BitArea));
        let word = points(DataType::Int16, false, true, 1, None);
        assert_eq!(word, Err(NotBool::BitOfWord));
        let array = points(DataType::Float32, false, false, 2, Some(3));
        assert_eq!(array, Ok(6), "three values of two words");
        assert_eq!(points(DataType::Bool, true, false, 1, Some(16)), Ok(16));
        let in_word = points(DataType::Bool, false, true, 1, Some(4));
        assert_eq!(in_word, Err(NotBool::ArrayInWord));
    }

    #[test]
    fn device_numbers_near_the_top_do_not_overflow() {
        let tags = [at(0, u32::MAX - 3, 4), at(0, u32::MAX - 1, 2)];
        assert_eq!(summary(&tags, &[0, 1]), [(0, u32::MAX - 3, 4, vec![0, 1])]);
    }

    #[test]
    fn halves_span_their_own_tags() {
        let tags = [at(0, 0, 8), at(0, 1, 1), at(0, 9, 1)];
        let failed = RangeRequest {
            area: Zone(0),
            start: 0,
            count: 10,
            tags: vec![0, 1, 2],
        };
        let (first, second) = halves(&failed, single(&tags)).expect("three tags");
        assert_eq!((first.start, first.count, first.tags), (0, 8, vec![0]));
        assert_eq!(
            (second.start, second.count, second.tags),
            (1, 9, vec![1, 2])
        );
    }
}
