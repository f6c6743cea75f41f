//! The link against in-memory peers, with a native framer and a paused clock:
//! every timeout and backoff below elapses in virtual time, at once.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::time::Instant;

use super::*;
use crate::config::{BackoffConfig, ConnectionLimits};
use crate::model::{DeviceError, FrameError, FrameSize};

/// A length-prefixed protocol: two bytes of big-endian length, then the body. A
/// body starting with `E` is a device's refusal; a header of `FF FF` is garbage.
/// `FE` bytes before a frame are a preamble, skipped; `AA AA` announces a long
/// header (`AA AA` and the length), shown whole before it is sized.
/// With `handshake`, a connection starts by sending `HELLO` and expects `OK`.
#[derive(Debug, Default)]
struct LengthFramer {
    handshake: bool,
    /// What `frame_length` answers instead of the truth.
    lie: Option<FrameSize>,
    resets: AtomicU32,
    /// `frame_length` calls that fail (a codec that trapped) before one works.
    broken_lengths: AtomicU32,
}

#[derive(Debug, thiserror::Error)]
#[error("the framer broke")]
struct Broken;

impl Framer for LengthFramer {
    type Failure = Broken;

    fn reset(&self) -> Result<(), Broken> {
        self.resets.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn handshake(&self, step: u32) -> Result<Option<Vec<u8>>, Broken> {
        Ok((self.handshake && step == 0).then(|| frame(b"HELLO")))
    }

    fn check_handshake(&self, _step: u32, answer: &[u8]) -> Result<Result<(), FrameError>, Broken> {
        Ok(match &answer[2..] {
            b"OK" => Ok(()),
            other => Err(FrameError::Device(DeviceError {
                code: 9,
                message: format!("handshake answered {other:?}"),
                retry: Vec::new(),
            })),
        })
    }

    fn header_len(&self) -> Result<u32, Broken> {
        Ok(2)
    }

    fn frame_length(&self, head: &[u8]) -> Result<Result<FrameSize, FrameError>, Broken> {
        if self
            .broken_lengths
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(Broken);
        }
        if let Some(lie) = self.lie {
            return Ok(Ok(lie));
        }
        let preamble = head.iter().take_while(|b| **b == 0xFE).count();
        Ok(match head {
            _ if preamble > 0 => Ok(FrameSize::Skip(preamble as u32)),
            [0xFF, 0xFF] => Err(FrameError::Malformed("a garbage header".into())),
            [0xAA, 0xAA] => Ok(FrameSize::Need(4)),
            [0xAA, 0xAA, high, low] => Ok(FrameSize::Length(
                4 + u32::from(u16::from_be_bytes([*high, *low])),
            )),
            [high, low] => Ok(FrameSize::Length(
                2 + u32::from(u16::from_be_bytes([*high, *low])),
            )),
            _ => Err(FrameError::Malformed("short header".into())),
        })
    }
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = u16::try_from(body.len())
        .expect("short")
        .to_be_bytes()
        .to_vec();
    out.extend_from_slice(body);
    out
}

/// The body of an answer, as a codec's parse would read it.
fn body(answer: &[u8]) -> Result<Result<Vec<u8>, FrameError>, Broken> {
    Ok(match &answer[2..] {
        [b'E', code, ..] => Err(FrameError::Device(DeviceError {
            code: u32::from(*code),
            message: "refused".into(),
            retry: Vec::new(),
        })),
        rest => Ok(rest.to_vec()),
    })
}

/// How the peer answers each request it reads.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Peer {
    /// The request body back; `OK` to a handshake.
    Echo,
    /// Never a word.
    Silent,
    /// A header no codec accepts.
    Garbage,
    /// Answers, but only after this much (virtual) time.
    Late(Duration),
    /// The first answer late (by the duration), every later one at once.
    LateFirst(Duration),
    /// The first answer garbage, every later one an echo.
    GarbageFirst,
    /// An echo a byte at a time.
    Dribble,
    /// An echo with a byte after it that nobody asked for.
    Trailing,
    /// An echo after this many `FE` bytes.
    Preamble(usize),
    /// An echo behind the long header's `AA AA`.
    LongHeader,
}

