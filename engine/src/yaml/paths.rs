//! JSON paths of a document's nodes (`$.channels[0].tags[1].address`), for the
//! problems of a document that came as JSON rather than as a file: each problem
//! is told by the path of the node it was found at.

use super::node::{Kind, Node};
use super::pos::Pos;

/// Every key's and value's position in a document, with its path, in order.
#[derive(Debug, Clone, Default)]
pub struct Paths(Vec<(Pos, String)>);

impl Paths {
    pub fn of(root: &Node) -> Self {
        let mut paths = Vec::new();
        walk(root, "$".to_owned(), &mut paths);
        paths.sort_by_key(|(pos, _)| *pos);
        Self(paths)
    }

    /// The path of the node at `pos`, or of the nearest one before it (a problem
    /// of a whole mapping is at the mapping's first position).
    pub fn at(&self, pos: Pos) -> &str {
        let after = self.0.partition_point(|(p, _)| *p <= pos);
        after
            .checked_sub(1)
            .and_then(|i| self.0.get(i))
            .map_or("$", |(_, path)| path.as_str())
    }
}

fn walk(node: &Node, path: String, paths: &mut Vec<(Pos, String)>) {
    match &node.kind {
        Kind::Map(entries) => {
            paths.push((node.pos, path.clone()));
            for (key, value) in entries {
                let child = format!("{path}.{}", key.name);
                paths.push((key.pos, child.clone()));
                walk(value, child, paths);
            }
        }
        Kind::Seq(items) => {
            paths.push((node.pos, path.clone()));
            for (i, item) in items.iter().enumerate() {
                walk(item, format!("{path}[{i}]"), paths);
            }
        }
        _ => paths.push((node.pos, path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse;

    #[test]
    fn every_node_of_a_json_document_has_its_path() {
        let text = "{\n  \"deviceId\": \"d\",\n  \"channels\": [\n    { \"channelId\": \"c\", \"tags\": [ { \"key\": \"t\", \"address\": \"99999\" } ] }\n  ]\n}";
        let root = parse("push", text).expect("JSON is YAML");
        let paths = Paths::of(&root);
        let at = |line: u32, column: u32| paths.at(Pos { line, column }).to_owned();
        assert_eq!(at(2, 3), "$.deviceId");
        assert_eq!(at(2, 15), "$.deviceId");
        assert_eq!(at(4, 7), "$.channels[0].channelId");
        assert_eq!(at(4, 53), "$.channels[0].tags[0].address");
        assert_eq!(at(4, 64), "$.channels[0].tags[0].address");
        assert_eq!(at(1, 1), "$");
        assert_eq!(Paths::default().at(Pos { line: 9, column: 9 }), "$");
    }
}
