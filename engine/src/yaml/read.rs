//! Typed reading of a [`Node`] tree that records every problem and carries on.

use super::diagnostics::Diagnostics;
use super::node::{Key, Kind, Node};
use super::pos::Pos;

/// A value that can be read from one YAML node.
pub trait FromNode: Sized {
    /// # Errors
    /// A message saying what was expected and what was found.
    fn from_node(node: &Node) -> Result<Self, String>;
}

impl FromNode for String {
    fn from_node(node: &Node) -> Result<Self, String> {
        match &node.kind {
            Kind::Str(s) => Ok(s.clone()),
            // `port: 502` or `address: 40001` written without quotes.
            Kind::Int(i) => Ok(i.to_string()),
            other => Err(format!("expected a string, found {}", other.describe())),
        }
    }
}

impl FromNode for bool {
    fn from_node(node: &Node) -> Result<Self, String> {
        match node.kind {
            Kind::Bool(b) => Ok(b),
            ref other => Err(format!(
                "expected true or false, found {}",
                other.describe()
            )),
        }
    }
}

impl FromNode for f64 {
    fn from_node(node: &Node) -> Result<Self, String> {
        let value = match node.kind {
            Kind::Int(i) => i as f64,
            Kind::Float(f) => f,
            ref other => return Err(format!("expected a number, found {}", other.describe())),
        };
        if value.is_finite() {
            Ok(value)
        } else {
            Err("expected a finite number".to_owned())
        }
    }
}

macro_rules! integer_from_node {
    ($($t:ty),*) => {$(
        impl FromNode for $t {
            fn from_node(node: &Node) -> Result<Self, String> {
                match node.kind {
                    Kind::Int(i) => <$t>::try_from(i).map_err(|_| {
                        format!("{i} is out of range: expected {} to {}", <$t>::MIN, <$t>::MAX)
                    }),
                    ref other => Err(format!("expected an integer, found {}", other.describe())),
                }
            }
        }
    )*};
}

integer_from_node!(u8, u16, u32, u64, i64);

impl<T: FromNode> FromNode for Vec<T> {
    fn from_node(node: &Node) -> Result<Self, String> {
        let items = node
            .as_seq()
            .ok_or_else(|| format!("expected a list, found {}", node.kind.describe()))?;
        items.iter().map(T::from_node).collect()
    }
}

/// Reads a string naming one of `choices` (matched exactly, as the seed's YAML writes them).
///
/// # Errors
/// A message listing the accepted names.
pub fn enum_value<T: Copy>(node: &Node, choices: &[(&str, T)]) -> Result<T, String> {
    let names = || {
        choices
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(" | ")
    };
    match &node.kind {
        Kind::Str(s) => choices
            .iter()
            .find(|(name, _)| name == s)
            .map(|(_, v)| *v)
            .ok_or_else(|| format!("unknown value `{s}`: expected {}", names())),
        other => Err(format!(
            "expected one of {}, found {}",
            names(),
            other.describe()
        )),
    }
}

/// The keys of one mapping, read one by one; keys never read are reported as unknown.
pub struct Fields<'a> {
    what: &'static str,
    pos: Pos,
    entries: &'a [(Key, Node)],
    known: Vec<&'static str>,
}

impl<'a> Fields<'a> {
    /// Starts reading `node` as the mapping `what` ("device", "tag", ...); records an
    /// error and returns `None` when it is not a mapping.
    pub fn of(node: &'a Node, what: &'static str, errors: &mut Diagnostics) -> Option<Self> {
        match node.as_map() {
            Some(entries) => Some(Self {
                what,
                pos: node.pos,
                entries,
                known: Vec::new(),
            }),
            None => {
                errors.push(
                    node.pos,
                    format!("{what}: expected a mapping, found {}", node.kind.describe()),
                );
                None
            }
        }
    }

    /// Position of the mapping itself.
    pub fn pos(&self) -> Pos {
        self.pos
    }

    /// The node under `key`, if present; marks the key as known either way.
    pub fn node(&mut self, key: &'static str) -> Option<&'a Node> {
        self.entry(key).filter(|node| node.kind != Kind::Null)
    }

    /// The node under `key` as written, an explicit `null` included.
    pub fn entry(&mut self, key: &'static str) -> Option<&'a Node> {
        self.known.push(key);
        self.entries
            .iter()
            .find(|(k, _)| k.name == key)
            .map(|(_, node)| node)
    }

    /// The value under `key`; `None` (with an error recorded) when absent or invalid.
    pub fn required<T: FromNode>(
        &mut self,
        key: &'static str,
        errors: &mut Diagnostics,
    ) -> Option<T> {
        match self.node(key) {
            Some(node) => read(node, key, errors),
            None => {
                errors.push(
                    self.pos,
                    format!("{}: missing required key `{key}`", self.what),
                );
                None
            }
        }
    }

    /// The value under `key`; `None` when absent, or invalid (an error is then recorded).
    pub fn optional<T: FromNode>(
        &mut self,
        key: &'static str,
        errors: &mut Diagnostics,
    ) -> Option<T> {
        self.node(key).and_then(|node| read(node, key, errors))
    }

    /// A required value read by `parse`, with where it is written; a missing key
    /// is reported at the mapping.
    pub fn required_with<T>(
        &mut self,
        key: &'static str,
        errors: &mut Diagnostics,
        parse: impl FnOnce(&Node) -> Result<T, String>,
    ) -> Option<(T, Pos)> {
        let Some(pos) = self.node(key).map(|node| node.pos) else {
            // Absent: the standard "missing required key" error.
            let _ = self.required::<bool>(key, errors);
            return None;
        };
        self.optional_with(key, errors, parse)
            .map(|value| (value, pos))
    }

    /// Like [`Fields::optional`], with the value read by `parse`.
    pub fn optional_with<T>(
        &mut self,
        key: &'static str,
        errors: &mut Diagnostics,
        parse: impl FnOnce(&Node) -> Result<T, String>,
    ) -> Option<T> {
        let node = self.node(key)?;
        match parse(node) {
            Ok(value) => Some(value),
            Err(message) => {
                errors.push(node.pos, format!("`{key}`: {message}"));
                None
            }
        }
    }

    /// The entries no reader asked for, for a reader that takes keys it cannot
    /// name in advance (a protocol's settings): it reports those it refuses,
    /// so nothing is left to [`Fields::finish`].
    pub fn rest(self) -> Vec<&'a (Key, Node)> {
        self.entries
            .iter()
            .filter(|(key, _)| !self.known.contains(&key.name.as_str()))
            .collect()
    }

    /// Reports every key that no reader asked for.
    pub fn finish(self, errors: &mut Diagnostics) {
        for (key, _) in self.entries {
            if !self.known.contains(&key.name.as_str()) {
                let mut expected = self.known.clone();
                expected.sort_unstable();
                expected.dedup();
                errors.push(
                    key.pos,
                    format!(
                        "unknown key `{}` in {}; expected one of: {}",
                        key.name,
                        self.what,
                        expected.join(", ")
                    ),
                );
            }
        }
    }
}

fn read<T: FromNode>(node: &Node, key: &str, errors: &mut Diagnostics) -> Option<T> {
    match T::from_node(node) {
        Ok(value) => Some(value),
        Err(message) => {
            errors.push(node.pos, format!("`{key}`: {message}"));
            None
        }
    }
}
