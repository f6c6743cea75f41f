//! Read planning: which requests read a set of due tags.
//!
//! Tags of one table are sorted by address and merged into one request while the
//! gap between them is at most `merge_gap` addresses and the request stays within
//! the protocol limit. A tag listed in `boundaries` always starts a new request:
//! that is how a split made after a device exception is remembered.

use alloc::collections::BTreeSet;
use alloc::vec::Vec;

use crate::address::{Address, Table};

/// What the planner needs of a tag.
#[derive(Debug, Clone, Copy)]
pub struct TagRange {
    pub address: Address,
    /// Registers (or bits) the tag occupies.
    pub count: u16,
}

impl TagRange {
    fn end(&self) -> u32 {
        u32::from(self.address.offset) + u32::from(self.count)
    }
}

/// One read request: a contiguous range of one table and the tags inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub table: Table,
    pub start: u16,
    pub count: u16,
    pub tags: Vec<u32>,
}

/// Limits of one request.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub merge_gap: u16,
    pub max_registers: u16,
    pub max_bits: u16,
}

impl Limits {
    fn max_for(&self, table: Table) -> u32 {
        u32::from(if table.is_bits() {
            self.max_bits
        } else {
            self.max_registers
        })
    }
}

/// Requests covering `due` (indexes into `tags`).
pub fn plan(
    tags: &[TagRange],
    due: &[u32],
    limits: Limits,
    boundaries: &BTreeSet<u32>,
) -> Vec<Request> {
    let mut sorted: Vec<u32> = due
        .iter()
        .copied()
        .filter(|&t| (t as usize) < tags.len())
        .collect();
    sorted.sort_by_key(|&t| {
        let a = tags[t as usize].address;
        (a.table, a.offset, t)
    });
    sorted.dedup();
    let mut requests: Vec<Request> = Vec::new();
    for index in sorted {
        let tag = tags[index as usize];
        let mergeable = requests.last().is_some_and(|current| {
            let current_end = u32::from(current.start) + u32::from(current.count);
            current.table == tag.address.table
                && !boundaries.contains(&index)
                && u32::from(tag.address.offset) <= current_end + u32::from(limits.merge_gap)
                && tag.end().max(current_end) - u32::from(current.start)
                    <= limits.max_for(current.table)
        });
        match requests.last_mut() {
            Some(current) if mergeable => {
                let end = tag
                    .end()
                    .max(u32::from(current.start) + u32::from(current.count));
                current.count = (end - u32::from(current.start)) as u16;
                current.tags.push(index);
            }
            _ => requests.push(Request {
                table: tag.address.table,
                start: tag.address.offset,
                count: tag.count,
                tags: alloc::vec![index],
            }),
        }
    }
    requests
}

/// Splits a failed request's tags in two halves by address, returning the halves
/// as requests and the tag that must start a request from now on.
pub fn split(tags: &[TagRange], failed: &Request) -> Option<(Request, Request, u32)> {
    if failed.tags.len() < 2 {
        return None;
    }
    let (first, second) = failed.tags.split_at(failed.tags.len() / 2);
    let half = |part: &[u32]| {
        let start = part
            .iter()
            .map(|&t| tags[t as usize].address.offset)
            .min()
            .unwrap_or(0);
        let end = part
            .iter()
            .map(|&t| tags[t as usize].end())
            .max()
            .unwrap_or(0);
        Request {
            table: failed.table,
            start,
            count: (end - u32::from(start)) as u16,
            tags: part.to_vec(),
        }
    };
    Some((half(first), half(second), second[0]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hr(offset: u16, count: u16) -> TagRange {
        TagRange {
            address: Address {
                table: Table::HoldingRegisters,
                offset,
                bit: None,
            },
            count,
        }
    }

    const LIMITS: Limits = Limits {
        merge_gap: 16,
        max_registers: 120,
        max_bits: 2000,
    };

    #[test]
    fn nearby_tags_merge_and_far_ones_do_not() {
        let tags = [hr(0, 2), hr(2, 1), hr(19, 2), hr(100, 4)];
        let requests = plan(&tags, &[0, 1, 2, 3], LIMITS, &BTreeSet::new());
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
        let tags: Vec<TagRange> = (0..100).map(|i| hr(i * 2, 2)).collect();
        let due: Vec<u32> = (0..100).collect();
        let requests = plan(&tags, &due, LIMITS, &BTreeSet::new());
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0].count, 120);
        assert_eq!(requests[1].start, 120);
        assert!(requests.iter().all(|r| r.count <= 120));
    }

    #[test]
    fn a_split_is_remembered_as_a_boundary() {
        let tags = [hr(0, 1), hr(1, 1), hr(2, 1), hr(3, 1)];
        let all = plan(&tags, &[0, 1, 2, 3], LIMITS, &BTreeSet::new());
        let (a, b, boundary) = split(&tags, &all[0]).expect("splits");
        assert_eq!((a.start, a.count, b.start, b.count), (0, 2, 2, 2));
        let boundaries = BTreeSet::from([boundary]);
        let again = plan(&tags, &[0, 1, 2, 3], LIMITS, &boundaries);
        assert_eq!(again, alloc::vec![a, b]);
    }
}
