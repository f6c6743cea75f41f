//! The values a message holds at a decoder's pointers, found in one pass over
//! the text without building the document: the pointers make a tree of
//! reference tokens, the parser descends only into members and elements on
//! the way to one of them and skips (still checking) everything else, and a
//! value a pointer ends at is the only part built. Found values are what
//! `serde_json::Value::pointer` gives on the whole document, a member given
//! twice included (the later one counts).

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value as Json;

/// A decoder's pointers as a tree of reference tokens.
pub struct Pointers {
    root: Node,
    slots: usize,
}

#[derive(Default)]
struct Node {
    /// The slot of the pointer that ends here.
    ends: Option<usize>,
    children: Vec<Child>,
    /// Every slot at or below this node: emptied when its member comes again
    /// (left empty at the root, which comes once).
    below: Vec<usize>,
}

struct Child {
    /// The member's name (the reference token unescaped).
    token: String,
    /// The element the token names in an array, if it is an index.
    index: Option<usize>,
    node: Node,
}

impl Pointers {
    /// The tree of `pointers` (each already checked as a JSON Pointer) and
    /// the slot each one's value is found in; equal pointers share a slot.
    pub fn new<'a>(pointers: impl IntoIterator<Item = &'a str>) -> (Self, Vec<usize>) {
        let mut root = Node::default();
        let mut slots = 0;
        let mut of_each = Vec::new();
        for pointer in pointers {
            let mut node = &mut root;
            let mut path = Vec::new();
            for token in pointer.split('/').skip(1) {
                let token = unescape(token);
                let at = match node.children.iter().position(|c| c.token == token) {
                    Some(at) => at,
                    None => {
                        node.children.push(Child {
                            index: parse_index(&token),
                            token,
                            node: Node::default(),
                        });
                        node.children.len() - 1
                    }
                };
                path.push(at);
                node = &mut node.children[at].node;
            }
            let slot = *node.ends.get_or_insert_with(|| {
                slots += 1;
                slots - 1
            });
            if !of_each.contains(&slot) {
                // The document's root is met once: only its members' nodes
                // need their slots.
                let mut node = &mut root;
                for at in path {
                    node = &mut node.children[at].node;
                    node.below.push(slot);
                }
            }
            of_each.push(slot);
        }
        (Self { root, slots }, of_each)
    }

    /// The value at each slot's pointer in `text`, or why `text` is not JSON.
    pub fn find(&self, text: &str) -> Result<Vec<Option<Json>>, serde_json::Error> {
        let mut found = Vec::new();
        found.resize_with(self.slots, || None);
        let mut parser = serde_json::Deserializer::from_str(text);
        Seek {
            node: &self.root,
            found: &mut found,
        }
        .deserialize(&mut parser)?;
        parser.end()?;
        Ok(found)
    }
}

/// RFC 6901: `~1` is `/`, `~0` is `~`.
pub fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// An array index as a reference token writes it: digits, no leading zero.
fn parse_index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
        return None;
    }
    token.parse().ok()
}

/// The part of a document under `node`: filled into `found`.
struct Seek<'p> {
    node: &'p Node,
    found: &'p mut [Option<Json>],
}

impl<'de> DeserializeSeed<'de> for Seek<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, parser: D) -> Result<(), D::Error> {
        match self.node.ends {
            // A pointer ends here: the value is built, and pointers going
            // deeper are looked up in it.
            Some(slot) => {
                let value = Json::deserialize(parser)?;
                resolve(self.node, &value, self.found);
                self.found[slot] = Some(value);
                Ok(())
            }
            None => parser.deserialize_any(self),
        }
    }
}

/// Fills the slots below `node` from `value`, the value at `node`.
fn resolve(node: &Node, value: &Json, found: &mut [Option<Json>]) {
    for child in &node.children {
        let inner = match value {
            Json::Object(members) => members.get(&child.token),
            Json::Array(items) => child.index.and_then(|i| items.get(i)),
            _ => None,
        };
        if let Some(inner) = inner {
            if let Some(slot) = child.node.ends {
                found[slot] = Some(inner.clone());
            }
            resolve(&child.node, inner, found);
        }
    }
}

