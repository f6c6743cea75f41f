//! A batch as the columns the WIT `batch` record carries, with the accessors the
//! stages share. Sample `i` is entry `i` of `tags`, `qualities`, `kinds`, `bits`
//! and `ts_ms`; a component converts the generated record into this one and back
//! by moving the lists (see [`stage_component!`](crate::stage_component)).

use alloc::string::String;
use alloc::vec::Vec;

use crate::numeric::Number;

/// Values of `qualities`.
pub mod quality {
    pub const GOOD: u8 = 0;
    pub const UNCERTAIN: u8 = 1;
    pub const BAD: u8 = 2;
}

/// A sample's quality, as rows of a batch carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quality {
    Good,
    Uncertain,
    Bad,
}

impl Quality {
    /// Its value in `qualities`.
    pub fn code(self) -> u8 {
        match self {
            Quality::Good => quality::GOOD,
            Quality::Uncertain => quality::UNCERTAIN,
            Quality::Bad => quality::BAD,
        }
    }

    /// The quality of a value in `qualities` (anything unknown is BAD).
    pub fn from_code(code: u8) -> Self {
        match code {
            quality::GOOD => Quality::Good,
            quality::UNCERTAIN => Quality::Uncertain,
            _ => Quality::Bad,
        }
    }
}

/// Values of `kinds`: the cases of the WIT `value` variant, in order.
pub mod kind {
    pub const NONE: u8 = 0;
    pub const RAW: u8 = 1;
    pub const BOOLEAN: u8 = 2;
    pub const INT: u8 = 3;
    pub const UINT: u8 = 4;
    pub const FLOAT: u8 = 5;
    pub const TEXT: u8 = 6;
    pub const ARRAY: u8 = 7;
}

/// One sample's value, read out of the columns.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell<'a> {
    None,
    /// A byte range of `bytes`.
    Raw {
        start: u32,
        len: u32,
    },
    Boolean(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Text(&'a str),
    /// A range of the element columns: `len` elements from `start`.
    Array {
        start: u32,
        len: u32,
    },
}

impl Cell<'_> {
    /// The value as a number, for the numeric kinds.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Cell::Int(v) => Some(v as f64),
            Cell::Uint(v) => Some(v as f64),
            Cell::Float(v) => Some(v),
            _ => None,
        }
    }
}

/// One round's samples as columns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Columns {
    pub tags: Vec<u32>,
    pub qualities: Vec<u8>,
    pub kinds: Vec<u8>,
    pub bits: Vec<u64>,
    pub ts_ms: Vec<i64>,
    pub bytes: Vec<u8>,
    pub texts: Vec<String>,
    /// The elements of the array values, consecutive per array: a kind
    /// (boolean, int, uint or float) and 64 bits each, as a sample's.
    pub element_kinds: Vec<u8>,
    pub element_bits: Vec<u64>,
}

/// The `bits` of a raw span.
pub fn span_bits(start: u32, len: u32) -> u64 {
    (u64::from(start) << 32) | u64::from(len)
}

/// The value that `kind` and `bits` stand for (`None` for a text index out of range).
pub fn cell_of(kind: u8, bits: u64, texts: &[String]) -> Cell<'_> {
    match kind {
        kind::RAW => Cell::Raw {
            start: (bits >> 32) as u32,
            len: bits as u32,
        },
        kind::BOOLEAN => Cell::Boolean(bits != 0),
        kind::INT => Cell::Int(bits as i64),
        kind::UINT => Cell::Uint(bits),
        kind::FLOAT => Cell::Float(f64::from_bits(bits)),
        kind::TEXT => match texts.get(bits as usize) {
            Some(text) => Cell::Text(text),
            None => Cell::None,
        },
        kind::ARRAY => Cell::Array {
            start: (bits >> 32) as u32,
            len: bits as u32,
        },
        _ => Cell::None,
    }
}

