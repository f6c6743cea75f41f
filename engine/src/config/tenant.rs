//! The `tenants` section: who may use the HTTP API for which devices, which rules
//! component evaluates their alarms, and who is told of them (with quiet hours).
//!
//! ```yaml
//! tenants:
//!   - tenantId: 1
//!     name: plant-a
//!     tokens: [s3cret]
//!     rules: alarm_rules          # default
//!     recipients:
//!       - { name: night-shift, quietHours: "22:00-07:00", utcOffset: "+08:00" }
//! ```

use std::collections::HashMap;
use std::path::Path;

use super::alarms::{parse_clock, parse_offset, text_of};
use super::fence::{self, FenceEntry};
use super::keyfile::KeyFile;
use super::read::{Unique, at_least, list, ranged, required_at, required_text, text};
use super::secret_text::secret_of;
use crate::yaml::{Diagnostics, Fields, Node, Pos};

/// The rules component a tenant gets unless it names another.
pub const DEFAULT_RULES: &str = "alarm_rules";

/// One entry of `tenants`.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantConfig {
    /// `tenantId`: the number devices name in their own `tenantId` (not 0, which means
    /// "no tenant"); unique.
    pub tenant_id: u32,
    /// `name`: a label for people and logs.
    pub name: String,
    /// `tokens`: bearer tokens that act for this tenant; unique across all tenants.
    pub tokens: Vec<String>,
    /// `rules`: the registered rules component that evaluates this tenant's alarm
    /// rules, in the tenant's own sandbox (default `alarm_rules`).
    pub rules: String,
    /// `recipients`: who is told of the tenant's alarms.
    pub recipients: Vec<RecipientConfig>,
    /// `limits`: the sandbox of the tenant's components.
    pub limits: TenantLimits,
    /// `pipeline`: the pipeline of the tenant's devices that name none (and whose
    /// product names none).
    pub pipeline: Option<String>,
    /// `downlinkKeyFile`: the tenant's keys; a downlink message for one of its
    /// devices signed with one of them acts for the tenant.
    pub downlink_keys: Option<KeyFile>,
    /// `fence`: the endpoints the tenant's devices may reach; none: wherever
    /// the operator's file puts them, and pushes cannot move them.
    pub fence: Option<Vec<FenceEntry>>,
    /// Where the entry starts.
    pub pos: Pos,
}

impl TenantConfig {
    /// Whether both say the same of the tenant, wherever in the file they stand.
    pub fn same_as(&self, other: &TenantConfig) -> bool {
        let at = |tenant: &TenantConfig| TenantConfig {
            pos: Pos::default(),
            ..tenant.clone()
        };
        at(self) == at(other)
    }
}

/// A tenant's `limits`: each of its component instances gets this much.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TenantLimits {
    /// `memoryMb`: memory cap of each instance (default 64).
    pub memory_mb: u64,
    /// `fuelPerCall`: CPU budget of each call, in fuel units, about one per wasm
    /// instruction (default 20,000,000).
    pub fuel_per_call: u64,
    /// `instances`: instances (stores) per component; devices spread over them
    /// (default 1).
    pub instances: u32,
    /// `quarantineAfter`: failed calls in a row (traps, budgets, memory caps) after
    /// which a component's instances are quarantined (default 10).
    pub quarantine_after: u32,
    /// `quarantineSeconds`: how long a quarantine refuses calls (default 60).
    pub quarantine_seconds: u64,
}

impl Default for TenantLimits {
    fn default() -> Self {
        Self {
            memory_mb: 64,
            fuel_per_call: 20_000_000,
            instances: 1,
            quarantine_after: 10,
            quarantine_seconds: 60,
        }
    }
}

