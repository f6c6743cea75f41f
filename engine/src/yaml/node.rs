//! A YAML tree whose every node and key knows its position.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

use super::diagnostics::Diagnostics;
use super::pos::Pos;

/// Nodes a document may hold: room for 10,000 devices of 100 tags.
const MAX_NODES: usize = 20_000_000;
/// The deepest nesting a document may have, of block and of flow collections
/// each. A configuration needs about ten levels; reading a nested value recurses,
/// so a document hundreds of levels deep (a hostile `config/push`) could
/// otherwise exhaust a thread's stack.
const MAX_DEPTH: usize = 32;

/// A mapping key and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub pos: Pos,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Key, Node)>),
}

impl Kind {
    /// What the node is, in words for error messages.
    pub fn describe(&self) -> &'static str {
        match self {
            Kind::Null => "nothing",
            Kind::Bool(_) => "a boolean",
            Kind::Int(_) => "an integer",
            Kind::Float(_) => "a number",
            Kind::Str(_) => "a string",
            Kind::Seq(_) => "a list",
            Kind::Map(_) => "a mapping",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub pos: Pos,
    pub kind: Kind,
}

impl Node {
    pub fn as_map(&self) -> Option<&[(Key, Node)]> {
        match &self.kind {
            Kind::Map(entries) => Some(entries),
            _ => None,
        }
    }

    pub fn as_seq(&self) -> Option<&[Node]> {
        match &self.kind {
            Kind::Seq(items) => Some(items),
            _ => None,
        }
    }
}

/// Parses one YAML document. An empty document is a null node.
///
/// # Errors
/// A syntax error, at the position the parser reports (for bad indentation that is
/// the line before or the parent mapping, which the message says).
pub fn parse(file: &str, text: &str) -> Result<Node, Diagnostics> {
    if text.trim().is_empty() {
        return Ok(Node {
            pos: Pos { line: 1, column: 1 },
            kind: Kind::Null,
        });
    }
    // The parser's default budget (250,000 nodes) is far below a gateway of 1,000
    // devices x 100 tags; raise the size limits, keep the other protections.
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_nodes: MAX_NODES,
            max_events: 4 * MAX_NODES,
            max_depth: MAX_DEPTH,
            flow_nesting_limit: MAX_DEPTH,
        },
    };
    serde_saphyr::from_str_with_options::<Node>(text, options).map_err(|error| {
        let pos = error.location().map(Pos::from).unwrap_or_default();
        let mut diagnostics = Diagnostics::new(file);
        let detail = first_line(&error.to_string());
        diagnostics.push(
            pos,
            format!("YAML syntax: {detail} (for an indentation mistake, look at this line and the ones below it)"),
        );
        diagnostics
    })
}

/// serde-saphyr renders a source snippet after the message; keep the message only.
fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or(text).trim().to_owned()
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<Kind>::deserialize(deserializer)?;
        Ok(Node {
            pos: spanned.referenced.into(),
            kind: spanned.value,
        })
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(KindVisitor)
    }
}

struct KindVisitor;

impl<'de> Visitor<'de> for KindVisitor {
    type Value = Kind;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Kind, E> {
        Ok(Kind::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Kind, E> {
        Ok(Kind::Int(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Kind, E> {
        Ok(i64::try_from(v).map_or(Kind::Float(v as f64), Kind::Int))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Kind, E> {
        Ok(Kind::Float(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Kind, E> {
        Ok(Kind::Str(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Kind, E> {
        Ok(Kind::Str(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Kind, E> {
        Ok(Kind::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Kind, E> {
        Ok(Kind::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Kind, D::Error> {
        Kind::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Kind, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(Kind::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Kind, A::Error> {
        let mut entries: Vec<(Key, Node)> = Vec::new();
        while let Some(key) = map.next_key::<Node>()? {
            let name = match key.kind {
                Kind::Str(s) => s,
                Kind::Int(i) => i.to_string(),
                Kind::Bool(b) => b.to_string(),
                other => {
                    return Err(de::Error::custom(format!(
                        "a mapping key must be a plain name, not {}",
                        other.describe()
                    )));
                }
            };
            if entries.iter().any(|(k, _)| k.name == name) {
                return Err(de::Error::custom(format!("duplicate key `{name}`")));
            }
            let value = map.next_value::<Node>()?;
            entries.push((Key { pos: key.pos, name }, value));
        }
        Ok(Kind::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_nested_too_deep_is_refused_without_exhausting_the_stack() {
        let ok = format!(
            "{}1{}",
            "[".repeat(MAX_DEPTH - 1),
            "]".repeat(MAX_DEPTH - 1)
        );
        assert!(parse("f.yaml", &ok).is_ok());
        let mut block = String::new();
        for level in 0..40 {
            block.push_str(&format!("{}k{level}:\n", " ".repeat(level)));
        }
        let deep = [
            format!("{}1{}", "[".repeat(200), "]".repeat(200)),
            format!("{}{}", block, "[".repeat(MAX_DEPTH * 8)),
        ];
        for text in deep {
            let errors = parse("f.yaml", &text).expect_err("too deep");
            assert!(
                errors.items()[0].message.contains("YAML syntax"),
                "{errors:?}"
            );
        }
    }

    #[test]
    fn a_large_gateway_config_parses() {
        // 300 devices x 100 tags: about 270,000 nodes, above the parser's default budget.
        let mut text = String::from("devices:\n");
        for d in 0..300 {
            text.push_str(&format!("  - deviceId: d{d}\n    tags:\n"));
            for t in 0..100 {
                text.push_str(&format!(
                    "      - {{ key: t{t}, address: '4{t:04}', dataType: INT16, periodMs: 1000 }}\n"
                ));
            }
        }
        let root = parse("big.yaml", &text).expect("parses");
        let devices = root
            .as_map()
            .and_then(|m| m[0].1.as_seq())
            .map(<[Node]>::len);
        assert_eq!(devices, Some(300));
    }
}
