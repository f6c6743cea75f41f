//! Read planning: which Read Var requests read a set of due tags.
//!
//! Tags of one area (and DB) are sorted by address and merged into one byte item
//! while the gap between them is at most [`MERGE_GAP`] bytes and the item's data
//! fits one answer. A lone bit is read with a BIT item. Items are packed into
//! requests in address order while the request and its answer both fit the
//! negotiated PDU and the request has at most [`MAX_ITEMS`] items. A tag too big
//! for one answer (a long STRING) is read in slices, one request per slice, and
//! joined again when the last slice arrives. A tag listed in `boundaries` always
//! starts a new item: that is how a split made after an item failed is remembered.
//! The merging and packing are the session kit's ([`sluice_guest::session::merge`]),
//! over items and over requests of items.

use alloc::collections::BTreeSet;
use alloc::vec::Vec;

use sluice_guest::session::merge::{self, singles};

use crate::address::Area;
use crate::pdu::{ACK_HEADER, ITEM_SPEC, ItemSpec, JOB_HEADER, TS_BIT, TS_BYTE};

/// Items per request: what common CPUs accept.
pub const MAX_ITEMS: usize = 20;
/// Bytes between two tags that are read rather than starting a new item (an item
/// costs 12 request and 4 answer bytes).
pub const MERGE_GAP: u32 = 16;
/// Function and item count before the items.
const PARAM_HEAD: usize = 2;
/// Return code, transport size and length before an item's data.
const ITEM_HEAD: usize = 4;

/// What the planner needs of a tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagRange {
    pub area: Area,
    pub db: u16,
    pub start: u32,
    /// Bytes the tag occupies (1 for a bit).
    pub len: u32,
    pub bit: Option<u8>,
}

/// What an item's data is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Whole tags inside the item.
    Tags(Vec<u32>),
    /// Bytes `offset..offset + item len` of a tag of `total` bytes.
    Slice { tag: u32, offset: u32, total: u32 },
}

/// One item of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub area: Area,
    pub db: u16,
    pub start: u32,
    pub len: u32,
    /// The bit of a BIT item; `None` for a byte range.
    pub bit: Option<u8>,
    pub part: Part,
}

impl Item {
    /// The item that reads `tag`, tag `index`, alone.
    fn of(tag: &TagRange, index: u32) -> Self {
        Item {
            area: tag.area,
            db: tag.db,
            start: tag.start,
            len: tag.len,
            bit: tag.bit,
            part: Part::Tags(alloc::vec![index]),
        }
    }

    fn end(&self) -> u32 {
        self.start + self.len
    }

    /// Data bytes of the item in the answer.
    pub fn data_len(&self) -> usize {
        if self.bit.is_some() {
            1
        } else {
            self.len as usize
        }
    }

    /// Bytes the item takes in the answer, padding included.
    fn answer_len(&self) -> usize {
        ITEM_HEAD + self.data_len().div_ceil(2) * 2
    }

    pub fn spec(&self) -> ItemSpec {
        ItemSpec {
            transport: if self.bit.is_some() { TS_BIT } else { TS_BYTE },
            count: if self.bit.is_some() {
                1
            } else {
                self.len as u16
            },
            db: self.db,
            area: self.area.code(),
            byte: self.start,
            bit: self.bit.unwrap_or(0),
        }
    }
}

/// Tags merge into one item of an area (and DB).
impl merge::Request for Item {
    /// The most data one item may carry.
    type Limits = u32;

    fn tags(&self) -> &[u32] {
        match &self.part {
            Part::Tags(list) => list,
            Part::Slice { tag, .. } => core::slice::from_ref(tag),
        }
    }

    fn can_merge(&self, next: &Item, max_item: u32) -> bool {
        self.area == next.area
            && self.db == next.db
            && next.start <= self.end() + MERGE_GAP
            && next.end().max(self.end()) - self.start <= max_item
    }

    /// A BIT item stays one while both read the same bit.
    fn merge(&mut self, other: Item) {
        let same_bit = self.bit.is_some() && self.bit == other.bit && self.start == other.start;
        if !same_bit {
            self.bit = None;
        }
        let start = self.start.min(other.start);
        self.len = self.end().max(other.end()) - start;
        self.start = start;
        if let (Part::Tags(list), Part::Tags(more)) = (&mut self.part, other.part) {
            list.extend(more);
        }
    }
}

/// One Read Var request and the tags it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub items: Vec<Item>,
    pub tags: Vec<u32>,
}

impl Request {
    fn of(item: Item) -> Self {
        Request {
            tags: merge::Request::tags(&item).to_vec(),
            items: alloc::vec![item],
        }
    }
}

/// Items are packed into one request.
impl merge::Request for Request {
    /// The negotiated PDU size.
    type Limits = u16;

