//! A component's refusal, reported where the configuration says what it refused.

use crate::config::{ChannelConfig, TagConfig, TagPositions};
use crate::runtime::CallError;
use crate::yaml::Diagnostics;

/// Reports `error` of a codec's call about `channel`'s `tags`: each issue at
/// the tag (or the tag's address) it names, naming the tag, or at the value of
/// the channel setting it names, the others at the channel.
pub fn report_call(
    errors: &mut Diagnostics,
    error: &CallError,
    channel: &ChannelConfig,
    tags: &[(&TagConfig, TagPositions)],
) {
    match error {
        CallError::Config { component, issues } => {
            for issue in issues {
                let setting = channel.options.iter().find(|o| o.key == issue.key);
                let message = format!("{component}: {}", issue.message);
                match (issue.tag.and_then(|t| tags.get(t as usize)), setting) {
                    (Some((tag, written)), _) => {
                        let pos = if issue.key == "address" {
                            written.address
                        } else {
                            written.entry
                        };
                        let mark = errors.len();
                        errors.push(pos, message);
                        errors.name_since(mark, &format!("tag `{}`", tag.spec.key));
                    }
                    (None, Some(option)) => {
                        errors.push(option.value_pos, format!("`{}`: {message}", option.key));
                    }
                    (None, None) => errors.push(channel.pos, message),
                }
            }
        }
        other => errors.push(channel.pos, other.to_string()),
    }
}
