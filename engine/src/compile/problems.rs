//! A component's refusal, reported where the configuration says what it refused.

use crate::config::{TagConfig, TagPositions};
use crate::runtime::CallError;
use crate::yaml::{Diagnostics, Pos};

/// Reports `error` of a codec (or rules) call about `tags`: each issue at the tag
/// (or the tag's address) it names, the others at `at`.
pub fn report_call(
    errors: &mut Diagnostics,
    error: &CallError,
    at: Pos,
    tags: &[(&TagConfig, TagPositions)],
) {
    match error {
        CallError::Config { component, issues } => {
            for issue in issues {
                let (pos, what) = match issue.tag.and_then(|t| tags.get(t as usize)) {
                    Some((tag, written)) if issue.key == "address" => {
                        (written.address, format!("tag `{}`", tag.spec.key))
                    }
                    Some((tag, written)) => (written.entry, format!("tag `{}`", tag.spec.key)),
                    None => (at, "channel".to_owned()),
                };
                errors.push(pos, format!("{what}: {component}: {}", issue.message));
            }
        }
        other => errors.push(at, other.to_string()),
    }
}
