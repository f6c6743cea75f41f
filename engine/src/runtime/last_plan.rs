//! A codec session's last plan, kept to be handed out again for the same due
//! tags. It is kept for every device's channel, so its tag lists are held as
//! runs of consecutive indexes: a channel's tags, due together and read in one
//! request, are one run of 8 bytes instead of 4 bytes a tag, twice.

use crate::model::PlannedRead;

/// A list of tag indexes as runs `(first, count)` of consecutive ones, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Runs(Vec<(u32, u32)>);

impl Runs {
    fn of(tags: &[u32]) -> Runs {
        let mut runs: Vec<(u32, u32)> = Vec::new();
        for &tag in tags {
            match runs.last_mut() {
                Some((first, count)) if first.checked_add(*count) == Some(tag) => *count += 1,
                _ => runs.push((tag, 1)),
            }
        }
        runs.shrink_to_fit();
        Runs(runs)
    }

    /// Whether `tags` is the list these runs were made of.
    fn holds(&self, tags: &[u32]) -> bool {
        let mut rest = tags;
        for &(first, count) in &self.0 {
            let count = count as usize;
            if rest.len() < count {
                return false;
            }
            let (run, after) = rest.split_at(count);
            let consecutive = (0u32..)
                .zip(run)
                .all(|(i, tag)| tag.checked_sub(first) == Some(i));
            if !consecutive {
                return false;
            }
            rest = after;
        }
        rest.is_empty()
    }

    fn tags(&self) -> Vec<u32> {
        let len = self.0.iter().map(|(_, count)| *count as usize).sum();
        let mut tags = Vec::with_capacity(len);
        for &(first, count) in &self.0 {
            tags.extend((0..count).map(|i| first + i));
        }
        tags
    }
}

/// A plan, the due tags it was made for and the instance generation of the
/// resource that made it.
#[derive(Debug)]
pub(super) struct LastPlan {
    generation: u64,
    due: Runs,
    reads: Vec<(u32, Runs)>,
}

impl LastPlan {
    pub(super) fn new(generation: u64, due: &[u32], reads: &[PlannedRead]) -> LastPlan {
        LastPlan {
            generation,
            due: Runs::of(due),
            reads: reads.iter().map(|r| (r.id, Runs::of(&r.tags))).collect(),
        }
    }

    /// The plan again, if it was made for `due` by the resource of `generation`.
    pub(super) fn reads_for(
        &self,
        generation: Option<u64>,
        due: &[u32],
    ) -> Option<Vec<PlannedRead>> {
        (generation == Some(self.generation) && self.due.holds(due)).then(|| {
            self.reads
                .iter()
                .map(|(id, tags)| PlannedRead {
                    id: *id,
                    tags: tags.tags(),
                })
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_give_back_the_tags_they_were_made_of_and_no_other() {
        let lists: [&[u32]; 6] = [
            &[],
            &[0, 1, 2, 3],
            &[5],
            &[2, 0, 1],
            &[0, 1, 3, 4, 9, u32::MAX],
            &[7, 7, 8],
        ];
        for tags in lists {
            let runs = Runs::of(tags);
            assert_eq!(runs.tags(), tags);
            assert!(runs.holds(tags), "{tags:?}");
            for other in lists.iter().filter(|other| **other != tags) {
                assert!(!runs.holds(other), "{tags:?} holds {other:?}");
            }
        }
        assert_eq!(Runs::of(&[0, 1, 2, 3]).0, [(0, 4)]);
        assert!(!Runs::of(&[0, 1, 2]).holds(&[0, 1]));
        assert!(!Runs::of(&[0, 1]).holds(&[0, 1, 2]));
    }

    #[test]
    fn a_plan_is_given_back_for_its_due_tags_and_its_resource_only() {
        let reads = [
            PlannedRead {
                id: 3,
                tags: vec![0, 2, 1],
            },
            PlannedRead {
                id: 4,
                tags: vec![3],
            },
        ];
        let plan = LastPlan::new(7, &[0, 1, 2, 3], &reads);
        assert_eq!(
            plan.reads_for(Some(7), &[0, 1, 2, 3]).as_deref(),
            Some(&reads[..])
        );
        assert_eq!(plan.reads_for(Some(8), &[0, 1, 2, 3]), None);
        assert_eq!(plan.reads_for(None, &[0, 1, 2, 3]), None);
        assert_eq!(plan.reads_for(Some(7), &[0, 1, 2]), None);
    }
}
