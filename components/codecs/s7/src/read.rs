//! Samples from the items of a Read Var answer.
//!
//! Byte data goes into the batch's byte buffer as the PLC stores it (big-endian);
//! tags get raw spans into it, which the pipeline's byte-order and decode stages
//! turn into values (an array tag's span holds its elements one after the other).
//! Bit tags become booleans here, and a BOOL array the booleans of the bytes that
//! hold it. The slices of a tag read in
//! several requests are collected in `partial` and give one sample when the last
//! slice arrives.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use crate::pdu::{ItemData, SUCCESS};
use crate::plan::{Item, Part, Request};
use crate::sluice::dataflow::types::{Batch, Element, Span, Value};
use crate::{Tag, sample};

/// The value of `tag` inside `item`, whose `data` starts at `base` in the batch bytes.
fn value_of(tag: &Tag, item: &Item, data: &[u8], base: usize) -> Option<Value> {
    if item.bit.is_some() {
        return data.first().map(|b| Value::Boolean(b & 1 != 0));
    }
    let range = &tag.range;
    let at = range.start.checked_sub(item.start)? as usize;
    if let Some(bit) = range.bit {
        return data
            .get(at)
            .map(|b| Value::Boolean(b >> (bit & 7) & 1 == 1));
    }
    let len = range.len as usize;
    let bytes = data.get(at..at.checked_add(len)?)?;
    if let Some(bits) = bit_array(tag, bytes) {
        return Some(bits);
    }
    Some(Value::Raw(Span {
        start: (base + at) as u32,
        len: len as u32,
    }))
}

/// The elements of BOOL array `tag` from the bytes that hold them (S7 numbers
/// the bits of a byte from its lowest); `None` for a tag of another kind.
fn bit_array(tag: &Tag, bytes: &[u8]) -> Option<Value> {
    let (first, len) = (tag.first_bit?, tag.array_len?);
    let bits = (0..len as usize).map(|i| {
        let at = usize::from(first) + i;
        Element::Boolean(bytes.get(at / 8).is_some_and(|b| b >> (at % 8) & 1 == 1))
    });
    Some(Value::Array(bits.collect()))
}

/// Samples of `request` from its answer's `items` (one per planned item, lengths
/// already checked); items the PLC refused give BAD samples for their tags.
pub fn samples(
    tags: &[Tag],
    request: &Request,
    items: &[ItemData<'_>],
    partial: &mut BTreeMap<u32, Vec<u8>>,
    ts_ms: i64,
) -> Batch {
    let mut samples = Vec::with_capacity(request.tags.len());
    let mut bytes = Vec::new();
    for (item, got) in request.items.iter().zip(items) {
        let ok = got.code == SUCCESS;
        match &item.part {
            Part::Tags(list) => {
                let base = bytes.len();
                if ok && item.bit.is_none() {
                    bytes.extend_from_slice(got.data);
                }
                for &index in list {
                    let value = tags
                        .get(index as usize)
                        .filter(|_| ok)
                        .and_then(|tag| value_of(tag, item, got.data, base));
                    samples.push(sample(index, value, ts_ms));
                }
            }
            &Part::Slice { tag, offset, total } => {
                match partial.get_mut(&tag) {
                    _ if !ok => {
                        partial.remove(&tag);
                    }
                    _ if offset == 0 => {
                        partial.insert(tag, got.data.to_vec());
                    }
                    Some(buffer) if buffer.len() == offset as usize => {
                        buffer.extend_from_slice(got.data);
                    }
                    _ => {
                        partial.remove(&tag);
                    }
                }
                if offset.saturating_add(item.len) >= total {
                    let value = match partial.remove(&tag) {
                        Some(buffer) if buffer.len() == total as usize => {
                            if let Some(bits) =
                                tags.get(tag as usize).and_then(|t| bit_array(t, &buffer))
                            {
                                samples.push(sample(tag, Some(bits), ts_ms));
                                continue;
                            }
                            let start = bytes.len() as u32;
                            bytes.extend_from_slice(&buffer);
                            Some(Value::Raw(Span { start, len: total }))
                        }
                        _ => None,
                    };
                    samples.push(sample(tag, value, ts_ms));
                }
            }
        }
    }
    crate::batch_from_samples(samples, bytes)
}
