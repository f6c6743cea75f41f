//! How the reloads of one source went.

use super::error::DeployError;

/// How reloads of one source went, for `/health` and `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReloadStatus {
    /// Reloads that were applied.
    pub reloads: u64,
    /// Reloads refused; what ran before stayed.
    pub failures: u64,
    /// Why the last reload was refused, until one succeeds.
    pub last_error: Option<String>,
}

impl ReloadStatus {
    pub(super) fn record<T>(&mut self, what: &str, result: &Result<T, DeployError>) {
        match result {
            Ok(_) => {
                self.reloads += 1;
                self.last_error = None;
            }
            Err(error) => {
                self.failures += 1;
                self.last_error = Some(error.to_string());
                tracing::error!(%error, "{what} reload refused");
            }
        }
    }
}
