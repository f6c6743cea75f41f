//! Sparkplug B device commands (DCMD) as command requests: each metric write
//! becomes a `property/set` of the tag it names, by name or by alias, and goes
//! through the same checks, store and guarded write as any other command.

use crate::model::TagSpec;
use crate::mqtt::CommandRequest;
use crate::mqtt::sparkplug::{self, MetricRef};

/// The requests a DCMD payload for `device_id` (with tags `tags`) makes, or why
/// each metric cannot be one. `now` stands in for a payload without timestamp.
///
/// # Errors
/// The payload is not a readable DCMD.
pub fn requests(
    device_id: &str,
    tags: &[TagSpec],
    payload: &[u8],
    now: i64,
) -> Result<Vec<Result<CommandRequest, String>>, sparkplug::CommandError> {
    let command = sparkplug::device_command(payload)?;
    let stamp = if command.timestamp > 0 {
        command.timestamp.to_string()
    } else {
        now.to_string()
    };
    Ok(command
        .writes
        .into_iter()
        .map(|write| {
            let key = match &write.metric {
                MetricRef::Name(name) => tags.iter().find(|t| t.key == *name),
                MetricRef::Alias(alias) => tags
                    .iter()
                    .find(|t| sparkplug::alias(device_id, &t.key) == *alias),
            }
            .map(|tag| tag.key.to_string())
            .ok_or_else(|| match &write.metric {
                MetricRef::Name(name) => format!("device `{device_id}` has no metric `{name}`"),
                MetricRef::Alias(alias) => {
                    format!("device `{device_id}` has no metric with alias {alias}")
                }
            })?;
            // The same DCMD delivered again makes the same request id, which the
            // store takes once.
            Ok(CommandRequest {
                device_id: Some(device_id.to_owned()),
                request_id: Some(format!("spb:{device_id}:{key}:{stamp}")),
                key,
                value: write.value,
                realtime: true,
                function: false,
            })
        })
        .collect())
}