impl Columns {
    /// Empty columns with room for `samples` samples (and no bytes or texts).
    pub fn with_capacity(samples: usize) -> Self {
        Self {
            tags: Vec::with_capacity(samples),
            qualities: Vec::with_capacity(samples),
            kinds: Vec::with_capacity(samples),
            bits: Vec::with_capacity(samples),
            ts_ms: Vec::with_capacity(samples),
            bytes: Vec::new(),
            texts: Vec::new(),
            element_kinds: Vec::new(),
            element_bits: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.tags.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tags.is_empty()
    }

    /// Whether the five per-sample columns have one length (a batch from a
    /// faulty host or component may not).
    pub fn is_aligned(&self) -> bool {
        [
            self.qualities.len(),
            self.kinds.len(),
            self.bits.len(),
            self.ts_ms.len(),
        ]
        .iter()
        .all(|n| *n == self.len())
    }

    /// Samples that every per-sample column has an entry for.
    pub fn rows(&self) -> usize {
        [
            self.qualities.len(),
            self.kinds.len(),
            self.bits.len(),
            self.ts_ms.len(),
        ]
        .into_iter()
        .fold(self.tags.len(), usize::min)
    }

    /// The value of sample `i` (`None` past the end).
    pub fn cell(&self, i: usize) -> Cell<'_> {
        match (self.kinds.get(i), self.bits.get(i)) {
            (Some(&kind), Some(&bits)) => cell_of(kind, bits, &self.texts),
            _ => Cell::None,
        }
    }

    /// The raw bytes of sample `i`, when it holds a span that lies inside `bytes`.
    pub fn raw_range(&self, i: usize) -> Option<core::ops::Range<usize>> {
        match self.cell(i) {
            Cell::Raw { start, len } => {
                let start = start as usize;
                let end = start.checked_add(len as usize)?;
                (end <= self.bytes.len()).then_some(start..end)
            }
            _ => None,
        }
    }

    /// The element range of sample `i`, when it holds an array that lies
    /// inside the element columns.
    pub fn array_range(&self, i: usize) -> Option<core::ops::Range<usize>> {
        match self.cell(i) {
            Cell::Array { start, len } => {
                let start = start as usize;
                let end = start.checked_add(len as usize)?;
                let inside = end <= self.element_kinds.len() && end <= self.element_bits.len();
                inside.then_some(start..end)
            }
            _ => None,
        }
    }

