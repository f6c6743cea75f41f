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
    /// A codec call failed on a whole answer (decoding it); the connection is fine.
    #[error("{0}")]
    Codec(Arc<dyn std::error::Error + Send + Sync>),
    /// A codec call failed while an answer was being framed (its header length,
    /// its size) or during the handshake: the stream may hold the rest of the
    /// answer, so the connection is dropped.
    #[error("codec failed while framing an answer: {0}")]
    Framing(Arc<dyn std::error::Error + Send + Sync>),
}

impl LinkError {
    pub(super) fn codec(failure: impl std::error::Error + Send + Sync + 'static) -> Self {
        LinkError::Codec(Arc::new(failure))
    }

    pub(super) fn framing(failure: impl std::error::Error + Send + Sync + 'static) -> Self {
        LinkError::Framing(Arc::new(failure))
    }
}