    fn tags(&self) -> &[u32] {
        &self.tags
    }

    fn can_merge(&self, next: &Request, pdu: u16) -> bool {
        let n = self.items.len() + next.items.len();
        let more: usize = next.items.iter().map(Item::answer_len).sum();
        n <= MAX_ITEMS
            && request_len(n) <= usize::from(pdu)
            && answer_len(&self.items) + more <= usize::from(pdu)
    }

    fn merge(&mut self, other: Request) {
        self.items.extend(other.items);
        self.tags.extend(other.tags);
    }
}

/// Size of a Read Var request of `items` items.
pub fn request_len(items: usize) -> usize {
    JOB_HEADER + PARAM_HEAD + ITEM_SPEC * items
}

/// Size of the answer to `items`.
pub fn answer_len(items: &[Item]) -> usize {
    ACK_HEADER + PARAM_HEAD + items.iter().map(Item::answer_len).sum::<usize>()
}

/// The most data one item may carry so that its answer fits `pdu` bytes.
pub fn max_item_len(pdu: u16) -> u32 {
    let room = usize::from(pdu).saturating_sub(ACK_HEADER + PARAM_HEAD + ITEM_HEAD);
    (room as u32 & !1).max(2)
}

/// Whether a request of `items` and its answer fit `pdu`.
pub fn fits(items: &[Item], pdu: u16) -> bool {
    let pdu = usize::from(pdu);
    items.len() <= MAX_ITEMS && request_len(items.len()) <= pdu && answer_len(items) <= pdu
}

/// Requests covering `due` (indexes into `tags`) for a PDU of `pdu` bytes.
pub fn plan(tags: &[TagRange], due: &[u32], pdu: u16, boundaries: &BTreeSet<u32>) -> Vec<Request> {
    let max_item = max_item_len(pdu);
    let single = |t| tags.get(t as usize).map(|range| Item::of(range, t));
    let sorted = singles(due, single, |i| (i.area, i.db, i.start, i.bit));
    let (big, small): (Vec<Item>, Vec<Item>) = sorted.into_iter().partition(|i| i.len > max_item);
    let items = merge::merge(small, max_item, boundaries);
    let mut requests = merge::merge(items.into_iter().map(Request::of), pdu, &BTreeSet::new());
    requests.extend(big.iter().flat_map(|whole| slices(whole, max_item)));
    requests
}

