//! A component's refusal, reported where the configuration says what it refused.

use crate::config::TagConfig;
use crate::runtime::CallError;
use crate::yaml::{Diagnostics, Pos};

/// Reports `error` of a codec (or rules) call about `tags`: each issue at the tag
/// (or the tag's address) it names, the others at `at`.
pub fn report_call(errors: &mut Diagnostics, error: &CallError, at: Pos, tags: &[&TagConfig]) {
    match error {
        CallError::Config { component, issues } => {
            for issue in issues {
                let (pos, what) = match issue.tag.and_then(|t| tags.get(t as usize)) {
                    Some(tag) if issue.key == "address" => {
                        (tag.address_pos, format!("tag `{}`", tag.spec.key))
                    }
                    Some(tag) => (tag.pos, format!("tag `{}`", tag.spec.key)),
                    None => (at, "channel".to_owned()),
                };
                errors.push(pos, format!("{what}: {component}: {}", issue.message));
            }
        }
        other => errors.push(at, other.to_string()),
    }
}
