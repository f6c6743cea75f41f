//! Secrets (signing keys, tokens): compared and used, never shown. Their
//! `Debug` says only that there is one, so a configuration printed in a log or
//! an error carries none.

use std::fmt;
use std::sync::Arc;

/// A secret as written (a line of a key file, a token).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    pub fn new(text: &str) -> Self {
        Self(Arc::from(text))
    }

    /// The secret itself, for the one place that uses it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(…)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_never_shown() {
        let secret = Secret::new("hunter2-hunter2-hunter2");
        assert_eq!(format!("{secret:?}"), "Secret(…)");
        assert_eq!(secret.expose(), "hunter2-hunter2-hunter2");
    }
}
