//! Samples: what a round reads from a device and hands down the pipeline.

/// How far a sample can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Quality {
    Good,
    Uncertain,
    Bad,
}

impl Quality {
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
}

impl Value {
    /// The value as JSON: `null` without one (not read, or still raw bytes).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Bool(b) => (*b).into(),
            Value::Int(v) => (*v).into(),
            Value::Uint(v) => (*v).into(),
            Value::Float(v) => (*v).into(),
            Value::Text(t) => t.as_str().into(),
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
