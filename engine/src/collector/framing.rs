//! The runtime's codec sessions as the framers of links.

use crate::io::Framer;
use crate::model::{FrameError, FrameSize};
use crate::runtime::{CallError, CodecSession};

impl Framer for CodecSession {
    type Failure = CallError;

    fn reset(&self) -> Result<(), CallError> {
        CodecSession::reset(self)
    }

    fn handshake(&self, step: u32) -> Result<Option<Vec<u8>>, CallError> {
        CodecSession::handshake(self, step)
    }

    fn check_handshake(
        &self,
        step: u32,
        answer: &[u8],
    ) -> Result<Result<(), FrameError>, CallError> {
        CodecSession::check_handshake(self, step, answer)
    }

    fn header_len(&self) -> Result<u32, CallError> {
        CodecSession::header_len(self)
    }

    fn frame_length(&self, head: &[u8]) -> Result<Result<FrameSize, FrameError>, CallError> {
        CodecSession::frame_length(self, head)
    }
}
