//! Files of signing keys (`collector.downlink.operatorKeyFile`, a tenant's
//! `downlinkKeyFile`): one key per line, blank lines and `#` comments ignored,
//! each at least [`MIN_KEY_BYTES`] long. Several lines let a key be rotated: a
//! message signed with any of them verifies. A relative path is taken from the
//! configuration file's directory; `{ env: NAME }` instead of a path takes
//! the same lines from an environment variable. The keys themselves never
//! appear in a diagnostic or a log.

use std::path::{Path, PathBuf};

use super::read::text_at;
use crate::model::Secret;
use crate::yaml::{Diagnostics, Fields, Pos};

/// The shortest key accepted, in bytes (`openssl rand -hex 32` makes 64).
pub const MIN_KEY_BYTES: usize = 16;

/// Where a key file's lines come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A file, its path as written.
    File(PathBuf),
    /// An environment variable (`{ env: NAME }`).
    Env(String),
}

/// A key file named in the configuration, and the keys read from it.
#[derive(Debug, Clone)]
pub struct KeyFile {
    pub source: KeySource,
    /// Where it is written.
    pub pos: Pos,
    /// Its keys, once read (see [`KeyFile::load`]).
    pub keys: Vec<Secret>,
}

/// Both name the same file with the same keys, wherever in the file they stand.
impl PartialEq for KeyFile {
    fn eq(&self, other: &Self) -> bool {
        (&self.source, &self.keys) == (&other.source, &other.keys)
    }
}

impl KeyFile {
    /// The key file named under `key`, if any (its keys are read later).
    pub(super) fn read(
        fields: &mut Fields<'_>,
        key: &'static str,
        errors: &mut Diagnostics,
    ) -> Option<Self> {
        if let Some(node) = fields.node(key)
            && node.as_map().is_some()
        {
            let mut f = Fields::of(node, "key source", errors)?;
            let name = f.required::<String>("env", errors);
            f.finish(errors);
            return name.map(|name| Self {
                source: KeySource::Env(name),
                pos: node.pos,
                keys: Vec::new(),
            });
        }
        let (path, pos) = text_at(fields, key, errors)?;
        if path.trim().is_empty() {
            errors.push(pos, format!("`{key}`: must not be empty"));
            return None;
        }
        Some(Self {
            source: KeySource::File(PathBuf::from(path)),
            pos,
            keys: Vec::new(),
        })
    }

    /// Reads the keys, a file's path taken from `base` when relative.
    pub(super) fn load(&mut self, base: &Path, errors: &mut Diagnostics) {
        let read = match &self.source {
            KeySource::File(path) => read_keys(&base.join(path)),
            KeySource::Env(name) => match std::env::var(name) {
                Ok(text) => {
                    parse(&text).map_err(|m| format!("the environment variable `{name}`: {m}"))
                }
                Err(_) => Err(format!(
                    "the environment variable `{name}` is not set (or not UTF-8)"
                )),
            },
        };
        match read {
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

    #[test]
    fn keys_come_from_the_environment_too() {
        use super::super::tests::{errors_of, load_ok};
        // A variable every test process has (setting one needs `unsafe`).
        let path = std::env::var("PATH").expect("PATH");
        let config = load_ok("collector:\n  downlink: { operatorKeyFile: { env: PATH } }\n");
        let keys = config.collector.downlink.operator_keys.expect("keys");
        assert_eq!(keys.source, KeySource::Env("PATH".into()));
        assert_eq!(keys.keys.len(), 1);
        assert_eq!(keys.keys[0].expose(), path.trim());
        let text = errors_of(
            "collector:\n  downlink: { operatorKeyFile: { env: SLUICE_TEST_NO_KEYS } }\n",
        )
        .to_string();
        assert!(
            text.contains("the environment variable `SLUICE_TEST_NO_KEYS` is not set"),
            "{text}"
        );
    }
}