impl<'de> Visitor<'de> for Seek<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<(), A::Error> {
        let children = &self.node.children;
        while let Some(member) = members.next_key_seed(Member(children))? {
            match member {
                Some(at) => {
                    let node = &children[at].node;
                    for &slot in &node.below {
                        self.found[slot] = None;
                    }
                    members.next_value_seed(Seek {
                        node,
                        found: self.found,
                    })?;
                }
                None => {
                    members.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        let mut index = 0;
        loop {
            let child = self.node.children.iter().find(|c| c.index == Some(index));
            let more = match child {
                Some(child) => items
                    .next_element_seed(Seek {
                        node: &child.node,
                        found: self.found,
                    })?
                    .is_some(),
                None => items.next_element::<IgnoredAny>()?.is_some(),
            };
            if !more {
                return Ok(());
            }
            index += 1;
        }
    }

    // A value with nothing inside: no pointer goes deeper.
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
}

/// A member's name: the child it leads to, if any.
struct Member<'p>(&'p [Child]);

impl<'de> DeserializeSeed<'de> for Member<'_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, parser: D) -> Result<Option<usize>, D::Error> {
        parser.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Member<'_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member's name")
    }

    fn visit_str<E>(self, name: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|c| c.token == name))
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use serde_json::Value as Json;

    use super::Pointers;

    /// What `Value::pointer` finds at each pointer of the whole document.
    fn on_the_tree(pointers: &[&str], text: &str) -> Vec<Option<Json>> {
        let document: Json = serde_json::from_str(text).unwrap();
        pointers
            .iter()
            .map(|p| document.pointer(p).cloned())
            .collect()
    }

    fn in_one_pass(pointers: &[&str], text: &str) -> Vec<Option<Json>> {
        let (tree, slots) = Pointers::new(pointers.iter().copied());
        let found = tree.find(text).unwrap();
        slots.iter().map(|&slot| found[slot].clone()).collect()
    }

    #[test]
    fn finds_what_the_whole_document_holds_at_each_pointer() {
        let pointers = [
            "/t",
            "/sensors/0/rh",
            "/sensors/1",
            "/sensors/1/rh",
            "/sensors/01",
            "/sensors/x",
            "/a~1b",
            "/m~0n",
            "/deep/er/est",
            "/deep",
            "/deep/er",
            "/list/2",
            "/gone/away",
            "/t/inside",
            "/0",
            "/",
            "/t",
            "",
        ];
        let documents = [
            r#"{"t": 1.5, "sensors": [{"rh": 40}, {"rh": 41, "x": 1}], "a/b": true,
                "m~n": "text", "deep": {"er": {"est": [1, 2]}}, "list": [0, 1, {"k": null}],
                "0": "zero", "": "empty"}"#,
            // A member given twice: the later one counts, deeper ones too.
            r#"{"deep": {"er": {"est": 1}}, "t": 1, "deep": {"other": 2}, "t": 2}"#,
            r#"{"sensors": {"0": {"rh": 7}, "x": [1]}, "list": "no"}"#,
            r#"[1, 2, 3]"#,
            r#""just text""#,
            "null",
            r#"{"t": "\u0041\"b\\", "a\/b": 3, "s\u0065nsors": [{"rh": 1e3}]}"#,
        ];
        for text in documents {
            assert_eq!(
                in_one_pass(&pointers, text),
                on_the_tree(&pointers, text),
                "{text}"
            );
        }
    }

    #[test]
    fn a_message_that_is_not_json_is_refused_as_the_parser_words_it() {
        let (tree, _) = Pointers::new(["/t"]);
        for text in [
            "temp=21",
            r#"{"t": 1} trailing"#,
            r#"{"t": 1, "x": [1, }"#,
            r#"{"x": "\q"}"#,
            "",
        ] {
            let said = tree.find(text).err().map(|e| e.to_string());
            let expected = serde_json::from_str::<Json>(text)
                .err()
                .map(|e| e.to_string());
            assert!(said.is_some(), "{text}");
            assert_eq!(said, expected, "{text}");
        }
    }
}
