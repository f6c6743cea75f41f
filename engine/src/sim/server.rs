//! The TCP side: accepting clients, MBAP framing, one task per connection.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use super::pdu;
use super::shared::Shared;

/// MBAP header up to and including the length field.
const HEADER: usize = 6;
/// Largest frame: header plus the largest allowed length (254).
const MAX_FRAME: usize = HEADER + 254;
/// Per-connection receive buffer; holds many pipelined requests at once.
const READ_BUFFER: usize = 4096;
/// Pending responses are written once they reach this size, even mid-batch.
const WRITE_HIGH_WATER: usize = 16 * 1024;

/// Accepts clients until `stop` fires (or its sender is dropped), then closes
/// the listener and ends every connection before returning.
pub(super) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stop: oneshot::Receiver<()>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => match Slot::take(&shared) {
                    Some(slot) => {
                        connections.spawn(serve_connection(stream, Arc::clone(&shared), slot));
                    }
                    None => {
                        tracing::debug!(%peer, "simulator: connection limit reached, closing");
                        drop(stream);
                    }
                },
                Err(error) => {
                    // Typically out of file descriptors: back off instead of spinning.
                    tracing::warn!(%error, "simulator: accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    connections.shutdown().await;
}

/// One counted place in `open_connections`, given back when dropped (also when
/// the connection task is aborted).
struct Slot(Arc<Shared>);

impl Slot {
    fn take(shared: &Arc<Shared>) -> Option<Self> {
        shared
            .open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < shared.max_connections).then_some(open + 1)
            })
            .ok()
            .map(|_| {
                shared.accepted.fetch_add(1, Ordering::AcqRel);
                Self(Arc::clone(shared))
            })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn serve_connection(mut stream: TcpStream, shared: Arc<Shared>, _slot: Slot) {
    // Responses are small and latency matters more than packet count.
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "simulator: cannot set TCP_NODELAY");
    }
    match run(&mut stream, &shared).await {
        Ok(()) => {}
        Err(error) => tracing::debug!(%error, "simulator: connection closed"),
    }
}

/// What the start of the receive buffer holds.
enum Frame {
    /// A whole frame of this many bytes.
    Complete(usize),
    /// Not enough bytes yet.
    Incomplete,
    /// A header the server will not accept; the connection is closed.
    Invalid(&'static str),
}

fn frame(buf: &[u8]) -> Frame {
    let &[_, _, p0, p1, l0, l1, ..] = buf else {
        return Frame::Incomplete;
    };
    if p0 != 0 || p1 != 0 {
        return Frame::Invalid("protocol id is not 0");
    }
    let len = usize::from(u16::from_be_bytes([l0, l1]));
    if !(2..=254).contains(&len) {
        return Frame::Invalid("length outside 2..=254");
    }
    if buf.len() < HEADER + len {
        Frame::Incomplete
    } else {
        Frame::Complete(HEADER + len)
    }
}

/// Appends the response frame to the request `frame` (a complete, valid one).
fn answer(frame: &[u8], shared: &Shared, scratch: &mut Vec<u16>, out: &mut Vec<u8>) {
    let &[t0, t1, _, _, _, _, unit, function, ref data @ ..] = frame else {
        // `frame` guarantees a length of at least 2 (unit and function).
        return;
    };
    let head = out.len();
    out.extend_from_slice(&[t0, t1, 0, 0, 0, 0, unit]);
    pdu::respond(function, data, &shared.memory, scratch, out);
    let len = u16::try_from(out.len() - head - HEADER).unwrap_or(u16::MAX);
    if let Some(field) = out.get_mut(head + 4..head + HEADER) {
        field.copy_from_slice(&len.to_be_bytes());
    }
}

/// Serves one client until it closes, errs or sends an invalid header.
///
/// Every complete request in the receive buffer is answered in order; without
/// a response delay their responses go out together in one write, as soon as
/// the batch is done. With a delay, each response is written on its own after
/// its own delay, like a slow device would.
async fn run(stream: &mut TcpStream, shared: &Shared) -> std::io::Result<()> {
    let mut input = vec![0u8; READ_BUFFER];
    let mut filled = 0;
    let mut out = Vec::with_capacity(WRITE_HIGH_WATER + MAX_FRAME);
    let mut scratch = Vec::with_capacity(2000);
    loop {
        let Some(free) = input.get_mut(filled..) else {
            return Ok(());
        };
        let n = stream.read(free).await?;
        if n == 0 {
            return Ok(());
        }
        filled += n;
        let mut pos = 0;
        while let Some(pending) = input.get(pos..filled) {
            let len = match frame(pending) {
                Frame::Complete(len) => len,
                Frame::Incomplete => break,
                Frame::Invalid(why) => {
                    tracing::debug!(why, "simulator: closing connection");
                    return Ok(());
                }
            };
            let delay = shared.response_delay();
            if !delay.is_zero() {
                write_out(stream, &mut out).await?;
                tokio::time::sleep(delay).await;
            }
            answer(
                pending.get(..len).unwrap_or_default(),
                shared,
                &mut scratch,
                &mut out,
            );
            shared.requests.fetch_add(1, Ordering::Relaxed);
            pos += len;
            if !delay.is_zero() || out.len() >= WRITE_HIGH_WATER {
                write_out(stream, &mut out).await?;
            }
        }
        write_out(stream, &mut out).await?;
        // What is left is less than one frame: move it to the front.
        input.copy_within(pos..filled, 0);
        filled -= pos;
    }
}

async fn write_out(stream: &mut TcpStream, out: &mut Vec<u8>) -> std::io::Result<()> {
    if !out.is_empty() {
        stream.write_all(out).await?;
        out.clear();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_checked_before_they_are_complete() {
        assert!(matches!(frame(&[0, 1, 0, 0, 0]), Frame::Incomplete));
        assert!(matches!(frame(&[0, 1, 0, 0, 0, 6, 1]), Frame::Incomplete));
        assert!(matches!(frame(&[0, 1, 0, 1, 0, 6]), Frame::Invalid(_)));
        assert!(matches!(frame(&[0, 1, 0, 0, 0, 1]), Frame::Invalid(_)));
        assert!(matches!(frame(&[0, 1, 0, 0, 0, 255]), Frame::Invalid(_)));
        assert!(matches!(
            frame(&[0, 1, 0, 0, 0, 2, 1, 3, 9]),
            Frame::Complete(8)
        ));
    }
}
