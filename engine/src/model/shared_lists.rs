//! Equal lists kept once. A fleet is mostly many devices of a few models, each
//! listing the same keys, addresses, types and scales; a running engine keeps a
//! device's tags for as long as it runs (the configuration for reloads and the
//! API, the compiled list for its sessions, pipeline, rules and reports), so
//! without sharing a 1,000-device fleet of one model would keep a thousand
//! copies of one list.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hasher};
use std::sync::Arc;

/// What tells most items apart cheaply (a tag's key and address); lists whose
/// items agree on it are compared in full.
pub trait ListKey: PartialEq {
    fn key(&self, hasher: &mut impl Hasher);
}

/// The lists of one build or one configuration, by content.
#[derive(Debug)]
pub struct SharedLists<T> {
    /// Distinct lists, bucketed by a hash of their items' keys.
    lists: HashMap<u64, Vec<Arc<[T]>>>,
}

impl<T> Default for SharedLists<T> {
    fn default() -> Self {
        Self {
            lists: HashMap::new(),
        }
    }
}

impl<T: ListKey> SharedLists<T> {
    /// The list equal to `items` made earlier, else `items` as a new one.
    pub fn share(&mut self, items: Vec<T>) -> Arc<[T]> {
        let mut hasher = DefaultHasher::new();
        hasher.write_usize(items.len());
        for item in &items {
            item.key(&mut hasher);
        }
        let bucket = self.lists.entry(hasher.finish()).or_default();
        if let Some(same) = bucket.iter().find(|list| list[..] == items[..]) {
            return Arc::clone(same);
        }
        let list: Arc<[T]> = items.into();
        bucket.push(Arc::clone(&list));
        list
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DataType, TagSpec};

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
        let mut lists = SharedLists::default();
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
