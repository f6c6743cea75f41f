//! Merging the reads of single tags into requests, and halving a request that
//! failed so the engine can retry smaller ones.

use alloc::collections::BTreeSet;
use alloc::vec::Vec;

/// A codec's read request, as the kit plans, caches and splits it.
pub trait Request: Sized {
    /// What bounds a merged request: the protocol's gap and size limits.
    type Limits: Copy;

    /// The tags the request reads, in the order their samples come.
    fn tags(&self) -> &[u32];

    /// Whether `next`, a request sorted after this one, may join it under `limits`.
    fn can_merge(&self, next: &Self, limits: Self::Limits) -> bool;

    /// Makes this request cover `other` as well; the tags of `other` follow.
    fn merge(&mut self, other: Self);
}

/// One request per due tag made by `single` (tags it does not know are left out,
/// a tag due twice is read once), sorted by `key` and then by tag.
pub fn singles<R, K: Ord>(
    due: &[u32],
    single: impl Fn(u32) -> Option<R>,
    key: impl Fn(&R) -> K,
) -> Vec<R> {
    let mut sorted: Vec<(u32, R)> = due
        .iter()
        .filter_map(|&tag| single(tag).map(|request| (tag, request)))
        .collect();
    sorted.sort_by(|(a, x), (b, y)| key(x).cmp(&key(y)).then(a.cmp(b)));
    sorted.dedup_by_key(|(tag, _)| *tag);
    sorted.into_iter().map(|(_, request)| request).collect()
}

/// Merges sorted `requests` greedily: each joins the one before it while
/// [`Request::can_merge`] allows and its first tag is not in `boundaries` (a
/// split point learnt from a device error).
pub fn merge<R: Request>(
    requests: impl IntoIterator<Item = R>,
    limits: R::Limits,
    boundaries: &BTreeSet<u32>,
) -> Vec<R> {
    let mut merged: Vec<R> = Vec::new();
    for next in requests {
        let boundary = next.tags().first().is_some_and(|t| boundaries.contains(t));
        match merged.last_mut() {
            Some(last) if !boundary && last.can_merge(&next, limits) => last.merge(next),
            _ => merged.push(next),
        }
    }
    merged
}

/// The tag that starts a request from now on after a request of `tags` failed:
/// the first of its second half. None for fewer than two tags.
pub fn boundary(tags: &[u32]) -> Option<u32> {
    (tags.len() >= 2).then(|| tags[tags.len() / 2])
}

/// `failed` cut in two between its tags (the second half starts at
/// [`boundary`]), each half the union of its tags' `single` requests whatever
/// the gaps between them. None for fewer than two tags.
pub fn halves<R: Request>(failed: &R, single: impl Fn(u32) -> Option<R>) -> Option<(R, R)> {
    let tags = failed.tags();
    if tags.len() < 2 {
        return None;
    }
    let (first, second) = tags.split_at(tags.len() / 2);
    let half = |part: &[u32]| {
        part.iter()
            .filter_map(|&t| single(t))
            .reduce(|mut union, next| {
                union.merge(next);
                union
            })
    };
    Some((half(first)?, half(second)?))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use alloc::vec;

    /// Tags on a line: tag `t` covers `t * 10 .. t * 10 + 5`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct Line {
        pub(crate) start: u32,
        pub(crate) end: u32,
        pub(crate) tags: Vec<u32>,
    }

    impl Request for Line {
        /// Longest request.
        type Limits = u32;

        fn tags(&self) -> &[u32] {
            &self.tags
        }

        fn can_merge(&self, next: &Self, limit: u32) -> bool {
            next.end.max(self.end) - self.start <= limit
        }

        fn merge(&mut self, other: Self) {
            self.start = self.start.min(other.start);
            self.end = self.end.max(other.end);
            self.tags.extend(other.tags);
        }
    }

    pub(crate) fn line(tag: u32) -> Option<Line> {
        (tag < 10).then(|| Line {
            start: tag * 10,
            end: tag * 10 + 5,
            tags: vec![tag],
        })
    }

    fn spans(requests: &[Line]) -> Vec<(u32, u32, Vec<u32>)> {
        requests
            .iter()
            .map(|r| (r.start, r.end, r.tags.clone()))
            .collect()
    }

    #[test]
    fn singles_are_sorted_known_and_unique() {
        let due = [3, 1, 99, 3, 0];
        let by_tag = singles(&due, line, |r| r.start);
        assert_eq!(
            by_tag.iter().map(|r| r.tags[0]).collect::<Vec<_>>(),
            [0, 1, 3]
        );
        let reversed = singles(&due, line, |r| u32::MAX - r.start);
        assert_eq!(reversed[0].tags, [3]);
    }

    #[test]
    fn merging_stops_at_the_limit_and_at_boundaries() {
        let all = || singles(&[0, 1, 2, 3, 4], line, |r| r.start);
        assert_eq!(
            spans(&merge(all(), 25, &BTreeSet::new())),
            [(0, 25, vec![0, 1, 2]), (30, 45, vec![3, 4])]
        );
        assert_eq!(
            spans(&merge(all(), 25, &BTreeSet::from([1]))),
            [(0, 5, vec![0]), (10, 35, vec![1, 2, 3]), (40, 45, vec![4])]
        );
    }

    #[test]
    fn halves_cover_their_tags_whatever_the_gaps() {
        let failed = merge(
            singles(&[0, 1, 2, 7], line, |r| r.start),
            100,
            &BTreeSet::new(),
        );
        let (first, second) = halves(&failed[0], line).expect("four tags");
        assert_eq!(
            spans(&[first, second]),
            [(0, 15, vec![0, 1]), (20, 75, vec![2, 7])]
        );
        assert_eq!(boundary(&failed[0].tags), Some(2));
        let lone = line(4).expect("known");
        assert!(halves(&lone, line).is_none());
        assert_eq!(boundary(&lone.tags), None);
    }
}