fn read_limits(node: &Node, errors: &mut Diagnostics) -> TenantLimits {
    let d = TenantLimits::default();
    let Some(mut f) = Fields::of(node, "limits", errors) else {
        return d;
    };
    let limits = TenantLimits {
        memory_mb: ranged(&mut f, "memoryMb", 1..=4096, d.memory_mb, errors),
        fuel_per_call: at_least(&mut f, "fuelPerCall", 1000, d.fuel_per_call, errors),
        instances: ranged(&mut f, "instances", 1..=64, d.instances, errors),
        quarantine_after: at_least(&mut f, "quarantineAfter", 1, d.quarantine_after, errors),
        quarantine_seconds: ranged(
            &mut f,
            "quarantineSeconds",
            1..=86_400,
            d.quarantine_seconds,
            errors,
        ),
    };
    f.finish(errors);
    limits
}

/// One entry of a tenant's `recipients`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecipientConfig {
    /// `name`: who this is.
    pub name: String,
    /// `quietHours`: `"HH:MM-HH:MM"`, local time; may wrap midnight.
    pub quiet_hours: Option<(u16, u16)>,
    /// `utcOffset`: the recipient's local time (default `collector.alarms.utcOffset`).
    pub utc_offset_min: Option<i16>,
}

pub(super) fn read_all(node: &Node, base: &Path, errors: &mut Diagnostics) -> Vec<TenantConfig> {
    let mut ids: HashMap<u32, Pos> = HashMap::new();
    let mut tokens = Unique::default();
    let mut tenants = Vec::new();
    for item in list(node, "tenants", errors) {
        let Some(mut fields) = Fields::of(item, "tenant", errors) else {
            continue;
        };
        let tenant_id = required_at::<u32>(&mut fields, "tenantId", errors);
        if let Some((id, pos)) = tenant_id {
            if id == 0 {
                errors.push(
                    pos,
                    "`tenantId`: 0 is reserved for devices without a tenant; use 1 or more",
                );
            } else if let Some(first) = ids.get(&id) {
                errors.push(pos, format!("duplicate tenantId {id} (first at {first})"));
            } else {
                ids.insert(id, pos);
            }
        }
        let name = required_text(&mut fields, "name", errors);
        if let Some((name, pos)) = &name
            && name.trim().is_empty()
        {
            errors.push(*pos, "`name`: must not be empty");
        }
        let tenant_tokens = fields
            .node("tokens")
            .map(|node| read_tokens(node, &mut tokens, base, errors))
            .unwrap_or_default();
        let rules = text(&mut fields, "rules", errors).unwrap_or_else(|| DEFAULT_RULES.to_owned());
        let recipients = fields
            .node("recipients")
            .map(|node| read_recipients(node, errors))
            .unwrap_or_default();
        let limits = fields
            .node("limits")
            .map_or_else(TenantLimits::default, |node| read_limits(node, errors));
        let pipeline = text(&mut fields, "pipeline", errors);
        let downlink_keys = KeyFile::read(&mut fields, "downlinkKeyFile", errors);
        let fence = fields.node("fence").map(|node| fence::read(node, errors));
        fields.finish(errors);
        // Kept even when `name` is wrong, so devices naming the tenant are not also
        // reported.
        if let Some((tenant_id, _)) = tenant_id {
            tenants.push(TenantConfig {
                tenant_id,
                name: name.map(|(name, _)| name).unwrap_or_default(),
                tokens: tenant_tokens,
                rules,
                recipients,
                limits,
                pipeline,
                downlink_keys,
                fence,
                pos: item.pos,
            });
        }
    }
    tenants
}

/// A list of bearer tokens, each non-empty and not given before (in `seen`).
pub(super) fn read_tokens(
    node: &Node,
    seen: &mut Unique,
    base: &Path,
    errors: &mut Diagnostics,
) -> Vec<String> {
    let mut tokens = Vec::new();
    for token_node in list(node, "tokens", errors) {
        match secret_of(token_node, "tokens", base, errors) {
            Some(token) if token.trim().is_empty() => {
                errors.push(token_node.pos, "`tokens`: a token must not be empty");
            }
            Some(token) => {
                if let Some(first) = seen.first(&token, token_node.pos) {
                    errors.push(
                        token_node.pos,
                        format!("`tokens`: this token is already given at {first}"),
                    );
                }
                tokens.push(token);
            }
            None => {}
        }
    }
    tokens
}

