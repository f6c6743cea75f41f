//! Samples: what a round reads from a device and hands down the pipeline.

/// How far a sample can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Quality {
    Good,
    Uncertain,
    Bad,
}

impl Quality {
    /// The quality's code in compact forms: 0 good, 1 uncertain, 2 bad (the
    /// WIT batch's `qualities` column, docs/components.md).
    pub fn code(self) -> u8 {
        match self {
            Quality::Good => 0,
            Quality::Uncertain => 1,
            Quality::Bad => 2,
        }
    }

    /// The quality of `code`, if it is one.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Quality::Good),
            1 => Some(Quality::Uncertain),
            2 => Some(Quality::Bad),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Quality::Good => "GOOD",
            Quality::Uncertain => "UNCERTAIN",
            Quality::Bad => "BAD",
        }
    }
}

/// A byte range inside the `bytes` buffer of a [`Batch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: u32,
    pub len: u32,
}

/// A value on its way from the device to the uplink.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// No value: not read, or not decodable.
    None,
    /// Device bytes not yet decoded.
    Raw(Span),
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Text(String),
    /// The elements of an array tag, in address order: each a `Bool`, `Int`,
    /// `Uint` or `Float`. A boxed slice, not a `Vec`, keeps a value at 24 bytes
    /// (a `Vec` beside the `String` takes 32): every sample of a round carries one.
    Array(Box<[Value]>),
}

impl Value {
    /// The kind code of a text value (see [`Value::to_bits`]).
    pub const TEXT_KIND: u8 = 6;
    /// The kind code of an array value (see [`Value::to_bits`]).
    pub const ARRAY_KIND: u8 = 7;

    /// Whether a value of `kind` is kept outside its 64 bits (a text, an array).
    pub fn kept_aside(kind: u8) -> bool {
        kind == Self::TEXT_KIND || kind == Self::ARRAY_KIND
    }

    /// The value in compact form: the code of its case (0 none, 1 raw, 2 bool,
    /// 3 int, 4 uint, 5 float, [`Value::TEXT_KIND`] text, [`Value::ARRAY_KIND`]
    /// array) and 64 bits (a raw span's start and length, the integer, the
    /// float's IEEE bits; 0 for a text or an array, which the form keeps
    /// elsewhere). The WIT batch's `kinds` and `bits` columns (docs/components.md).
    pub fn to_bits(&self) -> (u8, u64) {
        match self {
            Value::None => (0, 0),
            Value::Raw(span) => (1, (u64::from(span.start) << 32) | u64::from(span.len)),
            Value::Bool(v) => (2, u64::from(*v)),
            Value::Int(v) => (3, u64::from_ne_bytes(v.to_ne_bytes())),
            Value::Uint(v) => (4, *v),
            Value::Float(v) => (5, v.to_bits()),
            Value::Text(_) => (Self::TEXT_KIND, 0),
            Value::Array(_) => (Self::ARRAY_KIND, 0),
        }
    }

    /// The value of kind `kind` with `bits` (as [`Value::to_bits`] gives them),
    /// `aside` being the value of a kind [kept aside](Value::kept_aside);
    /// `None` for an unknown kind, or such a kind without a value of its kind.
    pub fn from_bits(kind: u8, bits: u64, aside: Option<Value>) -> Option<Self> {
        Some(match kind {
            0 => Value::None,
            1 => Value::Raw(Span {
                start: (bits >> 32) as u32,
                len: bits as u32,
            }),
            2 => Value::Bool(bits != 0),
            3 => Value::Int(i64::from_ne_bytes(bits.to_ne_bytes())),
            4 => Value::Uint(bits),
            5 => Value::Float(f64::from_bits(bits)),
            Self::TEXT_KIND | Self::ARRAY_KIND => match aside? {
                value @ Value::Text(_) if kind == Self::TEXT_KIND => value,
                value @ Value::Array(_) if kind == Self::ARRAY_KIND => value,
                _ => return None,
            },
            _ => return None,
        })
    }

    /// The value as JSON: `null` without one (not read, or still raw bytes).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Bool(b) => (*b).into(),
            Value::Int(v) => (*v).into(),
            Value::Uint(v) => (*v).into(),
            Value::Float(v) => (*v).into(),
            Value::Text(t) => t.as_str().into(),
            Value::Array(elements) => elements.iter().map(Value::to_json).collect(),
            Value::None | Value::Raw(_) => serde_json::Value::Null,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Index of the tag in the device's tag list.
    pub tag: u32,
    pub value: Value,
    pub quality: Quality,
    /// When the response carrying the sample arrived, ms since the Unix epoch.
    pub ts_ms: i64,
}

/// One device's samples of one round, and the raw bytes their spans point into.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    pub samples: Vec<Sample>,
    pub bytes: Vec<u8>,
}

/// The values of a round's tags as the device holds them, before the
/// pipeline's stages (seed 003's `rawValue`), by tag index; `None` for a tag
/// the round did not read, or whose bytes do not decode.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawValues(pub Vec<Option<Value>>);

impl RawValues {
    /// The raw value of tag `tag`.
    pub fn get(&self, tag: u32) -> Option<&Value> {
        self.0.get(tag as usize)?.as_ref()
    }
}

impl Batch {
    /// Moves `other`'s samples into this batch, renumbering their tags with
    /// `tag_of` and moving their raw bytes (spans follow).
    pub fn append(&mut self, other: Batch, tag_of: impl Fn(u32) -> u32) {
        let base = u32::try_from(self.bytes.len()).unwrap_or(u32::MAX);
        self.bytes.extend_from_slice(&other.bytes);
        self.samples
            .extend(other.samples.into_iter().map(|mut sample| {
                sample.tag = tag_of(sample.tag);
                if let Value::Raw(span) = &mut sample.value {
                    span.start = span.start.saturating_add(base);
                }
                sample
            }));
    }

    /// Adds a BAD sample (no value) for `tag`.
    pub fn push_bad(&mut self, tag: u32, ts_ms: i64) {
        self.samples.push(Sample {
            tag,
            value: Value::None,
            quality: Quality::Bad,
            ts_ms,
        });
    }

    /// The bytes a raw value points at, if the span is inside the buffer.
    pub fn raw(&self, span: Span) -> Option<&[u8]> {
        let start = span.start as usize;
        self.bytes.get(start..start.checked_add(span.len as usize)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_stays_three_words() {
        // Every sample of every round carries one: an array must not grow it.
        assert_eq!(std::mem::size_of::<Value>(), 24);
    }
}
