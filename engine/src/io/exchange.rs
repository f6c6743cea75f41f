//! One request and its answer on a stream, framed by the codec: shown the
//! answer's first bytes (its header length), it tells the frame's size, bytes to
//! skip before the frame (a preamble, garbage on a line), or how many bytes it
//! must see to tell. The link bounds what it buffers ([`MAX_FRAME`]), what it
//! skips ([`MAX_SKIPPED`]) and how often it asks ([`MAX_SIZING_CALLS`]).

use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadBuf};

use super::error::LinkError;
use super::framer::Framer;
use super::transport::Stream;
use crate::model::{FrameError, FrameSize};

/// The largest frame a link accepts; a header announcing more is malformed.
pub const MAX_FRAME: u32 = 64 * 1024;

/// The most bytes a link drops before an answer's frame.
pub const MAX_SKIPPED: usize = 64 * 1024;

/// The most `frame-length` calls for one answer: a preamble skipped, a longer
/// head asked for, a few times over; a codec that needs more never finds a frame.
pub const MAX_SIZING_CALLS: u32 = 64;

/// Room for a whole answer in the first read: a Modbus read of 125 registers
/// (259 bytes), an S7 or MC answer of a few hundred bytes. A longer one grows
/// the buffer.
const ANSWER_ROOM: usize = 512;

/// Writes `frame` and reads the whole answer: one read of the socket for an
/// answer that arrived at once (the header and the body together), more only
/// when it came in pieces. Bytes the codec skipped are not part of the answer.
///
/// # Errors
/// An I/O error, a codec call that failed, a header the codec (or a bound)
/// refuses, or bytes after the answer (a stream in which an answer is followed
/// by something nobody asked for cannot be trusted).
pub async fn transact<F: Framer>(
    stream: &mut dyn Stream,
    framer: &F,
    frame: &[u8],
) -> Result<Vec<u8>, LinkError> {
    let io = |e: std::io::Error| LinkError::Io(e.to_string());
    stream.write_all(frame).await.map_err(io)?;
    let mut finder = FrameFinder::new(framer)?;
    let mut answer = Vec::with_capacity(ANSWER_ROOM.max(finder.header));
    let frame = loop {
        match finder.step(framer, &answer)? {
            Found::Need(len) => read_at_least(stream, &mut answer, len).await?,
            Found::Frame(frame) => break frame,
        }
    };
    read_at_least(stream, &mut answer, frame.end).await?;
    if answer.len() > frame.end {
        return Err(LinkError::Malformed(format!(
            "an answer of {} bytes followed by {} more",
            frame.len(),
            answer.len() - frame.end
        )));
    }
    if frame.start > 0 {
        tracing::debug!(skipped = frame.start, "bytes before the answer's frame");
        answer.drain(..frame.start);
    }
    Ok(answer)
}

/// What [`FrameFinder::step`] found in the bytes of an answer so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// Bytes the answer must have in all before the next step.
    Need(usize),
    /// Where the frame lies (its end may be past the bytes read so far).
    Frame(Range<usize>),
}

/// Finds an answer's frame the codec's way, within the link's bounds: shown the
/// first `header-len` bytes, then as many as the codec asks for, after the bytes
/// it skips.
#[derive(Debug)]
pub struct FrameFinder {
    header: usize,
    /// Where the frame starts, and how many bytes the codec sees next.
    start: usize,
    shown: usize,
    calls: u32,
}

impl FrameFinder {
    /// # Errors
    /// A failed call, or a header length out of bounds.
    pub fn new<F: Framer>(framer: &F) -> Result<Self, LinkError> {
        let header = framer.header_len().map_err(LinkError::framing)?;
        if header == 0 || header > MAX_FRAME {
            return Err(LinkError::Malformed(format!("header length {header}")));
        }
        Ok(Self {
            header: header as usize,
            start: 0,
            shown: header as usize,
            calls: 0,
        })
    }

    /// With `bytes`, the answer so far: how many it needs in all, or the frame.
    ///
    /// # Errors
    /// A failed call, a head the codec refuses, an answer out of bounds.
    pub fn step<F: Framer>(&mut self, framer: &F, bytes: &[u8]) -> Result<Found, LinkError> {
        loop {
            let (start, shown) = (self.start, self.shown);
            let Some(head) = bytes.get(start..start + shown) else {
                return Ok(Found::Need(start + shown));
            };
            self.calls += 1;
            if self.calls > MAX_SIZING_CALLS {
                return Err(LinkError::Malformed(format!(
                    "no frame size after {MAX_SIZING_CALLS} calls of the codec"
                )));
            }
            match size_of(framer, head)? {
                FrameSize::Length(len)
                    if (shown..=MAX_FRAME as usize).contains(&(len as usize)) =>
                {
                    return Ok(Found::Frame(start..start + len as usize));
                }
                FrameSize::Length(len) => {
                    return Err(LinkError::Malformed(format!(
                        "a frame of {len} bytes (the codec saw {shown}, limit {MAX_FRAME})"
                    )));
                }
                FrameSize::Skip(len) if (1..=shown).contains(&(len as usize)) => {
                    self.start += len as usize;
                    if self.start > MAX_SKIPPED {
                        return Err(LinkError::Malformed(format!(
                            "no frame in the first {} bytes",
                            self.start
                        )));
                    }
                    self.shown = self.header;
                }
                FrameSize::Skip(len) => {
                    return Err(LinkError::Malformed(format!(
                        "the codec skips {len} of the {shown} bytes it saw"
                    )));
                }
                FrameSize::Need(len)
                    if (shown + 1..=MAX_FRAME as usize).contains(&(len as usize)) =>
                {
                    self.shown = len as usize;
                }
                FrameSize::Need(len) => {
                    return Err(LinkError::Malformed(format!(
                        "the codec asks to see {len} bytes after {shown} (limit {MAX_FRAME})"
                    )));
                }
            }
        }
    }
}

/// The codec's verdict on `head`, its refusals as malformed answers.
fn size_of<F: Framer>(framer: &F, head: &[u8]) -> Result<FrameSize, LinkError> {
    match framer.frame_length(head).map_err(LinkError::framing)? {
        Ok(size) => Ok(size),
        Err(FrameError::Malformed(message)) => Err(LinkError::Malformed(message)),
        Err(FrameError::Device(refusal)) => Err(LinkError::Malformed(format!(
            "a header refused as a device error: {refusal}"
        ))),
    }
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
