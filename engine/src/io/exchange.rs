//! One request and its answer on a stream, framed in two phases: the codec's
//! header length, then the size it reads from the header, bounded by
//! [`MAX_FRAME`] before anything is buffered.

use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadBuf};

use super::error::LinkError;
use super::framer::Framer;
use super::transport::Stream;
use crate::model::FrameError;

/// The largest frame a link accepts; a header announcing more is malformed.
pub const MAX_FRAME: u32 = 64 * 1024;

/// Writes `frame` and reads the whole answer.
///
/// # Errors
/// An I/O error, a codec call that failed, or a header the codec (or the size
/// limit) refuses.
pub async fn transact<F: Framer>(
    stream: &mut dyn Stream,
    framer: &F,
    frame: &[u8],
) -> Result<Vec<u8>, LinkError> {
    let io = |e: std::io::Error| LinkError::Io(e.to_string());
    stream.write_all(frame).await.map_err(io)?;
    let head_len = framer.header_len().map_err(LinkError::framing)?;
    if head_len == 0 || head_len > MAX_FRAME {
        return Err(LinkError::Malformed(format!("header length {head_len}")));
    }
    let mut answer = vec![0u8; head_len as usize];
    stream.read_exact(&mut answer).await.map_err(io)?;
    let total = match framer.frame_length(&answer).map_err(LinkError::framing)? {
        Ok(total) => total,
        Err(FrameError::Malformed(message)) => return Err(LinkError::Malformed(message)),
        Err(FrameError::Device(refusal)) => {
            return Err(LinkError::Malformed(format!(
                "a header refused as a device error: {refusal}"
            )));
        }
    };
    if total < head_len || total > MAX_FRAME {
        return Err(LinkError::Malformed(format!(
            "a frame of {total} bytes (header {head_len}, limit {MAX_FRAME})"
        )));
    }
    answer.resize(total as usize, 0);
    stream
        .read_exact(&mut answer[head_len as usize..])
        .await
        .map_err(io)?;
    Ok(answer)
}

/// Reads and drops whatever already arrived (a late answer to a timed-out
/// heartbeat), without waiting for more.
///
/// # Errors
/// The peer closed the stream, or an I/O error.
pub fn discard_pending(stream: &mut dyn Stream) -> Result<(), LinkError> {
    let mut context = Context::from_waker(Waker::noop());
    let mut scratch = [0u8; 512];
    loop {
        let mut buffer = ReadBuf::new(&mut scratch);
        match Pin::new(&mut *stream).poll_read(&mut context, &mut buffer) {
            Poll::Ready(Ok(())) if buffer.filled().is_empty() => {
                return Err(LinkError::Io("closed by the peer".into()));
            }
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Err(LinkError::Io(e.to_string())),
            Poll::Pending => return Ok(()),
        }
    }
}
