//! Request ids, the plan cache and the split points learnt from device errors.
//!
//! A request's id is its index among the requests planned so far. A plan is
//! kept per due set and handed out again until the split points change, so a
//! steady polling round costs one lookup. A merged request that fails with an
//! error the protocol blames on the addresses is split: its halves become retry
//! requests, and the first tag of the second half starts a request in every
//! later plan, so only the tags at fault end BAD.
//!
//! The cached plans are dropped only when a split point is new. (Modbus and MC
//! used to drop them on every split, S7 only on a new split point; the plans
//! made again are the same requests under new ids, so the S7 rule is kept: it
//! spares the ids and the work.)

use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::merge::{Request, boundary, halves};

/// Requests kept before old ones are dropped at the start of a plan.
pub const MAX_REQUESTS: usize = 1024;

/// A planned request as the engine sees it (the WIT `planned-read`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub id: u32,
    pub tags: Vec<u32>,
}

/// The requests planned so far, the plans by due set and the split points.
#[derive(Debug)]
pub struct Plans<R> {
    requests: Vec<R>,
    cache: Vec<(Vec<u32>, Vec<Planned>)>,
    boundaries: BTreeSet<u32>,
}

impl<R> Default for Plans<R> {
    fn default() -> Self {
        Plans {
            requests: Vec::new(),
            cache: Vec::new(),
            boundaries: BTreeSet::new(),
        }
    }
}

impl<R: Request> Plans<R> {
    /// The plan for `due`: the cached one, or the requests `make` plans for
    /// `due` and the split points, registered under fresh ids.
    pub fn plan(
        &mut self,
        due: Vec<u32>,
        make: impl FnOnce(&[u32], &BTreeSet<u32>) -> Vec<R>,
    ) -> Vec<Planned> {
        if let Some((_, reads)) = self.cache.iter().find(|(d, _)| *d == due) {
            return reads.clone();
        }
        if self.requests.len() > MAX_REQUESTS {
            // Safe: a plan call starts a round, so no earlier request id is in flight.
            self.requests.clear();
            self.cache.clear();
        }
        let requests = make(&due, &self.boundaries);
        let reads: Vec<Planned> = requests.into_iter().map(|r| self.register(r)).collect();
        self.cache.push((due, reads.clone()));
        reads
    }

    /// The request planned under `id`.
    ///
    /// # Errors
    /// No request has that id.
    pub fn request(&self, id: u32) -> Result<&R, String> {
        self.requests
            .get(id as usize)
            .ok_or_else(|| format!("unknown request {id}"))
    }

    /// Drops the cached plans: what they were made for changed.
    pub fn forget_plans(&mut self) {
        self.cache.clear();
    }

    /// Learns the split point of a failed request of `tags` for later plans;
    /// whether it is new.
    pub fn split_later(&mut self, tags: &[u32]) -> bool {
        let new = boundary(tags).is_some_and(|tag| self.boundaries.insert(tag));
        if new {
            self.cache.clear();
        }
        new
    }

    /// Splits `failed` in two (see [`halves`]): the halves, registered as
    /// retries, and the split point learnt. Empty for a single tag.
    pub fn split(&mut self, failed: &R, single: impl Fn(u32) -> Option<R>) -> Vec<Planned> {
        let Some((first, second)) = halves(failed, single) else {
            return Vec::new();
        };
        self.split_later(failed.tags());
        alloc::vec![self.register(first), self.register(second)]
    }

    fn register(&mut self, request: R) -> Planned {
        let id = self.requests.len() as u32;
        let tags = request.tags().to_vec();
        self.requests.push(request);
        Planned { id, tags }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::merge::tests::{Line, line};
    use crate::session::merge::{merge, singles};
    use alloc::vec;

    fn make(due: &[u32], boundaries: &BTreeSet<u32>) -> Vec<Line> {
        merge(singles(due, line, |r| r.start), 100, boundaries)
    }

    #[test]
    fn plans_are_cached_by_due_set() {
        let mut plans = Plans::default();
        let first = plans.plan(vec![0, 1, 2], make);
        assert_eq!(
            first,
            [Planned {
                id: 0,
                tags: vec![0, 1, 2]
            }]
        );
        assert_eq!(plans.plan(vec![0, 1, 2], make), first);
        let other = plans.plan(vec![2, 1], make);
        assert_eq!(
            other,
            [Planned {
                id: 1,
                tags: vec![1, 2]
            }]
        );
        assert_eq!(plans.request(1).map(|r| r.start), Ok(10));
        assert_eq!(plans.request(2), Err("unknown request 2".into()));
        plans.forget_plans();
        assert_eq!(plans.plan(vec![0, 1, 2], make)[0].id, 2);
    }

    #[test]
    fn a_split_gives_retries_and_is_kept_for_later_plans() {
        let mut plans = Plans::default();
        let all = plans.plan(vec![0, 1, 2, 3], make);
        let failed = plans.request(all[0].id).cloned().expect("planned");
        let retry = plans.split(&failed, line);
        assert_eq!(
            retry,
            [
                Planned {
                    id: 1,
                    tags: vec![0, 1]
                },
                Planned {
                    id: 2,
                    tags: vec![2, 3]
                }
            ]
        );
        let again = plans.plan(vec![0, 1, 2, 3], make);
        assert_eq!(again.iter().map(|p| p.id).collect::<Vec<_>>(), [3, 4]);
        assert!(!plans.split_later(&failed.tags), "known already");
        assert_eq!(plans.plan(vec![0, 1, 2, 3], make), again, "still cached");
        let retried = plans.request(retry[0].id).cloned().expect("a retry");
        assert_eq!(plans.split(&retried, line).len(), 2);
        assert_eq!(
            plans.plan(vec![0, 1, 2, 3], make).len(),
            3,
            "a new split point"
        );
        assert!(plans.split(&line(7).expect("known"), line).is_empty());
    }

    #[test]
    fn old_requests_are_dropped_when_too_many() {
        let mut plans = Plans::default();
        for tag in 0..=MAX_REQUESTS as u32 {
            plans.plan(vec![tag], |due, _| {
                vec![Line {
                    start: due[0],
                    end: due[0] + 1,
                    tags: due.to_vec(),
                }]
            });
        }
        assert!(plans.request(MAX_REQUESTS as u32).is_ok());
        let fresh = plans.plan(vec![0, 1], make);
        assert_eq!(fresh[0].id, 0);
    }
}
