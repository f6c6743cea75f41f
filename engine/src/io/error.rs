//! Why a link could not carry a request.

use std::sync::Arc;
use std::time::Duration;

use super::budget::BudgetExceeded;
use crate::model::DeviceError;

/// Why a link could not carry a request. Anything but [`LinkError::Codec`] and
/// [`LinkError::Backoff`] means the connection was dropped.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LinkError {
    #[error("waiting {retry_in:?} before reconnecting (last error: {last})")]
    Backoff { retry_in: Duration, last: String },
    #[error(transparent)]
    Budget(#[from] BudgetExceeded),
    #[error("connecting to {address} failed: {detail}")]
    Connect { address: String, detail: String },
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("connection lost: {0}")]
    Io(String),
    /// An answer (or a header) the codec could not make sense of: the byte stream
    /// can no longer be trusted.
    #[error("malformed answer: {0}")]
    Malformed(String),
    /// The device refused the handshake.
    #[error("handshake refused: {0}")]
    Refused(DeviceError),
    /// A codec call failed; the connection itself is fine.
    #[error("{0}")]
    Codec(Arc<dyn std::error::Error + Send + Sync>),
}

impl LinkError {
    pub(super) fn codec(failure: impl std::error::Error + Send + Sync + 'static) -> Self {
        LinkError::Codec(Arc::new(failure))
    }
}
