//! Why a deployment or a reload was refused.

use crate::runtime::LoadError;
use crate::yaml::Diagnostics;

/// Why a deployment was refused; nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error("{0}")]
    Invalid(String),
    /// The version is registered already, with other bytes: versions never change.
    #[error(
        "{name} {version} is registered already with other bytes (sha256 {hash}): a version never \
         changes once uploaded; upload these bytes as a new version"
    )]
    Taken {
        name: String,
        version: String,
        hash: String,
    },
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("the new version breaks a pipeline, so the previous one stays active:\n{0}")]
    Breaks(Diagnostics),
    /// Devices use what the version would take away.
    #[error("{0}; the previous version stays active")]
    InUse(String),
    #[error("cannot keep the component in the data directory: {0}")]
    Storage(String),
    #[error("the pipeline files have problems, so the running pipelines stay:\n{0}")]
    Pipelines(Diagnostics),
    #[error("the device configuration has problems, so the running devices stay:\n{0}")]
    Devices(Diagnostics),
}

/// A name or version usable as a file name: letters, digits, `.`, `_`, `-`.
pub(super) fn check_word(what: &str, word: &str) -> Result<(), DeployError> {
    let fine = !word.is_empty()
        && word.len() <= 64
        && !word.starts_with('.')
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if fine {
        Ok(())
    } else {
        Err(DeployError::Invalid(format!(
            "{what} `{word}`: use 1 to 64 letters, digits, `.`, `_` or `-`, not starting with `.`"
        )))
    }
}
