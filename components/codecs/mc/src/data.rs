//! Values in MC's word order: each word low byte first, multi-word values low
//! word first. Raw numeric samples are normalised to big-endian, high word first
//! (all bytes of the value reversed, of each element for an array tag); strings
//! keep the wire order. Writes do the inverse.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use sluice_guest::numeric::{DataType, Number, encode_each};

use crate::sluice::dataflow::types::{Batch, Element, Span, Value};
use crate::{Request, Tag, numbers_to_write, sample};

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
            (true, _) => match tag.array_len {
                Some(len) => (at..at + len as usize)
                    .map(|i| bit_at(data, i).map(Element::Boolean))
                    .collect::<Option<_>>()
                    .map(Value::Array),
                None => bit_at(data, at).map(Value::Boolean),
            },
            (false, Some(bit)) => {
                word_at(data, at).map(|word| Value::Boolean(word >> bit & 1 == 1))
            }
            (false, None) => raw(tag, data, at, &mut bytes),
        };
        samples.push(sample(index, value, ts_ms));
    }
    crate::batch_from_samples(samples, bytes)
}

/// Bit `at` of the data of a read in bit units: four bits a byte, the first
/// in the high nibble.
fn bit_at(data: &[u8], at: usize) -> Option<bool> {
    let byte = data.get(at / 2)?;
    let nibble = if at.is_multiple_of(2) {
        byte >> 4
    } else {
        byte & 0x0F
    };
    Some(nibble != 0)
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
        reverse_each(value, tag.data_type);
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

/// Reverses the bytes of each value of `data_type` in `bytes`: a value's,
/// or each element's of an array tag.
fn reverse_each(bytes: &mut [u8], data_type: DataType) {
    for value in bytes.chunks_mut(data_type.byte_len()) {
        value.reverse();
    }
}

/// Points and wire data that write `value` to `tag`.
pub fn write(tag: &Tag, value: &Value) -> Result<(u32, Vec<u8>), String> {
    let numbers = numbers_to_write(value, tag.array_len)?;
    match (tag.extent.area.bits, tag.bit) {
        (true, _) => {
            // Four bits a byte, the first in the high nibble.
            let mut packed = alloc::vec![0u8; numbers.len().div_ceil(2)];
            for (i, number) in numbers.iter().enumerate() {
                let on = match number {
                    Number::Bool(b) => *b,
                    Number::Int(0) | Number::Uint(0) => false,
                    Number::Int(1) | Number::Uint(1) => true,
                    _ => return Err("a bit device takes true/false or 0/1".into()),
                };
                if on {
                    packed[i / 2] |= if i % 2 == 0 { 0x10 } else { 0x01 };
                }
            }
            Ok((numbers.len() as u32, packed))
        }
        (false, Some(_)) => {
            Err("writing one bit of a word device is not supported: write the whole word".into())
        }
        (false, None) => {
            // Big-endian -> the normalised read form -> wire order.
            let mut bytes = encode_each(tag.data_type, tag.byte_order, &numbers)
                .map_err(|e| format!("{e:?}: value does not fit {:?}", tag.data_type))?;
            if !matches!(tag.data_type, DataType::String(_)) {
                reverse_each(&mut bytes, tag.data_type);
            }
            Ok(((bytes.len() / 2) as u32, bytes))
        }
    }
}
