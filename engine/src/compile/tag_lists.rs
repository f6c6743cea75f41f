//! Devices with the same tags share one tag list. A fleet is mostly many devices
//! of a few models, each listing the same keys, addresses, types and scales; the
//! running engine keeps a device's list for as long as the device runs (its
//! sessions, pipeline, rules and reports read it), so without sharing a
//! 1,000-device fleet of one model would keep a thousand copies of one list.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::model::TagSpec;

/// The tag lists of one build, by content.
#[derive(Debug, Default)]
pub(super) struct TagLists {
    /// Distinct lists, bucketed by a hash of their keys and addresses.
    lists: HashMap<u64, Vec<Arc<[TagSpec]>>>,
}

impl TagLists {
    /// The list equal to `tags` made earlier in this build, else `tags` as a new one.
    pub(super) fn share(&mut self, tags: Vec<TagSpec>) -> Arc<[TagSpec]> {
        let bucket = self.lists.entry(fingerprint(&tags)).or_default();
        if let Some(same) = bucket.iter().find(|list| list[..] == tags[..]) {
            return Arc::clone(same);
        }
        let list: Arc<[TagSpec]> = tags.into();
        bucket.push(Arc::clone(&list));
        list
    }
}

/// What tells most lists apart; lists that share it are compared in full.
fn fingerprint(tags: &[TagSpec]) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    tags.len().hash(&mut hasher);
    for tag in tags {
        tag.key.hash(&mut hasher);
        tag.address.hash(&mut hasher);
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::DataType;

    fn list(scale: f64) -> Vec<TagSpec> {
        ["flow", "level"]
            .into_iter()
            .map(|key| TagSpec {
                factor: scale,
                ..TagSpec::plain(key, DataType::Uint16)
            })
            .collect()
    }

    #[test]
    fn equal_lists_are_one_and_any_difference_makes_another() {
        let mut lists = TagLists::default();
        let first = lists.share(list(1.0));
        let again = lists.share(list(1.0));
        assert!(Arc::ptr_eq(&first, &again));
        // Same keys and addresses (so the same bucket), another factor.
        let scaled = lists.share(list(0.1));
        assert!(!Arc::ptr_eq(&first, &scaled));
        assert_eq!(scaled[0].factor, 0.1);
        let fewer = lists.share(list(1.0)[..1].to_vec());
        assert_eq!(fewer.len(), 1);
        assert!(Arc::ptr_eq(&lists.share(list(0.1)), &scaled));
    }
}
