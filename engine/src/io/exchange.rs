//! One request and its answer on a stream, framed in two phases: the codec's
//! header length, then the size it reads from the header, bounded by
//! [`MAX_FRAME`] before more than a small first read is buffered.

use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadBuf};

use super::error::LinkError;
use super::framer::Framer;
use super::transport::Stream;
use crate::model::FrameError;

/// The largest frame a link accepts; a header announcing more is malformed.
pub const MAX_FRAME: u32 = 64 * 1024;

/// Room for a whole answer in the first read: a Modbus read of 125 registers
/// (259 bytes), an S7 or MC answer of a few hundred bytes. A longer one grows
/// the buffer.
const ANSWER_ROOM: usize = 512;

/// Writes `frame` and reads the whole answer: one read of the socket for an
/// answer that arrived at once (the header and the body together), more only
/// when it came in pieces.
///
/// # Errors
/// An I/O error, a codec call that failed, a header the codec (or the size
/// limit) refuses, or bytes after the answer (a stream in which an answer is
/// followed by something nobody asked for cannot be trusted).
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
    let head_len = head_len as usize;
    let mut answer = Vec::with_capacity(ANSWER_ROOM.max(head_len));
    read_at_least(stream, &mut answer, head_len).await?;
    let total = match framer
        .frame_length(&answer[..head_len])
        .map_err(LinkError::framing)?
    {
        Ok(total) => total,
        Err(FrameError::Malformed(message)) => return Err(LinkError::Malformed(message)),
        Err(FrameError::Device(refusal)) => {
            return Err(LinkError::Malformed(format!(
                "a header refused as a device error: {refusal}"
            )));
        }
    };
    if (total as usize) < head_len || total > MAX_FRAME {
        return Err(LinkError::Malformed(format!(
            "a frame of {total} bytes (header {head_len}, limit {MAX_FRAME})"
        )));
    }
    let total = total as usize;
    read_at_least(stream, &mut answer, total).await?;
    if answer.len() > total {
        return Err(LinkError::Malformed(format!(
            "an answer of {total} bytes followed by {} more",
            answer.len() - total
        )));
    }
    Ok(answer)
}

/// Reads into `buffer` until it holds at least `len` bytes, each read taking
/// as much as the buffer has room for.
async fn read_at_least(
    stream: &mut dyn Stream,
    buffer: &mut Vec<u8>,
    len: usize,
) -> Result<(), LinkError> {
    while buffer.len() < len {
        buffer.reserve(len - buffer.len());
        let read = stream
            .read_buf(buffer)
            .await
            .map_err(|e| LinkError::Io(e.to_string()))?;
        if read == 0 {
            return Err(LinkError::Io(format!(
                "closed by the peer after {} of {len} bytes",
                buffer.len()
            )));
        }
    }
    Ok(())
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