/// Opens in-memory connections to a peer; refuses the first `refuse_first`.
#[derive(Debug)]
struct Memory {
    peer: Peer,
    refuse_first: u32,
    dials: AtomicU32,
}

impl Memory {
    fn new(peer: Peer) -> Arc<Self> {
        Self::refusing(peer, 0)
    }

    fn refusing(peer: Peer, refuse_first: u32) -> Arc<Self> {
        Arc::new(Self {
            peer,
            refuse_first,
            dials: AtomicU32::new(0),
        })
    }
}

impl Dialer for Memory {
    fn dial<'a>(&'a self, _host: &'a str, _port: u16) -> Dialing<'a> {
        let attempt = self.dials.fetch_add(1, Ordering::Relaxed);
        let peer = self.peer;
        let refuse = attempt < self.refuse_first;
        Box::pin(async move {
            if refuse {
                return Err(io::Error::new(io::ErrorKind::ConnectionRefused, "refused"));
            }
            let (client, server) = tokio::io::duplex(4096);
            tokio::spawn(serve(server, peer));
            Ok(Box::new(client) as Connection)
        })
    }
}

async fn serve(mut stream: DuplexStream, peer: Peer) {
    let mut answered = 0u32;
    loop {
        let mut head = [0u8; 2];
        if stream.read_exact(&mut head).await.is_err() {
            return;
        }
        let mut request = vec![0u8; usize::from(u16::from_be_bytes(head))];
        if stream.read_exact(&mut request).await.is_err() {
            return;
        }
        answered += 1;
        let answer = match peer {
            Peer::Silent => continue,
            Peer::GarbageFirst if answered == 1 => vec![0xFF, 0xFF, 0],
            Peer::LateFirst(after) if answered == 1 => {
                tokio::time::sleep(after).await;
                frame(&request)
            }
            Peer::GarbageFirst | Peer::LateFirst(_) => frame(&request),
            Peer::Garbage => vec![0xFF, 0xFF, 0],
            Peer::Dribble => {
                for byte in frame(&request) {
                    if stream.write_all(&[byte]).await.is_err() {
                        return;
                    }
                    tokio::task::yield_now().await;
                }
                continue;
            }
            Peer::Trailing => [frame(&request), vec![0]].concat(),
            Peer::Preamble(bytes) => [vec![0xFE; bytes], frame(&request)].concat(),
            Peer::LongHeader => [vec![0xAA, 0xAA], frame(&request)].concat(),
            Peer::Echo | Peer::Late(_) if request == b"HELLO" => frame(b"OK"),
            Peer::Echo => frame(&request),
            Peer::Late(after) => {
                tokio::time::sleep(after).await;
                frame(&request)
            }
        };
        if stream.write_all(&answer).await.is_err() {
            return;
        }
    }
}

fn settings() -> LinkSettings {
    LinkSettings {
        host: "plc".into(),
        port: 502,
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(1),
        backoff: BackoffConfig {
            base_ms: 1000,
            max_ms: 8000,
            jitter: 0.0,
        },
        failed_after: 3,
        line: None,
        serial: None,
    }
}

/// A link over a line (Modbus RTU's way) with `silence` between frames.
fn line(dialer: Arc<Memory>, silence: Duration) -> Link {
    let budget = Budget::new(&ConnectionLimits {
        max_total: 4,
        max_per_host: 2,
    });
    let settings = LinkSettings {
        line: Some(silence),
        ..settings()
    };
    Link::with_dialer(settings, budget, 7, dialer)
}

fn link(dialer: Arc<Memory>) -> Link {
    let budget = Budget::new(&ConnectionLimits {
        max_total: 4,
        max_per_host: 2,
    });
    Link::with_dialer(settings(), budget, 7, dialer)
}

#[tokio::test(start_paused = true)]
async fn a_request_comes_back_decoded_and_the_link_stays_online() {
    let framer = LengthFramer::default();
    let mut link = link(Memory::new(Peer::Echo));
    assert_eq!(link.ensure_online(&framer).await.expect("online"), 1);
    let answer = link.request(&framer, &frame(b"read 1"), body).await;
    assert_eq!(answer.expect("exchange").expect("data"), b"read 1");
    assert_eq!(link.state(), LinkState::Online);
    assert_eq!(
        link.ensure_online(&framer).await.expect("online"),
        1,
        "same connection"
    );
    assert_eq!(
        framer.resets.load(Ordering::Relaxed),
        1,
        "reset once per connection"
    );
}

