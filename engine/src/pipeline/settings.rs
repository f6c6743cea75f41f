//! Component settings from YAML: a mapping flattened to scalar key/value pairs,
//! each remembering where it was written so a component's complaint about a key
//! can be reported at that key.

use crate::model::{Setting, SettingValue};
use crate::yaml::{Diagnostics, Kind, Node, Pos};

/// Settings and the position of each key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PositionedSettings {
    pub settings: Vec<Setting>,
    pub positions: Vec<Pos>,
}

impl PositionedSettings {
    /// Where `key` was written, if it was.
    pub fn position_of(&self, key: &str) -> Option<Pos> {
        self.settings
            .iter()
            .position(|s| s.key == key)
            .map(|i| self.positions[i])
    }
}

/// Flattens `node` (a mapping) into settings: nested mappings join keys with `.`,
/// list items get their index (`keys.0`).
pub fn flatten(node: &Node, errors: &mut Diagnostics) -> PositionedSettings {
    let mut out = PositionedSettings::default();
    match &node.kind {
        Kind::Map(_) => walk(node, "", node.pos, &mut out, errors),
        Kind::Null => {}
        other => errors.push(
            node.pos,
            format!("settings: expected a mapping, found {}", other.describe()),
        ),
    }
    out
}

fn walk(
    node: &Node,
    prefix: &str,
    key_pos: Pos,
    out: &mut PositionedSettings,
    errors: &mut Diagnostics,
) {
    let join = |name: &str| {
        if prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{prefix}.{name}")
        }
    };
    let value = match &node.kind {
        Kind::Map(entries) => {
            for (key, child) in entries {
                walk(child, &join(&key.name), key.pos, out, errors);
            }
            return;
        }
        Kind::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, &join(&i.to_string()), item.pos, out, errors);
            }
            return;
        }
        Kind::Null => {
            errors.push(node.pos, format!("setting `{prefix}` has no value"));
            return;
        }
        Kind::Bool(v) => SettingValue::Bool(*v),
        Kind::Int(v) => SettingValue::Int(*v),
        Kind::Float(v) => SettingValue::Float(*v),
        Kind::Str(v) => SettingValue::Text(v.clone()),
    };
    out.settings.push(Setting {
        key: prefix.to_owned(),
        value,
    });
    out.positions.push(key_pos);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse;

    #[test]
    fn nested_mappings_and_lists_flatten_with_positions() {
        let node = parse(
            "t.yaml",
            "a: 1\nlimits:\n  high: 2.5\nkeys: [x, y]\nenabled: true\n",
        )
        .expect("valid yaml");
        let mut errors = Diagnostics::new("t.yaml");
        let flat = flatten(&node, &mut errors);
        assert!(errors.is_empty(), "{errors}");
        let keys: Vec<_> = flat.settings.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(keys, ["a", "limits.high", "keys.0", "keys.1", "enabled"]);
        assert_eq!(flat.settings[1].value, SettingValue::Float(2.5));
        assert_eq!(
            flat.position_of("limits.high"),
            Some(Pos { line: 3, column: 3 })
        );
    }

    #[test]
    fn a_key_without_value_is_an_error() {
        let node = parse("t.yaml", "a:\n").expect("valid yaml");
        let mut errors = Diagnostics::new("t.yaml");
        flatten(&node, &mut errors);
        assert_eq!(errors.len(), 1);
    }
}
