//! Small readers shared by the section loaders. Each records its own errors and falls
//! back to a default, so the caller carries on and finds the next mistake too.

use std::collections::HashMap;
use std::ops::RangeInclusive;

use crate::mqtt::limits::{MAX_NAME, MAX_TEXT, check_length};
use crate::yaml::{self, Diagnostics, Fields, FromNode, Kind, Node, Pos};

/// Names that must be unique in some scope, with where each was first written.
#[derive(Debug, Default)]
pub(super) struct Unique(HashMap<String, Pos>);

impl Unique {
    /// Records `name` at `pos`; returns where it was first written if it was seen before.
    pub(super) fn first(&mut self, name: &str, pos: Pos) -> Option<Pos> {
        match self.0.get(name) {
            Some(first) => Some(*first),
            None => {
                self.0.insert(name.to_owned(), pos);
                None
            }
        }
    }
}

/// The items of a list under `key`; an error (and no items) when it is not a list.
/// The name an entry gives itself under `key` (a `channelId`, a tag's
/// `key`), if it gives one as text: to say whose problems are found in it.
pub(super) fn entry_name<'n>(entry: &'n Node, key: &str) -> Option<&'n str> {
    entry
        .as_map()?
        .iter()
        .find(|(k, _)| k.name == key)
        .and_then(|(_, value)| match &value.kind {
            Kind::Str(name) => Some(name.as_str()),
            _ => None,
        })
}

pub(super) fn list<'a>(node: &'a Node, key: &str, errors: &mut Diagnostics) -> &'a [Node] {
    match node.as_seq() {
        Some(items) => items,
        None => {
            errors.push(
                node.pos,
                format!("`{key}`: expected a list, found {}", node.kind.describe()),
            );
            &[]
        }
    }
}

/// An optional value and the position it was written at; `None` when absent or invalid
/// (an error is then recorded at the value).
pub(super) fn read_at<T: FromNode>(
    fields: &mut Fields<'_>,
    key: &'static str,
    errors: &mut Diagnostics,
) -> Option<(T, Pos)> {
    let node = fields.node(key)?;
    match T::from_node(node) {
        Ok(value) => Some((value, node.pos)),
        Err(message) => {
            errors.push(node.pos, format!("`{key}`: {message}"));
            None
        }
    }
}

/// A required value and its position; a missing key is reported at the mapping.
pub(super) fn required_at<T: FromNode>(
    fields: &mut Fields<'_>,
    key: &'static str,
    errors: &mut Diagnostics,
) -> Option<(T, Pos)> {
    let pos = fields.node(key).map(|node| node.pos);
    let value = fields.required::<T>(key, errors)?;
    Some((value, pos.unwrap_or(fields.pos())))
}

/// An optional string and its position (see [`Text`]).
pub(super) fn text_at(
    fields: &mut Fields<'_>,
    key: &'static str,
    errors: &mut Diagnostics,
) -> Option<(String, Pos)> {
    read_at::<Text>(fields, key, errors).map(|(text, pos)| (text.0, pos))
}

/// A required string and its position (see [`Text`]).
pub(super) fn required_text(
    fields: &mut Fields<'_>,
    key: &'static str,
    errors: &mut Diagnostics,
) -> Option<(String, Pos)> {
    required_at::<Text>(fields, key, errors).map(|(text, pos)| (text.0, pos))
}

/// A required name (`deviceId`, `productId`, `deviceNum`, `channelId`, a tag's
/// `key`): a text of at most [`MAX_NAME`] bytes. A longer one is an error
/// (which does not repeat it) and reads as missing.
pub(super) fn required_name(
    fields: &mut Fields<'_>,
    key: &'static str,
    errors: &mut Diagnostics,
) -> Option<(String, Pos)> {
    let (name, pos) = required_text(fields, key, errors)?;
    if let Err(message) = check_length(key, &name, MAX_NAME) {
        errors.push(pos, message);
        return None;
    }
    Some((name, pos))
}

/// A string value. Like `String`, it takes an unquoted integer as its digits; unlike
/// it, the error for a value YAML read as a boolean or a fraction says to quote it
/// (`deviceNum: N` is `false`, `address: 00010` is the number 10.0).
pub(super) struct Text(pub(super) String);

impl FromNode for Text {
    fn from_node(node: &Node) -> Result<Self, String> {
        match &node.kind {
            Kind::Bool(_) => Err("expected a string, found a boolean: write it in quotes \
                                  (unquoted, YAML reads y, n, yes, no, on, off, true and \
                                  false as booleans)"
                .to_owned()),
            Kind::Float(_) => Err("expected a string, found a number: write it in quotes \
                                   so that it is kept exactly as written"
                .to_owned()),
            _ => {
                let text = String::from_node(node)?;
                if text.len() > MAX_TEXT {
                    return Err(format!(
                        "a text of {} bytes; at most {MAX_TEXT} are taken",
                        text.len()
                    ));
                }
                Ok(Text(text))
            }
        }
    }
}

/// One of `names` under `key`, or `default` when absent or invalid.
pub(super) fn choice<T: Copy>(
    fields: &mut Fields<'_>,
    key: &'static str,
    names: &[(&str, T)],
    default: T,
    errors: &mut Diagnostics,
) -> T {
    fields
        .optional_with(key, errors, |node| yaml::enum_value(node, names))
        .unwrap_or(default)
}

/// An optional number under `key` that must lie in `bounds` (`min..=max`); `default` when
/// absent or invalid. `max` is left out of the message when it is the type's own maximum.
pub(super) fn ranged<T>(
    fields: &mut Fields<'_>,
    key: &'static str,
    bounds: RangeInclusive<T>,
    default: T,
    errors: &mut Diagnostics,
) -> T
where
    T: FromNode + PartialOrd + Copy + std::fmt::Display,
{
    let (min, max) = bounds.into_inner();
    match read_at::<T>(fields, key, errors) {
        Some((value, _)) if value >= min && value <= max => value,
        Some((value, pos)) => {
            errors.push(pos, out_of_range(key, value, min, max));
            default
        }
        None => default,
    }
}

/// An optional integer under `key` that must be at least `min`.
pub(super) fn at_least<T>(
    fields: &mut Fields<'_>,
    key: &'static str,
    min: T,
    default: T,
    errors: &mut Diagnostics,
) -> T
where
    T: FromNode + PartialOrd + Copy + std::fmt::Display + Bounded,
{
    ranged(fields, key, min..=T::MAX, default, errors)
}

/// The message for a number outside `min..=max`.
pub(super) fn out_of_range<T: PartialOrd + std::fmt::Display + Copy>(
    key: &str,
    value: T,
    min: T,
    max: T,
) -> String {
    if value < min {
        format!("`{key}`: must be at least {min}, found {value}")
    } else {
        format!("`{key}`: must be at most {max}, found {value}")
    }
}

/// The largest value of a number type, for [`at_least`].
pub(super) trait Bounded {
    const MAX: Self;
}

macro_rules! bounded {
    ($($t:ty),*) => {$(impl Bounded for $t { const MAX: Self = <$t>::MAX; })*};
}

bounded!(u8, u16, u32, u64);

/// An optional string under `key` that must not be blank.
pub(super) fn text(
    fields: &mut Fields<'_>,
    key: &'static str,
    errors: &mut Diagnostics,
) -> Option<String> {
    let (value, pos) = text_at(fields, key, errors)?;
    if value.trim().is_empty() {
        errors.push(pos, format!("`{key}`: must not be empty"));
        return None;
    }
    Some(value)
}
