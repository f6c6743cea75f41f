//! Secrets kept out of the configuration file: a password or a token may be
//! written in place, or as `{ file: PATH }` (the file's text, a relative PATH
//! from the configuration file's directory) or `{ env: NAME }` (an
//! environment variable). A diagnostic names where the secret was to come
//! from, never the secret.

use std::path::Path;

use crate::yaml::{Diagnostics, Fields, Kind, Node, Pos};

/// The secret under `key`, with where it is written.
pub(super) fn secret_at(
    f: &mut Fields<'_>,
    key: &'static str,
    base: &Path,
    errors: &mut Diagnostics,
) -> Option<(String, Pos)> {
    let node = f.node(key)?;
    secret_of(node, key, base, errors).map(|secret| (secret, node.pos))
}

/// The secret `node` gives for `what`: in place, from a file or from the
/// environment; `None` (with the problem in `errors`) when it cannot be had.
pub(super) fn secret_of(
    node: &Node,
    what: &str,
    base: &Path,
    errors: &mut Diagnostics,
) -> Option<String> {
    match &node.kind {
        Kind::Str(text) => Some(text.clone()),
        Kind::Map(_) => {
            let mut f = Fields::of(node, "secret", errors)?;
            let file = f.optional::<String>("file", errors);
            let env = f.optional::<String>("env", errors);
            f.finish(errors);
            let found = match (file, env) {
                (Some(path), None) => from_file(&base.join(&path)),
                (None, Some(name)) => std::env::var(&name).map_err(|_| {
                    format!("the environment variable `{name}` is not set (or not UTF-8)")
                }),
                _ => Err("write the secret, `{ file: PATH }` or `{ env: NAME }`".to_owned()),
            };
            match found {
                Ok(secret) if secret.is_empty() => {
                    errors.push(node.pos, format!("`{what}`: its source is empty"));
                    None
                }
                Ok(secret) => Some(secret),
                Err(problem) => {
                    errors.push(node.pos, format!("`{what}`: {problem}"));
                    None
                }
            }
        }
        other => {
            errors.push(
                node.pos,
                format!(
                    "`{what}`: expected a string, `{{ file: PATH }}` or `{{ env: NAME }}`, found {}",
                    other.describe()
                ),
            );
            None
        }
    }
}

/// The text of the file at `path`, its final line end left out.
pub(super) fn from_file(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(text.trim_end_matches(['\n', '\r']).to_owned())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{errors_of, load_ok};

    #[test]
    fn tokens_and_passwords_come_from_files_and_the_environment() {
        let dir = std::env::temp_dir().join(format!("sluice-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("admin.token");
        std::fs::write(&file, "from-a-file-0123456789\n").expect("write");
        // A variable every test process has (setting one needs `unsafe`).
        let path = std::env::var("PATH").expect("PATH");
        let config = load_ok(&format!(
            "collector:\n  mqtt: {{ username: u, password: {{ env: PATH }} }}\n  http:\n    adminToken: {{ file: {} }}\n",
            file.display()
        ));
        assert_eq!(config.collector.mqtt.password, Some(path));
        let http = config.collector.http.expect("http");
        assert_eq!(http.admin_token.as_deref(), Some("from-a-file-0123456789"));
        let text = errors_of(
            "collector:\n  mqtt: { password: { env: SLUICE_TEST_UNSET_SECRET } }\n  http:\n    adminToken: { file: /nonexistent/token }\n    metricsToken: { file: a, env: b }\n",
        )
        .to_string();
        for expected in [
            "gw.yaml:2:21: `password`: the environment variable `SLUICE_TEST_UNSET_SECRET` is not set",
            "gw.yaml:4:17: `adminToken`: cannot read /nonexistent/token",
            "gw.yaml:5:19: `metricsToken`: write the secret, `{ file: PATH }` or `{ env: NAME }`",
        ] {
            assert!(text.contains(expected), "{expected} in {text}");
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