#[tokio::test(start_paused = true)]
async fn a_device_refusal_is_not_a_transport_failure() {
    let framer = LengthFramer::default();
    let mut link = link(Memory::new(Peer::Echo));
    link.ensure_online(&framer).await.expect("online");
    let answer = link.request(&framer, &frame(b"E\x02"), body).await;
    let refusal = answer.expect("the exchange worked").expect_err("refused");
    assert_eq!(refusal.code, 2);
    assert_eq!(link.state(), LinkState::Online);
    assert_eq!(
        link.ensure_online(&framer).await.expect("online"),
        1,
        "no reconnect"
    );
}

#[tokio::test(start_paused = true)]
async fn a_malformed_answer_drops_the_connection_and_backs_off() {
    let framer = LengthFramer::default();
    let mut link = link(Memory::new(Peer::Garbage));
    link.ensure_online(&framer).await.expect("online");
    let failed = link.request(&framer, &frame(b"read"), body).await;
    assert!(matches!(failed, Err(LinkError::Malformed(_))), "{failed:?}");
    assert_eq!(link.state(), LinkState::Recovering);
    assert!(
        link.last_error().contains("garbage"),
        "{}",
        link.last_error()
    );
    let waiting = link.ensure_online(&framer).await;
    assert!(
        matches!(waiting, Err(LinkError::Backoff { .. })),
        "{waiting:?}"
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(link.ensure_online(&framer).await.expect("again"), 2);
    assert_eq!(link.reconnects(), 1);
}

/// The whole answer, as the link handed it over.
fn whole(answer: &[u8]) -> Result<Result<Vec<u8>, FrameError>, Broken> {
    Ok(Ok(answer.to_vec()))
}

#[tokio::test(start_paused = true)]
async fn a_preamble_before_an_answer_is_skipped_and_not_part_of_it() {
    let framer = LengthFramer::default();
    let mut link = link(Memory::new(Peer::Preamble(3)));
    link.ensure_online(&framer).await.expect("online");
    for request in [&b"read 1"[..], b"read 2"] {
        let answer = link.request(&framer, &frame(request), whole).await;
        assert_eq!(answer.expect("exchange").expect("data"), frame(request));
    }
    assert_eq!(link.state(), LinkState::Online);
}

#[tokio::test(start_paused = true)]
async fn a_codec_that_needs_more_bytes_to_size_a_frame_is_shown_them() {
    let framer = LengthFramer::default();
    let mut link = link(Memory::new(Peer::LongHeader));
    link.ensure_online(&framer).await.expect("online");
    let answer = link.request(&framer, &frame(b"read"), whole).await;
    let expected = [vec![0xAA, 0xAA], frame(b"read")].concat();
    assert_eq!(answer.expect("exchange").expect("data"), expected);
}

#[tokio::test(start_paused = true)]
async fn framing_answers_out_of_bounds_drop_the_connection_with_the_reason() {
    for (peer, lie, reason) in [
        (
            Peer::Echo,
            Some(FrameSize::Skip(0)),
            "skips 0 of the 2 bytes",
        ),
        (
            Peer::Echo,
            Some(FrameSize::Skip(3)),
            "skips 3 of the 2 bytes",
        ),
        (
            Peer::Echo,
            Some(FrameSize::Need(2)),
            "to see 2 bytes after 2",
        ),
        (
            Peer::Echo,
            Some(FrameSize::Need(MAX_FRAME + 1)),
            "to see 65537 bytes after 2",
        ),
        (Peer::Echo, Some(FrameSize::Length(1)), "a frame of 1 bytes"),
        (
            Peer::Echo,
            Some(FrameSize::Length(MAX_FRAME + 1)),
            "a frame of 65537 bytes",
        ),
        (Peer::Preamble(1000), None, "no frame size after 64 calls"),
    ] {
        let framer = LengthFramer {
            lie,
            ..LengthFramer::default()
        };
        let mut link = link(Memory::new(peer));
        link.ensure_online(&framer).await.expect("online");
        let failed = link.request(&framer, &frame(b"read"), whole).await;
        match failed {
            Err(LinkError::Malformed(message)) => {
                assert!(message.contains(reason), "{lie:?}: {message}");
            }
            other => panic!("{lie:?}: {other:?}"),
        }
        assert_eq!(link.state(), LinkState::Recovering, "{lie:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_shared_link_shows_its_state_and_reconnects_while_a_request_holds_it() {
    let framer = LengthFramer::default();
    let shared = SharedLink::new(link(Memory::new(Peer::Garbage)));
    assert_eq!(shared.state(), LinkState::Idle);
    let mut held = shared.lock().await;
    held.ensure_online(&framer).await.expect("online");
    assert!(shared.try_lock().is_err(), "held by the request");
    assert_eq!(shared.state(), LinkState::Online);
    let failed = held.request(&framer, &frame(b"read"), body).await;
    assert!(failed.is_err());
    assert_eq!(shared.state(), LinkState::Recovering);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    held.ensure_online(&framer).await.expect("again");
    assert_eq!(
        (shared.state(), shared.reconnects()),
        (LinkState::Online, 1)
    );
}

#[tokio::test(start_paused = true)]
async fn an_answer_in_pieces_is_read_whole() {
    let framer = LengthFramer::default();
    let mut link = link(Memory::new(Peer::Dribble));
    link.ensure_online(&framer).await.expect("online");
    for request in [&b"read 1"[..], b"read 2"] {
        let answer = link.request(&framer, &frame(request), body).await;
        assert_eq!(answer.expect("exchange").expect("data"), request);
    }
    assert_eq!(link.state(), LinkState::Online);
}

#[tokio::test(start_paused = true)]
async fn bytes_after_an_answer_drop_the_connection() {
    let framer = LengthFramer::default();
    let mut link = link(Memory::new(Peer::Trailing));
    link.ensure_online(&framer).await.expect("online");
    let failed = link.request(&framer, &frame(b"read"), body).await;
    assert!(matches!(failed, Err(LinkError::Malformed(_))), "{failed:?}");
    assert!(
        link.last_error()
            .contains("an answer of 6 bytes followed by 1 more"),
        "{}",
        link.last_error()
    );
    assert_eq!(link.state(), LinkState::Recovering);
}

#[tokio::test(start_paused = true)]
async fn a_silent_device_times_out_after_the_read_timeout() {
    let framer = LengthFramer::default();
    let mut link = link(Memory::new(Peer::Silent));
    link.ensure_online(&framer).await.expect("online");
    let started = Instant::now();
    let failed = link.request(&framer, &frame(b"read"), body).await;
    assert!(matches!(failed, Err(LinkError::Timeout(_))), "{failed:?}");
    assert_eq!(started.elapsed(), Duration::from_secs(1));
    assert_eq!(link.state(), LinkState::Recovering);
}

#[tokio::test(start_paused = true)]
async fn a_failed_codec_call_keeps_the_connection() {
    let framer = LengthFramer::default();
    let mut link = link(Memory::new(Peer::Echo));
    link.ensure_online(&framer).await.expect("online");
    let failed = link
        .request(&framer, &frame(b"read"), |_| {
            Err::<Result<(), _>, _>(Broken)
        })
        .await;
    assert!(matches!(failed, Err(LinkError::Codec(_))), "{failed:?}");
    assert_eq!(link.state(), LinkState::Online);
}

#[tokio::test(start_paused = true)]
async fn a_codec_failing_while_framing_drops_the_half_read_connection() {
    let framer = LengthFramer {
        broken_lengths: AtomicU32::new(1),
        ..LengthFramer::default()
    };
    let memory = Memory::new(Peer::Echo);
    let mut link = link(Arc::clone(&memory));
    link.ensure_online(&framer).await.expect("online");
    let failed = link.request(&framer, &frame(b"first"), body).await;
    assert!(matches!(failed, Err(LinkError::Framing(_))), "{failed:?}");
    assert_eq!(
        link.state(),
        LinkState::Recovering,
        "the rest of the answer is unread"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(link.ensure_online(&framer).await.expect("again"), 2);
    let answer = link.request(&framer, &frame(b"second"), body).await;
    assert_eq!(
        answer.expect("exchange").expect("data"),
        b"second",
        "the answer to this request, not the first one's"
    );
    assert_eq!(memory.dials.load(Ordering::Relaxed), 2);
}

#[tokio::test(start_paused = true)]
async fn refused_connects_back_off_exponentially_then_the_link_is_failed() {
    let framer = LengthFramer::default();
    let memory = Memory::refusing(Peer::Echo, 4);
    let mut link = link(Arc::clone(&memory));
    let mut waits = Vec::new();
    loop {
        match link.ensure_online(&framer).await {
            Ok(_) => break,
            Err(LinkError::Backoff { retry_in, .. }) => {
                waits.push(retry_in);
                tokio::time::sleep(retry_in).await;
            }
            Err(LinkError::Connect { .. }) => {}
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(
        waits,
        [1, 2, 4, 8].map(Duration::from_secs),
        "doubling from the base, capped"
    );
    assert_eq!(memory.dials.load(Ordering::Relaxed), 5);
    assert_eq!(link.state(), LinkState::Online);
}

#[tokio::test(start_paused = true)]
async fn the_state_is_failed_after_too_many_attempts() {
    let framer = LengthFramer::default();
    let mut link = link(Memory::refusing(Peer::Echo, u32::MAX));
    let mut states = Vec::new();
    for _ in 0..4 {
        let _ = link.ensure_online(&framer).await;
        states.push(link.state());
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    use LinkState::{Failed, Recovering};
    assert_eq!(states, [Recovering, Recovering, Recovering, Failed]);
}

#[tokio::test(start_paused = true)]
async fn a_handshake_comes_first_and_a_broken_answer_to_it_fails_the_connect() {
    let framer = LengthFramer {
        handshake: true,
        ..LengthFramer::default()
    };
    let mut link = link(Memory::new(Peer::Echo));
    link.ensure_online(&framer).await.expect("handshaken");
    let answer = link.request(&framer, &frame(b"after"), body).await;
    assert_eq!(answer.expect("exchange").expect("data"), b"after");

    let mut broken = self::link(Memory::new(Peer::Garbage));
    let failed = broken.ensure_online(&framer).await;
    assert!(matches!(failed, Err(LinkError::Malformed(_))), "{failed:?}");
    assert_eq!(broken.state(), LinkState::Recovering);
    let again = broken.ensure_online(&framer).await;
    assert!(
        matches!(again, Err(LinkError::Backoff { retry_in, .. }) if retry_in == Duration::from_secs(1)),
        "a failed handshake is one failed attempt: the base backoff, {again:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn one_late_heartbeat_is_tolerated_and_its_answer_discarded() {
    let framer = LengthFramer::default();
    let mut link = link(Memory::new(Peer::Late(Duration::from_millis(1500))));
    link.ensure_online(&framer).await.expect("online");
    let late = link.heartbeat(&framer, &frame(b"beat-1"), 2, body).await;
    assert!(matches!(late, Err(LinkError::Timeout(_))), "{late:?}");
    assert_eq!(link.state(), LinkState::Online, "one timeout is allowed");
    // The late answer arrives meanwhile; the next exchange must not take it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let next = link.heartbeat(&framer, &frame(b"beat-2"), 2, body).await;
    assert!(matches!(next, Err(LinkError::Timeout(_))), "{next:?}");
    assert_eq!(link.state(), LinkState::Recovering, "two in a row drop it");
}

#[tokio::test(start_paused = true)]
async fn a_round_cancelled_mid_exchange_reconnects_before_the_next_use() {
    let framer = LengthFramer::default();
    let memory = Memory::new(Peer::Silent);
    let mut link = link(Arc::clone(&memory));
    link.ensure_online(&framer).await.expect("online");
    let cancelled = tokio::time::timeout(
        Duration::from_millis(100),
        link.request(&framer, &frame(b"read"), body),
    )
    .await;
    assert!(cancelled.is_err(), "the round's own deadline cut it");
    let _ = link.ensure_online(&framer).await;
    assert_eq!(
        link.state(),
        LinkState::Recovering,
        "the half-read stream is dropped"
    );
    assert_eq!(memory.dials.load(Ordering::Relaxed), 1);
}

#[tokio::test(start_paused = true)]
async fn on_a_line_a_late_answer_is_drained_and_the_line_kept() {
    let framer = LengthFramer::default();
    let memory = Memory::new(Peer::LateFirst(Duration::from_millis(1500)));
    let mut link = line(Arc::clone(&memory), Duration::from_millis(4));
    link.ensure_online(&framer).await.expect("online");
    let late = link.request(&framer, &frame(b"unit 3"), body).await;
    assert!(matches!(late, Err(LinkError::Timeout(_))), "{late:?}");
    assert_eq!(
        link.state(),
        LinkState::Online,
        "a silent unit keeps the line"
    );
    // The late answer arrives before the next unit's request, which drains it
    // and gets its own answer, on the same connection. (One arriving after the
    // next request went out is that request's codec's to refuse: a Modbus RTU
    // answer names its unit.)
    tokio::time::sleep(Duration::from_secs(1)).await;
    let next = link.request(&framer, &frame(b"unit 1"), body).await;
    assert_eq!(next.expect("answered").expect("data"), b"unit 1");
    assert_eq!(memory.dials.load(Ordering::Relaxed), 1, "never reopened");
}

#[tokio::test(start_paused = true)]
async fn on_a_line_a_broken_answer_resyncs_instead_of_reconnecting() {
    let framer = LengthFramer::default();
    let memory = Memory::new(Peer::GarbageFirst);
    let mut link = line(Arc::clone(&memory), Duration::from_millis(4));
    link.ensure_online(&framer).await.expect("online");
    let broken = link.request(&framer, &frame(b"read"), body).await;
    assert!(matches!(broken, Err(LinkError::Malformed(_))), "{broken:?}");
    assert_eq!(link.state(), LinkState::Online);
    let next = link.request(&framer, &frame(b"again"), body).await;
    assert_eq!(next.expect("answered").expect("data"), b"again");
    assert_eq!(memory.dials.load(Ordering::Relaxed), 1, "never reopened");
}

#[tokio::test(start_paused = true)]
async fn on_a_line_requests_are_a_silence_apart() {
    let framer = LengthFramer::default();
    let silence = Duration::from_millis(4);
    let mut link = line(Memory::new(Peer::Echo), silence);
    link.ensure_online(&framer).await.expect("online");
    let first = link.request(&framer, &frame(b"one"), body).await;
    let ended = Instant::now();
    assert!(first.is_ok());
    let second = link.request(&framer, &frame(b"two"), body).await;
    assert!(second.is_ok());
    assert!(ended.elapsed() >= silence, "{:?}", ended.elapsed());
}

#[tokio::test(start_paused = true)]
async fn a_request_waits_as_long_as_its_own_channel_says() {
    let framer = LengthFramer::default();
    // The link's own read timeout is 1 s; the peer answers after 500 ms.
    let mut link = line(
        Memory::new(Peer::Late(Duration::from_millis(500))),
        Duration::ZERO,
    );
    link.ensure_online(&framer).await.expect("online");
    let hasty = link
        .request_within(&framer, &frame(b"unit 3"), Duration::from_millis(200), body)
        .await;
    assert!(
        matches!(hasty, Err(LinkError::Timeout(t)) if t == Duration::from_millis(200)),
        "{hasty:?}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let patient = link.request(&framer, &frame(b"unit 1"), body).await;
    assert_eq!(patient.expect("answered").expect("data"), b"unit 1");
}

/// Device sockets probe a silent peer after 30 s idle, every 10 s, three
/// times (seed 003 §3.3), not after Linux's two hours.
#[tokio::test]
async fn device_sockets_keep_alive() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("listener");
    let port = listener.local_addr().expect("address").port();
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connects");
    keep_alive(&stream).expect("keepalive set");
    let socket = socket2::SockRef::from(&stream);
    assert!(socket.keepalive().expect("keepalive"));
    assert_eq!(
        socket.tcp_keepalive_time().expect("idle"),
        Duration::from_secs(30)
    );
    assert_eq!(
        socket.tcp_keepalive_interval().expect("interval"),
        Duration::from_secs(10)
    );
    assert_eq!(socket.tcp_keepalive_retries().expect("probes"), 3);
}