    /// Element `e` of the element columns (text and unknown kinds are `None`).
    pub fn element(&self, e: usize) -> Cell<'_> {
        match (self.element_kinds.get(e), self.element_bits.get(e)) {
            (Some(&kind), Some(&bits)) if (kind::BOOLEAN..=kind::FLOAT).contains(&kind) => {
                cell_of(kind, bits, &[])
            }
            _ => Cell::None,
        }
    }

    /// Sets element `e` to a float (no-op past the end).
    pub fn set_element_float(&mut self, e: usize, value: f64) {
        if let (Some(k), Some(b)) = (self.element_kinds.get_mut(e), self.element_bits.get_mut(e)) {
            *k = kind::FLOAT;
            *b = value.to_bits();
        }
    }

    /// Appends `numbers` to the element columns and returns the `bits` of the
    /// array they make; `None` if one of them is text, which no array holds.
    fn append_elements(&mut self, numbers: impl IntoIterator<Item = Number>) -> Option<u64> {
        let start = self.element_kinds.len();
        for number in numbers {
            let (kind, bits) = match number {
                Number::Bool(v) => (kind::BOOLEAN, u64::from(v)),
                Number::Int(v) => (kind::INT, v as u64),
                Number::Uint(v) => (kind::UINT, v),
                Number::Float(v) => (kind::FLOAT, v.to_bits()),
                Number::Text(_) => {
                    self.element_kinds.truncate(start);
                    self.element_bits.truncate(start);
                    return None;
                }
            };
            self.element_kinds.push(kind);
            self.element_bits.push(bits);
        }
        let len = self.element_kinds.len() - start;
        Some(span_bits(
            u32::try_from(start).ok()?,
            u32::try_from(len).ok()?,
        ))
    }

    /// Sets the value of sample `i` to an array of `numbers`; BAD if one of
    /// them is text.
    pub fn set_array(&mut self, i: usize, numbers: impl IntoIterator<Item = Number>) {
        match self.append_elements(numbers) {
            Some(bits) => self.set(i, kind::ARRAY, bits),
            None => self.set_bad(i),
        }
    }

    /// Appends a GOOD sample holding an array of `numbers` (BAD without a
    /// value if one of them is text).
    pub fn push_array(&mut self, tag: u32, numbers: impl IntoIterator<Item = Number>, ts_ms: i64) {
        match self.append_elements(numbers) {
            Some(bits) => self.push(tag, quality::GOOD, kind::ARRAY, bits, ts_ms),
            None => self.push(tag, quality::BAD, kind::NONE, 0, ts_ms),
        }
    }

    /// Sets the value of sample `i` (no-op past the end).
    pub fn set_number(&mut self, i: usize, number: Number) {
        let (kind, bits) = match number {
            Number::Bool(v) => (kind::BOOLEAN, u64::from(v)),
            Number::Int(v) => (kind::INT, v as u64),
            Number::Uint(v) => (kind::UINT, v),
            Number::Float(v) => (kind::FLOAT, v.to_bits()),
            Number::Text(text) => {
                let index = self.texts.len() as u64;
                self.texts.push(text);
                (kind::TEXT, index)
            }
        };
        self.set(i, kind, bits);
    }

    /// Sets the value of sample `i` to a float.
    pub fn set_float(&mut self, i: usize, value: f64) {
        self.set(i, kind::FLOAT, value.to_bits());
    }

    fn set(&mut self, i: usize, kind: u8, bits: u64) {
        if let (Some(k), Some(b)) = (self.kinds.get_mut(i), self.bits.get_mut(i)) {
            *k = kind;
            *b = bits;
        }
    }

    /// Sample `i` has no value and is BAD.
    pub fn set_bad(&mut self, i: usize) {
        self.set(i, kind::NONE, 0);
        self.set_quality(i, quality::BAD);
    }

    pub fn quality(&self, i: usize) -> u8 {
        self.qualities.get(i).copied().unwrap_or(quality::BAD)
    }

    pub fn set_quality(&mut self, i: usize, quality: u8) {
        if let Some(q) = self.qualities.get_mut(i) {
            *q = quality;
        }
    }

    /// Appends a sample whose value is `kind` and `bits` (see [`push_text`](Self::push_text) for text).
    pub fn push(&mut self, tag: u32, quality: u8, kind: u8, bits: u64, ts_ms: i64) {
        self.tags.push(tag);
        self.qualities.push(quality);
        self.kinds.push(kind);
        self.bits.push(bits);
        self.ts_ms.push(ts_ms);
    }

    /// Appends a GOOD sample holding `number`.
    pub fn push_number(&mut self, tag: u32, number: Number, ts_ms: i64) {
        self.push(tag, quality::GOOD, kind::NONE, 0, ts_ms);
        self.set_number(self.len() - 1, number);
    }

    /// Appends a GOOD sample holding `raw`, bytes as the device sent them
    /// (copied to the end of `bytes`); BAD without a value past 4 GiB.
    pub fn push_raw(&mut self, tag: u32, raw: &[u8], ts_ms: i64) {
        let span = u32::try_from(self.bytes.len())
            .ok()
            .zip(u32::try_from(raw.len()).ok());
        match span {
            Some((start, len)) => {
                self.bytes.extend_from_slice(raw);
                self.push(tag, quality::GOOD, kind::RAW, span_bits(start, len), ts_ms);
            }
            None => self.push(tag, quality::BAD, kind::NONE, 0, ts_ms),
        }
    }

    /// Appends a sample holding `cell`.
    pub fn push_cell(&mut self, tag: u32, quality: Quality, cell: Cell<'_>, ts_ms: i64) {
        let q = quality.code();
        let (kind, bits) = match cell {
            Cell::None => (kind::NONE, 0),
            Cell::Raw { start, len } => (kind::RAW, span_bits(start, len)),
            Cell::Boolean(v) => (kind::BOOLEAN, u64::from(v)),
            Cell::Int(v) => (kind::INT, v as u64),
            Cell::Uint(v) => (kind::UINT, v),
            Cell::Float(v) => (kind::FLOAT, v.to_bits()),
            Cell::Array { start, len } => (kind::ARRAY, span_bits(start, len)),
            Cell::Text(text) => return self.push_text(tag, q, text.into(), ts_ms),
        };
        self.push(tag, q, kind, bits, ts_ms);
    }

    /// Appends a sample read from a device: GOOD with its value, BAD without one.
    pub fn push_read(&mut self, tag: u32, value: Option<Cell<'_>>, ts_ms: i64) {
        let quality = if value.is_some() {
            Quality::Good
        } else {
            Quality::Bad
        };
        self.push_cell(tag, quality, value.unwrap_or(Cell::None), ts_ms);
    }

    /// Appends a text sample.
    pub fn push_text(&mut self, tag: u32, quality: u8, text: String, ts_ms: i64) {
        let index = self.texts.len() as u64;
        self.texts.push(text);
        self.push(tag, quality, kind::TEXT, index, ts_ms);
    }

    /// Keeps the samples for which `keep(self, i)` is true, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(&Self, usize) -> bool) {
        let mut kept = 0;
        for i in 0..self.len() {
            if !keep(self, i) {
                continue;
            }
            if kept != i {
                self.tags[kept] = self.tags[i];
                self.qualities[kept] = self.qualities[i];
                self.kinds[kept] = self.kinds[i];
                self.bits[kept] = self.bits[i];
                self.ts_ms[kept] = self.ts_ms[i];
            }
            kept += 1;
        }
        self.tags.truncate(kept);
        self.qualities.truncate(kept);
        self.kinds.truncate(kept);
        self.bits.truncate(kept);
        self.ts_ms.truncate(kept);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_read_back_what_was_set() {
        let mut columns = Columns::default();
        for tag in 0..5 {
            columns.push(tag, quality::GOOD, kind::RAW, span_bits(tag * 2, 2), 7);
        }
        columns.bytes = alloc::vec![0; 10];
        columns.set_number(0, Number::Int(-3));
        columns.set_number(1, Number::Uint(u64::MAX));
        columns.set_number(2, Number::Float(1.5));
        columns.set_number(3, Number::Text("on".into()));
        assert_eq!(columns.cell(0), Cell::Int(-3));
        assert_eq!(columns.cell(1), Cell::Uint(u64::MAX));
        assert_eq!(columns.cell(2), Cell::Float(1.5));
        assert_eq!(columns.cell(3), Cell::Text("on"));
        assert_eq!(columns.raw_range(4), Some(8..10));
        columns.set_bad(4);
        assert_eq!(
            (columns.cell(4), columns.quality(4)),
            (Cell::None, quality::BAD)
        );
    }

    #[test]
    fn a_read_is_good_with_a_value_and_bad_without_one() {
        let mut columns = Columns::with_capacity(2);
        columns.push_read(3, Some(Cell::Raw { start: 0, len: 2 }), 9);
        columns.push_read(4, None, 9);
        assert_eq!(columns.tags, [3, 4]);
        assert_eq!(columns.qualities, [quality::GOOD, quality::BAD]);
        assert_eq!(columns.kinds, [kind::RAW, kind::NONE]);
        assert_eq!(columns.bits, [span_bits(0, 2), 0]);
        assert_eq!(columns.ts_ms, [9, 9]);
        assert!(columns.is_aligned());
    }

    #[test]
    fn arrays_hold_their_elements_and_refuse_text() {
        let mut columns = Columns::default();
        columns.push(0, quality::GOOD, kind::RAW, span_bits(0, 4), 1);
        columns.push(1, quality::GOOD, kind::RAW, span_bits(0, 4), 1);
        columns.push_array(2, [Number::Bool(true), Number::Bool(false)], 1);
        columns.set_array(0, [Number::Int(-1), Number::Uint(7), Number::Float(0.5)]);
        columns.set_array(1, [Number::Int(1), Number::Text("x".into())]);
        assert_eq!(columns.array_range(0), Some(2..5));
        assert_eq!(columns.array_range(2), Some(0..2));
        assert_eq!(
            (columns.element(2), columns.element(3), columns.element(4)),
            (Cell::Int(-1), Cell::Uint(7), Cell::Float(0.5))
        );
        assert_eq!(columns.element(0), Cell::Boolean(true));
        assert_eq!(
            (columns.cell(1), columns.quality(1)),
            (Cell::None, quality::BAD)
        );
        assert_eq!(
            columns.element_kinds.len(),
            5,
            "the refused array left nothing"
        );
        columns.set_element_float(3, 2.5);
        assert_eq!(columns.element(3), Cell::Float(2.5));
        columns.push(3, quality::GOOD, kind::ARRAY, span_bits(4, 2), 1);
        assert_eq!(columns.array_range(3), None, "an array past the elements");
    }

    #[test]
    fn spans_past_the_buffer_are_not_ranges() {
        let mut columns = Columns::default();
        columns.push(0, quality::GOOD, kind::RAW, span_bits(u32::MAX, 2), 0);
        columns.push(1, quality::GOOD, kind::RAW, span_bits(0, 4), 0);
        columns.bytes = alloc::vec![0; 3];
        assert_eq!((columns.raw_range(0), columns.raw_range(1)), (None, None));
    }

    #[test]
    fn retain_keeps_the_order_of_what_it_keeps() {
        let mut columns = Columns::default();
        for tag in 0..6 {
            columns.push(
                tag,
                quality::GOOD,
                kind::INT,
                u64::from(tag),
                i64::from(tag),
            );
        }
        columns.retain(|c, i| c.tags[i] % 2 == 1);
        assert_eq!(columns.tags, [1, 3, 5]);
        assert_eq!(columns.ts_ms, [1, 3, 5]);
        assert!(columns.is_aligned());
    }
}