/// One request per slice of an item bigger than `max_item` bytes, a whole tag.
fn slices(whole: &Item, max_item: u32) -> Vec<Request> {
    let tag = merge::Request::tags(whole)[0];
    let mut requests = Vec::new();
    let mut offset = 0;
    while offset < whole.len {
        let len = max_item.min(whole.len - offset);
        requests.push(Request::of(Item {
            area: whole.area,
            db: whole.db,
            start: whole.start + offset,
            len,
            bit: None,
            part: Part::Slice {
                tag,
                offset,
                total: whole.len,
            },
        }));
        offset += len;
    }
    requests
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(start: u32, len: u32) -> TagRange {
        TagRange {
            area: Area::DataBlock,
            db: 1,
            start,
            len,
            bit: None,
        }
    }

    fn bit(area: Area, start: u32, bit: u8) -> TagRange {
        TagRange {
            area,
            db: 0,
            start,
            len: 1,
            bit: Some(bit),
        }
    }

    fn all(n: usize) -> Vec<u32> {
        (0..n as u32).collect()
    }

    #[test]
    fn nearby_tags_merge_into_one_item() {
        // DB1.DBD0 (FLOAT32), DB1.DBX6.0, DB1.DBW20, and DB1.DBW100 far away.
        let mut flag = db(6, 1);
        flag.bit = Some(0);
        let tags = [db(0, 4), flag, db(20, 2), db(100, 2)];
        let requests = plan(&tags, &all(4), 240, &BTreeSet::new());
        assert_eq!(requests.len(), 1);
        let items = &requests[0].items;
        assert_eq!(items.len(), 2);
        assert_eq!((items[0].start, items[0].len, items[0].bit), (0, 22, None));
        assert_eq!(items[0].part, Part::Tags(alloc::vec![0, 1, 2]));
        assert_eq!((items[1].start, items[1].len), (100, 2));
        assert_eq!(requests[0].tags, [0, 1, 2, 3]);
    }

    #[test]
    fn lone_bits_use_bit_items_and_areas_stay_apart() {
        let tags = [
            bit(Area::Flags, 10, 1),
            bit(Area::Flags, 10, 1),
            bit(Area::Inputs, 10, 1),
            bit(Area::Flags, 11, 2),
        ];
        let requests = plan(&tags, &[0, 1, 2], 240, &BTreeSet::new());
        let items = &requests[0].items;
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].area, Area::Inputs);
        assert_eq!(items[1].bit, Some(1), "two tags on the same bit");
        assert_eq!(items[1].spec().transport, TS_BIT);
        let requests = plan(&tags, &[0, 3], 240, &BTreeSet::new());
        let item = &requests[0].items[0];
        assert_eq!((item.start, item.len, item.bit), (10, 2, None));
        assert_eq!(item.spec().transport, TS_BYTE);
    }

    #[test]
    fn packing_respects_the_request_size_and_the_item_limit() {
        // 30 words 100 bytes apart: no merging, 30 items.
        let tags: Vec<TagRange> = (0..30).map(|i| db(i * 100, 2)).collect();
        let at_240 = plan(&tags, &all(30), 240, &BTreeSet::new());
        // 12 + 12 * n <= 240 allows 19 items.
        assert_eq!(
            at_240.iter().map(|r| r.items.len()).collect::<Vec<_>>(),
            [19, 11]
        );
        let at_960 = plan(&tags, &all(30), 960, &BTreeSet::new());
        assert_eq!(
            at_960.iter().map(|r| r.items.len()).collect::<Vec<_>>(),
            [20, 10]
        );
        for (requests, pdu) in [(at_240, 240), (at_960, 960)] {
            assert!(requests.iter().all(|r| fits(&r.items, pdu)));
            assert_eq!(requests.iter().map(|r| r.tags.len()).sum::<usize>(), 30);
        }
    }

    #[test]
    fn packing_respects_the_answer_size() {
        // STRING[100] tags 200 bytes apart: 104 answer bytes each.
        let tags: Vec<TagRange> = (0..10).map(|i| db(i * 200, 100)).collect();
        let at_240 = plan(&tags, &all(10), 240, &BTreeSet::new());
        assert!(at_240.iter().all(|r| r.items.len() == 2));
        let at_960 = plan(&tags, &all(10), 960, &BTreeSet::new());
        assert_eq!(
            at_960.iter().map(|r| r.items.len()).collect::<Vec<_>>(),
            [9, 1]
        );
        assert_eq!(answer_len(&at_960[0].items), 14 + 9 * 104);
    }

    #[test]
    fn merging_stops_at_the_item_size() {
        // Words every 16 bytes: items of at most 222 bytes at PDU 240.
        let tags: Vec<TagRange> = (0..50).map(|i| db(i * 16, 2)).collect();
        let requests = plan(&tags, &all(50), 240, &BTreeSet::new());
        let items: Vec<&Item> = requests.iter().flat_map(|r| &r.items).collect();
        assert!(items.iter().all(|i| i.len <= 222));
        assert!(requests.iter().all(|r| fits(&r.items, 240)));
        assert_eq!(max_item_len(240), 222);
        assert_eq!(max_item_len(960), 942);
        assert_eq!(max_item_len(481), 462);
    }

    #[test]
    fn a_big_tag_is_read_in_slices() {
        let tags = [db(0, 2), db(10, 500)];
        let requests = plan(&tags, &[0, 1], 240, &BTreeSet::new());
        assert_eq!(requests.len(), 4);
        let slices: Vec<(u32, u32, &Part)> = requests[1..]
            .iter()
            .map(|r| (r.items[0].start, r.items[0].len, &r.items[0].part))
            .collect();
        assert_eq!(
            slices,
            [
                (
                    10,
                    222,
                    &Part::Slice {
                        tag: 1,
                        offset: 0,
                        total: 500
                    }
                ),
                (
                    232,
                    222,
                    &Part::Slice {
                        tag: 1,
                        offset: 222,
                        total: 500
                    }
                ),
                (
                    454,
                    56,
                    &Part::Slice {
                        tag: 1,
                        offset: 444,
                        total: 500
                    }
                ),
            ]
        );
        assert!(requests.iter().all(|r| fits(&r.items, 240)));
        let at_960 = plan(&tags, &[0, 1], 960, &BTreeSet::new());
        assert_eq!(at_960.len(), 1, "fits one item at PDU 960");
    }

    fn boundary(item: &Item) -> Option<u32> {
        merge::boundary(merge::Request::tags(item))
    }

    #[test]
    fn boundaries_split_items() {
        let tags = [db(0, 2), db(2, 2), db(4, 2), db(6, 2)];
        let requests = plan(&tags, &all(4), 240, &BTreeSet::new());
        let split = boundary(&requests[0].items[0]).expect("several tags");
        assert_eq!(split, 2);
        let again = plan(&tags, &all(4), 240, &BTreeSet::from([split]));
        let items = &again[0].items;
        assert_eq!(items.len(), 2);
        assert_eq!((items[0].start, items[0].len), (0, 4));
        assert_eq!((items[1].start, items[1].len), (4, 4));
        assert_eq!(
            boundary(&plan(&tags, &[0], 240, &BTreeSet::new())[0].items[0]),
            None
        );
    }
}
