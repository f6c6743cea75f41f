//! The configuration's secrets: files of signing keys and the API's tokens.
//!
//! A key file (`collector.downlink.operatorKeyFile`, a tenant's
//! `downlinkKeyFile`) holds one key per line, blank lines and `#` comments
//! ignored, each at least [`MIN_KEY_BYTES`] long. Several lines let a key be
//! rotated: a message signed with any of them verifies. A relative path is
//! taken from the configuration file's directory. The keys themselves never
//! appear in a diagnostic or a log.
//!
//! One secret must not stand for two parties: the admin token, the tenants'
//! tokens and the node tokens are all different, and so are the operator's and
//! the tenants' keys (a tenant holding the operator's secret would have the
//! operator's rights).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::GatewayConfig;
use super::read::text_at;
use crate::model::Secret;
use crate::yaml::{Diagnostics, Fields, Pos};

/// The shortest key accepted, in bytes (`openssl rand -hex 32` makes 64).
pub const MIN_KEY_BYTES: usize = 16;

/// A key file named in the configuration, and the keys read from it.
#[derive(Debug, Clone)]
pub struct KeyFile {
    /// The path as written.
    pub path: PathBuf,
    /// Where it is written.
    pub pos: Pos,
    /// Its keys, once read (see [`KeyFile::load`]).
    pub keys: Vec<Secret>,
}

/// Both name the same file with the same keys, wherever in the file they stand.
impl PartialEq for KeyFile {
    fn eq(&self, other: &Self) -> bool {
        (&self.path, &self.keys) == (&other.path, &other.keys)
    }
}

impl KeyFile {
    /// The key file named under `key`, if any (its keys are read later).
    pub(super) fn read(
        fields: &mut Fields<'_>,
        key: &'static str,
        errors: &mut Diagnostics,
    ) -> Option<Self> {
        let (path, pos) = text_at(fields, key, errors)?;
        if path.trim().is_empty() {
            errors.push(pos, format!("`{key}`: must not be empty"));
            return None;
        }
        Some(Self {
            path: PathBuf::from(path),
            pos,
            keys: Vec::new(),
        })
    }

    /// Reads the keys, the path taken from `base` when relative.
    pub(super) fn load(&mut self, base: &Path, errors: &mut Diagnostics) {
        match read_keys(&base.join(&self.path)) {
            Ok(keys) => self.keys = keys,
            Err(message) => errors.push(self.pos, message),
        }
    }
}

/// The keys of the key file at `path`.
///
/// # Errors
/// A file that cannot be read, holds no key or a key too short to sign with;
/// the message names the file, never a key.
pub fn read_keys(path: &Path) -> Result<Vec<Secret>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read the key file {}: {error}", path.display()))?;
    parse(&text).map_err(|message| format!("{}: {message}", path.display()))
}

/// Reads every key file of `config` (relative paths from `base`) and checks
/// that no secret stands for two parties.
pub(super) fn load(config: &mut GatewayConfig, base: &Path, errors: &mut Diagnostics) {
    let files = config.collector.downlink.operator_keys.iter_mut().chain(
        config
            .tenants
            .iter_mut()
            .filter_map(|t| t.downlink_keys.as_mut()),
    );
    for file in files {
        file.load(base, errors);
    }
    distinct_keys(config, errors);
    distinct_tokens(config, errors);
}

/// The operator's and each tenant's keys are all different.
fn distinct_keys(config: &GatewayConfig, errors: &mut Diagnostics) {
    let mut owners: HashMap<&str, String> = HashMap::new();
    let operator = config
        .collector
        .downlink
        .operator_keys
        .iter()
        .map(|f| ("the operator".to_owned(), f));
    let tenants = config.tenants.iter().filter_map(|t| {
        t.downlink_keys
            .as_ref()
            .map(|f| (format!("tenant {}", t.tenant_id), f))
    });
    for (owner, file) in operator.chain(tenants) {
        for key in &file.keys {
            match owners.get(key.expose()) {
                Some(first) if *first != owner => errors.push(
                    file.pos,
                    format!(
                        "a key of this file is also {first}'s: each party needs keys of its own"
                    ),
                ),
                _ => {
                    owners.insert(key.expose(), owner.clone());
                }
            }
        }
    }
}

/// The admin token, the tenants' tokens, the node tokens and the metrics token
/// are all different (tenants' tokens among themselves, and node tokens among
/// themselves, are checked where they are read).
fn distinct_tokens(config: &GatewayConfig, errors: &mut Diagnostics) {
    let Some(http) = &config.collector.http else {
        return;
    };
    let tenant_of = |token: &str| {
        config
            .tenants
            .iter()
            .find(|t| t.tokens.iter().any(|own| own == token))
            .map(|t| t.tenant_id)
    };
    if let Some(admin) = &http.admin_token {
        if let Some(tenant) = tenant_of(admin) {
            errors.push(
                http.admin_token_pos,
                format!("`adminToken` is also a token of tenant {tenant}, which would have the admin's rights"),
            );
        }
        if http.node_tokens.iter().any(|n| n.token == *admin) {
            errors.push(
                http.admin_token_pos,
                "`adminToken` is also a node token: give the nodes tokens of their own",
            );
        }
    }
    for node in &http.node_tokens {
        if let Some(tenant) = tenant_of(&node.token) {
            errors.push(
                node.pos,
                format!(
                    "the token of node `{}` is also a token of tenant {tenant}",
                    node.node_id
                ),
            );
        }
    }
    if let Some(metrics) = &http.metrics_token {
        let taken = http.admin_token.as_ref() == Some(metrics)
            || tenant_of(metrics).is_some()
            || http.node_tokens.iter().any(|n| n.token == *metrics);
        if taken {
            errors.push(
                http.metrics_token_pos,
                "`metricsToken` is also another token: it may only read /metrics, so it must be its own",
            );
        }
    }
}

/// The keys of a key file's text.
fn parse(text: &str) -> Result<Vec<Secret>, String> {
    let mut keys = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.len() < MIN_KEY_BYTES {
            return Err(format!(
                "the key on line {} is {} bytes long; a key needs at least {MIN_KEY_BYTES} \
                 (make one with `openssl rand -hex 32`)",
                number + 1,
                line.len()
            ));
        }
        keys.push(Secret::new(line));
    }
    if keys.is_empty() {
        return Err("holds no key (one per line; `#` starts a comment)".to_owned());
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_lines_and_short_ones_are_refused_without_being_shown() {
        let keys = parse("# rotated 2026-12\n0123456789abcdef0123\n\n  fedcba9876543210fedc  \n")
            .expect("two keys");
        assert_eq!(
            keys.iter().map(Secret::expose).collect::<Vec<_>>(),
            ["0123456789abcdef0123", "fedcba9876543210fedc"]
        );
        let short = parse("0123456789abcdef0123\nshort-secret\n").expect_err("too short");
        assert!(
            short.contains("line 2") && !short.contains("short-secret"),
            "{short}"
        );
        assert!(parse("# nothing\n\n").is_err());
    }
}
