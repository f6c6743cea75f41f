//! What a link asks of a protocol's codec to carry its exchanges: the handshake
//! after a connect, and how long each answer is (read its header first, then the
//! size the header announces). The runtime's codec sessions implement it; so does
//! any native framer, which is how the link is tested.

use crate::model::{FrameError, FrameSize};

/// The framing side of a codec, as the link uses it: `io` owns it, the runtime
/// fills it in (ARCH-2). Every call answers with the
/// codec's own verdict inside a [`Framer::Failure`]: the outer error is a codec
/// call that failed (a component that trapped or ran out of budget), the inner one
/// what the codec said of the bytes.
pub trait Framer {
    /// A failed codec call.
    type Failure: std::error::Error + Send + Sync + 'static;

    /// Forgets in-flight state (a new connection starts).
    ///
    /// # Errors
    /// A failed call.
    fn reset(&self) -> Result<(), Self::Failure>;

    /// The frame of handshake step `step`; none when the handshake is complete.
    ///
    /// # Errors
    /// A failed call.
    fn handshake(&self, step: u32) -> Result<Option<Vec<u8>>, Self::Failure>;

    /// Checks the answer to handshake step `step`.
    ///
    /// # Errors
    /// A failed call (outer) or a refused answer (inner).
    fn check_handshake(
        &self,
        step: u32,
        answer: &[u8],
    ) -> Result<Result<(), FrameError>, Self::Failure>;

    /// Bytes to read before [`Framer::frame_length`] can size a frame.
    ///
    /// # Errors
    /// A failed call.
    fn header_len(&self) -> Result<u32, Self::Failure>;

    /// What `head` tells of the answer's frame: its size, bytes to skip before
    /// it, or how many bytes the codec must see to tell.
    ///
    /// # Errors
    /// A failed call (outer) or a header the codec rejects (inner).
    fn frame_length(&self, head: &[u8]) -> Result<Result<FrameSize, FrameError>, Self::Failure>;
}
