//! Test cases written in a pipeline file (`tests:`), run by `sluice test`: samples
//! in, samples expected out, round after round (stages keep their memory between
//! the rounds of one case, as they do between polls).
//!
//! ```yaml
//! tests:
//!   - name: scales a register
//!     tags:
//!       - { key: t, dataType: INT16, factor: 0.1 }
//!     rounds:
//!       - input:  [ { tag: t, raw: "04D2" } ]       # bytes as the device sends them
//!         expect: [ { tag: t, value: 123.4 } ]
//!       - input:  [ { tag: t, value: 1235 } ]        # or a value a codec decoded
//!         expect: [ { tag: t, dropped: true } ]      # e.g. inside a deadband
//! ```
//!
//! A case with a single round may give `input` and `expect` directly. Input
//! samples take `quality` (GOOD by default); expected ones `quality` (GOOD by
//! default) and `value` (`null` for none; a list for an array tag, one with a
//! `length`); numbers compare to 1e-9.

use compact_str::CompactString;

use crate::model::{Access, ByteOrder, DataType, Quality, Setting, SettingValue, TagSpec, Value};
use crate::yaml::{Diagnostics, Fields, FromNode, Kind, Node, Pos, enum_value};

/// One sample of an input round.
#[derive(Debug, Clone, PartialEq)]
pub struct Given {
    pub tag: u32,
    pub value: InputValue,
    pub quality: Quality,
}

/// What an input sample carries.
#[derive(Debug, Clone, PartialEq)]
pub enum InputValue {
    Raw(Vec<u8>),
    Value(Value),
}

/// One expected output sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    pub tag: u32,
    /// `None`: the sample must not be in the output.
    pub sample: Option<(Want, Quality)>,
    pub pos: Pos,
}

/// What an expected sample carries: a value, or raw bytes (`raw: "04D2"`).
#[derive(Debug, Clone, PartialEq)]
pub enum Want {
    Value(Value),
    Raw(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Round {
    pub input: Vec<Given>,
    pub expect: Vec<Expected>,
}

/// One `tests:` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    pub name: String,
    pub tags: Vec<TagSpec>,
    pub rounds: Vec<Round>,
    pub pos: Pos,
}

const QUALITIES: &[(&str, Quality)] = &[
    ("GOOD", Quality::Good),
    ("UNCERTAIN", Quality::Uncertain),
    ("BAD", Quality::Bad),
];

fn quality(f: &mut Fields<'_>, errors: &mut Diagnostics) -> Quality {
    f.optional_with("quality", errors, |n| enum_value(n, QUALITIES))
        .unwrap_or(Quality::Good)
}

fn number_or(f: &mut Fields<'_>, key: &'static str, default: f64, errors: &mut Diagnostics) -> f64 {
    f.optional::<f64>(key, errors).unwrap_or(default)
}

fn read_tag(node: &Node, errors: &mut Diagnostics) -> Option<TagSpec> {
    let mut f = Fields::of(node, "test tag", errors)?;
    let key = f.required::<String>("key", errors);
    let data_type = f
        .optional_with("dataType", errors, |n| enum_value(n, DataType::NAMES))
        .or_else(|| {
            errors.push(f.pos(), "test tag: missing `dataType`");
            None
        });
    let byte_order = f
        .optional_with("byteOrder", errors, |n| enum_value(n, ByteOrder::NAMES))
        .unwrap_or_default();
    let factor = number_or(&mut f, "factor", 1.0, errors);
    let offset = number_or(&mut f, "offset", 0.0, errors);
    let deadband = number_or(&mut f, "deadband", 0.0, errors);
    let length = f.optional::<u32>("length", errors).unwrap_or(0);
    let mut settings = Vec::new();
    for bound in ["min", "max"] {
        if let Some(value) = f.optional::<f64>(bound, errors) {
            settings.push(Setting {
                key: bound.into(),
                value: SettingValue::Float(value),
            });
        }
    }
    f.finish(errors);
    Some(TagSpec {
        key: key?.into(),
        address: CompactString::default(),
        data_type: data_type?,
        length,
        byte_order,
        factor,
        offset,
        deadband,
        access: Access::Read,
        settings,
    })
}

/// Bytes written as hex digits, two a byte, spaces allowed between.
pub(crate) fn hex(text: &str) -> Result<Vec<u8>, String> {
    let bad = || format!("`{text}` is not hex bytes, two digits each (e.g. \"04D2\")");
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return Err(bad());
    }
    digits
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                .ok_or_else(bad)
        })
        .collect()
}

pub(crate) fn value_of(node: &Node) -> Result<Value, String> {
    match &node.kind {
        Kind::Bool(b) => Ok(Value::Bool(*b)),
        Kind::Int(i) => Ok(Value::Int(*i)),
        Kind::Float(x) => Ok(Value::Float(*x)),
        Kind::Str(s) => Ok(Value::Text(s.clone())),
        Kind::Null => Ok(Value::None),
        // An array tag's value: a list of numbers or booleans.
        Kind::Seq(items) => items
            .iter()
            .map(|item| match value_of(item)? {
                element @ (Value::Bool(_) | Value::Int(_) | Value::Float(_)) => Ok(element),
                _ => Err(format!(
                    "an array holds numbers and booleans, found {}",
                    item.kind.describe()
                )),
            })
            .collect::<Result<_, _>>()
            .map(Value::Array),
        other => Err(format!("expected a value, found {}", other.describe())),
    }
}