fn read_recipients(node: &Node, errors: &mut Diagnostics) -> Vec<RecipientConfig> {
    let mut recipients = Vec::new();
    for item in list(node, "recipients", errors) {
        let Some(mut f) = Fields::of(item, "recipient", errors) else {
            continue;
        };
        let name = required_text(&mut f, "name", errors).map(|(name, _)| name);
        let quiet_hours = f.optional_with("quietHours", errors, |n| parse_window(&text_of(n)?));
        let utc_offset_min = f.optional_with("utcOffset", errors, |n| parse_offset(&text_of(n)?));
        f.finish(errors);
        if let Some(name) = name {
            recipients.push(RecipientConfig {
                name,
                quiet_hours,
                utc_offset_min,
            });
        }
    }
    recipients
}

/// `"22:00-07:00"` -> (start, end) in minutes after midnight.
fn parse_window(text: &str) -> Result<(u16, u16), String> {
    let (start, end) = text
        .split_once('-')
        .ok_or_else(|| format!("`{text}` is not a window: write it as HH:MM-HH:MM"))?;
    let window = (parse_clock(start.trim())?, parse_clock(end.trim())?);
    if window.0 == window.1 {
        return Err(format!("`{text}`: the window is empty (start equals end)"));
    }
    Ok(window)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows() {
        assert_eq!(parse_window("22:00-07:00"), Ok((1320, 420)));
        assert_eq!(parse_window("12:00 - 13:30"), Ok((720, 810)));
        assert!(parse_window("22:00").is_err());
        assert!(parse_window("07:00-07:00").is_err());
    }

    #[test]
    fn a_tenant_with_rules_and_recipients() {
        let text = "tenants:\n  - tenantId: 3\n    name: t\n    rules: my_rules\n    recipients:\n      - { name: ops, quietHours: '22:00-06:00', utcOffset: '+01:00' }\n      - { name: bad, quietHours: '25:00-06:00' }\n";
        let errors = crate::config::tests::load_str("t.yaml", text).expect_err("bad window");
        let rendered = errors.to_string();
        assert!(rendered.contains("t.yaml:7:"), "{rendered}");
        assert!(rendered.contains("not a time of day"), "{rendered}");
        let good = text.replace("25:00", "23:00");
        let config = crate::config::tests::load_str("t.yaml", &good).expect("valid");
        let tenant = &config.tenants[0];
        assert_eq!(tenant.rules, "my_rules");
        assert_eq!(tenant.recipients[0].quiet_hours, Some((1320, 360)));
        assert_eq!(tenant.recipients[0].utc_offset_min, Some(60));
        assert_eq!(tenant.recipients[1].utc_offset_min, None);
        assert_eq!(tenant.limits, TenantLimits::default());
    }

    #[test]
    fn limits_are_read_and_bounded() {
        let text = "tenants:\n  - tenantId: 1\n    name: t\n    limits: { memoryMb: 16, fuelPerCall: 5000000, instances: 4, quarantineAfter: 1000, quarantineSeconds: 5 }\n";
        let config = crate::config::tests::load_str("t.yaml", text).expect("valid");
        let limits = config.tenants[0].limits;
        assert_eq!(
            (
                limits.memory_mb,
                limits.fuel_per_call,
                limits.instances,
                limits.quarantine_after,
                limits.quarantine_seconds
            ),
            (16, 5_000_000, 4, 1000, 5)
        );
        let bad = text
            .replace("instances: 4", "instances: 0")
            .replace("memoryMb: 16", "memoryMb: 99999")
            .replace("quarantineAfter: 1000", "quarantineAfter: 0")
            .replace("quarantineSeconds: 5", "quarantineSeconds: 0");
        let rendered = crate::config::tests::load_str("t.yaml", &bad)
            .expect_err("out of range")
            .to_string();
        for key in [
            "memoryMb",
            "instances",
            "quarantineAfter",
            "quarantineSeconds",
        ] {
            assert!(rendered.contains(&format!("`{key}`")), "{rendered}");
        }
    }
}
