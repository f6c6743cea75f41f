//! Values in MC's word order: each word low byte first, multi-word values low
//! word first. Raw numeric samples are normalised to big-endian, high word first
//! (all bytes of the value reversed); strings keep the wire order. Writes do
//! the inverse.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use sluice_guest::numeric::{DataType, Number, encode, reorder_for};

use crate::sluice::dataflow::types::{Batch, Span, Value};
use crate::{Request, Tag, number_from_value, sample};

/// Samples for the tags of `request` from its response data.
pub fn samples(tags: &[Tag], request: &Request, data: &[u8], ts_ms: i64) -> Batch {
    let mut bytes = Vec::new();
    let mut samples = Vec::with_capacity(request.tags.len());
    for &index in &request.tags {
        let Some(tag) = tags.get(index as usize) else {
            continue;
        };
        let at = tag.extent.start.wrapping_sub(request.start) as usize;
        let value = match (request.area.bits, tag.bit) {
            (true, _) => data.get(at / 2).map(|byte| {
                let nibble = if at.is_multiple_of(2) {
                    byte >> 4
                } else {
                    byte & 0x0F
                };
                Value::Boolean(nibble != 0)
            }),
            (false, Some(bit)) => {
                word_at(data, at).map(|word| Value::Boolean(word >> bit & 1 == 1))
            }
            (false, None) => raw(tag, data, at, &mut bytes),
        };
        samples.push(sample(index, value, ts_ms));
    }
    crate::batch_from_samples(samples, bytes)
}

/// The value of word tag `tag` at word `at` of `data`, normalised into `bytes`.
fn raw(tag: &Tag, data: &[u8], at: usize, bytes: &mut Vec<u8>) -> Option<Value> {
    let len = tag.extent.count as usize * 2;
    let first = at.saturating_mul(2);
    let wire = data.get(first..first.saturating_add(len))?;
    let start = bytes.len();
    bytes.extend_from_slice(wire);
    if !matches!(tag.data_type, DataType::String(_))
        && let Some(value) = bytes.get_mut(start..)
    {
        value.reverse();
    }
    Some(Value::Raw(Span {
        start: start as u32,
        len: len as u32,
    }))
}

/// Word `at` of response data, sent low byte first.
fn word_at(data: &[u8], at: usize) -> Option<u16> {
    let pair = data.get(at.checked_mul(2)?..at.checked_mul(2)?.checked_add(2)?)?;
    Some(u16::from_le_bytes(<[u8; 2]>::try_from(pair).ok()?))
}

/// Points and wire data that write `value` to `tag`.
pub fn write(tag: &Tag, value: &Value) -> Result<(u32, Vec<u8>), String> {
    let number = number_from_value(value).ok_or("no value to write")?;
    match (tag.extent.area.bits, tag.bit) {
        (true, _) => {
            let on = match number {
                Number::Bool(b) => b,
                Number::Int(0) | Number::Uint(0) => false,
                Number::Int(1) | Number::Uint(1) => true,
                _ => return Err("a bit device takes true/false or 0/1".into()),
            };
            Ok((1, alloc::vec![if on { 0x10 } else { 0x00 }]))
        }
        (false, Some(_)) => {
            Err("writing one bit of a word device is not supported: write the whole word".into())
        }
        (false, None) => {
            let mut bytes = encode(tag.data_type, &number)
                .map_err(|e| format!("{e:?}: value does not fit {:?}", tag.data_type))?;
            // Big-endian -> the normalised read form -> wire order.
            reorder_for(&mut bytes, tag.data_type, tag.byte_order);
            if !matches!(tag.data_type, DataType::String(_)) {
                bytes.reverse();
            }
            Ok(((bytes.len() / 2) as u32, bytes))
        }
    }
}