fn tag_index(tags: &[TagSpec], f: &mut Fields<'_>, errors: &mut Diagnostics) -> Option<u32> {
    let pos = f.pos();
    let key = f.required::<String>("tag", errors)?;
    let index = tags.iter().position(|t| t.key == key);
    if index.is_none() {
        errors.push(pos, format!("no tag `{key}` in this test's `tags`"));
    }
    index.map(|i| i as u32)
}

fn read_given(node: &Node, tags: &[TagSpec], errors: &mut Diagnostics) -> Option<Given> {
    let mut f = Fields::of(node, "input sample", errors)?;
    let tag = tag_index(tags, &mut f, errors);
    let raw = f.optional_with("raw", errors, |n| {
        String::from_node(n).and_then(|s| hex(&s))
    });
    let value = f.optional_with("value", errors, value_of);
    let quality = quality(&mut f, errors);
    let pos = f.pos();
    f.finish(errors);
    let value = match (raw, value) {
        (Some(bytes), None) => InputValue::Raw(bytes),
        (None, Some(value)) => InputValue::Value(value),
        _ => {
            errors.push(pos, "input sample: give either `raw` or `value`");
            return None;
        }
    };
    Some(Given {
        tag: tag?,
        value,
        quality,
    })
}

/// An expected sample of one of `tags`: `value` (or `raw` bytes) and
/// `quality`, or `dropped: true`.
pub(crate) fn read_expected(
    node: &Node,
    tags: &[TagSpec],
    errors: &mut Diagnostics,
) -> Option<Expected> {
    let mut f = Fields::of(node, "expected sample", errors)?;
    let pos = f.pos();
    let tag = tag_index(tags, &mut f, errors);
    let dropped = f.optional::<bool>("dropped", errors).unwrap_or(false);
    // `value: null` is a value (none), not an absent key.
    let value = f.entry("value").and_then(|n| {
        value_of(n)
            .map_err(|message| errors.push(n.pos, format!("`value`: {message}")))
            .ok()
    });
    let raw = f.optional_with("raw", errors, |n| {
        String::from_node(n).and_then(|s| hex(&s))
    });
    let quality = quality(&mut f, errors);
    f.finish(errors);
    let sample = match (dropped, value, raw) {
        (true, None, None) => None,
        (false, Some(value), None) => Some((Want::Value(value), quality)),
        (false, None, Some(bytes)) => Some((Want::Raw(bytes), quality)),
        _ => {
            errors.push(
                pos,
                "expected sample: give one of `value`, `raw` or `dropped: true`",
            );
            return None;
        }
    };
    Some(Expected {
        tag: tag?,
        sample,
        pos,
    })
}

/// The round of `input` and `expect` in `f`; `None` when neither is written.
fn read_round(f: &mut Fields<'_>, tags: &[TagSpec], errors: &mut Diagnostics) -> Option<Round> {
    let (input, expect) = (f.node("input"), f.node("expect"));
    if input.is_none() && expect.is_none() {
        return None;
    }
    let items = |node: Option<&'_ Node>, errors: &mut Diagnostics| -> Vec<Node> {
        match node.map(|n| (n, n.as_seq())) {
            Some((_, Some(items))) => items.to_vec(),
            Some((n, None)) => {
                errors.push(n.pos, "expected a list of samples");
                Vec::new()
            }
            None => Vec::new(),
        }
    };
    let input = items(input, errors);
    let expect = items(expect, errors);
    Some(Round {
        input: input
            .iter()
            .filter_map(|n| read_given(n, tags, errors))
            .collect(),
        expect: expect
            .iter()
            .filter_map(|n| read_expected(n, tags, errors))
            .collect(),
    })
}

/// Reads a `tests:` list.
pub(super) fn read_all(node: &Node, errors: &mut Diagnostics) -> Vec<Case> {
    let Some(items) = node.as_seq() else {
        errors.push(node.pos, "`tests`: expected a list of test cases");
        return Vec::new();
    };
    let mut cases = Vec::new();
    for item in items {
        let Some(mut f) = Fields::of(item, "test", errors) else {
            continue;
        };
        let name = f.required::<String>("name", errors).unwrap_or_default();
        let tags: Vec<TagSpec> = f
            .node("tags")
            .and_then(Node::as_seq)
            .map(|items| items.iter().filter_map(|n| read_tag(n, errors)).collect())
            .unwrap_or_default();
        let mut rounds = Vec::new();
        if let Some(list) = f.node("rounds").and_then(Node::as_seq) {
            for round in list {
                if let Some(mut rf) = Fields::of(round, "round", errors) {
                    rounds.extend(read_round(&mut rf, &tags, errors));
                    rf.finish(errors);
                }
            }
        }
        rounds.extend(read_round(&mut f, &tags, errors));
        if rounds.is_empty() {
            errors.push(
                item.pos,
                format!("test `{name}`: no `rounds` (or `input`/`expect`)"),
            );
        }
        let pos = item.pos;
        f.finish(errors);
        cases.push(Case {
            name,
            tags,
            rounds,
            pos,
        });
    }
    cases
}

#[cfg(test)]
mod tests {
    use super::hex;

    #[test]
    fn hex_bytes_never_panic() {
        assert_eq!(hex("04 d2"), Ok(vec![0x04, 0xD2]));
        assert!(hex("4d2").is_err());
        assert!(hex("zz").is_err());
        assert!(
            hex("ä1").is_err(),
            "a multi-byte character is refused, not sliced"
        );
    }
}
