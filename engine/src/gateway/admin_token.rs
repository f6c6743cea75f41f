//! The admin token of a gateway configured without one (SEC-8 of
//! `docs/security.md`): made at its first
//! start, kept in the data directory (`admin-token`, readable and writable by
//! the engine's own user only) and used again at every start, so the API and
//! the console are never open to anyone who asks. The log says where it is.

use std::path::Path;

use super::kept::{kept, random_hex};
use crate::config::GatewayConfig;

/// The file of the data directory that keeps a made admin token.
pub const ADMIN_TOKEN_FILE: &str = "admin-token";

/// The admin token: the configured one, else the one kept in the data
/// directory, else a new one kept there. `None` without an HTTP API.
///
/// # Errors
/// The kept token cannot be read, or a new one cannot be written.
pub(super) fn admin_token(config: &GatewayConfig) -> anyhow::Result<Option<String>> {
    let Some(http) = &config.collector.http else {
        return Ok(None);
    };
    if let Some(token) = &http.admin_token {
        return Ok(Some(token.clone()));
    }
    let path = Path::new(&config.collector.wal.dir).join(ADMIN_TOKEN_FILE);
    // 256 random bits.
    let (token, made) = kept(&path, || random_hex(32))?;
    if made {
        tracing::warn!(
            file = %path.display(),
            "no collector.http.adminToken: made an admin token and kept it in the data \
             directory (readable by this user only); the API and the console need it"
        );
    } else {
        tracing::info!(
            file = %path.display(),
            "no collector.http.adminToken: the admin token is the one kept in the data directory"
        );
    }
    Ok(Some(token))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_token_is_made_once_kept_for_its_user_only_and_the_configured_one_wins() {
        let dir = std::env::temp_dir().join(format!("sluice-admin-token-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let text = format!(
            "collector:\n  http: {{ listen: 127.0.0.1:0 }}\n  wal: {{ dir: '{}' }}\n",
            dir.display()
        );
        let mut config = crate::config::tests::load_str("gw.yaml", &text).expect("config");
        let made = admin_token(&config).expect("made").expect("a token");
        assert_eq!(made.len(), 64);
        let file = dir.join(ADMIN_TOKEN_FILE);
        let mode = std::fs::metadata(&file).expect("kept").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        assert_eq!(
            admin_token(&config).expect("read").as_deref(),
            Some(made.as_str())
        );
        if let Some(http) = &mut config.collector.http {
            http.admin_token = Some("configured".into());
        }
        assert_eq!(
            admin_token(&config).expect("configured").as_deref(),
            Some("configured")
        );
        config.collector.http = None;
        assert_eq!(admin_token(&config).expect("no API"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
