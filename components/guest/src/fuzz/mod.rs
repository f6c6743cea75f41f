//! One fuzz harness for the native tests of every codec.
//!
//! [`run`] drives a session through random rounds of handshakes, reads and
//! writes. The answers it feeds back come from a seed corpus of valid ones, made
//! by the codec's simulated device (a [`Peer`]) for the frames the session
//! sent, and mutated by a deterministic generator ([`Rng`]). Every call is
//! checked against the invariants all codecs keep (FUZZ-6 of `docs/fuzzing.md`):
//!
//! - no call panics;
//! - `frame-length` refuses, or gives a length from the bytes it saw to
//!   [`MAX_FRAME`], skips from one to the bytes it saw, or asks to see more bytes,
//!   up to [`MAX_FRAME`];
//! - a refusal says why (its message is not empty);
//! - a plan reads every due tag the session has, and no other;
//! - an answer to a read decodes into samples of the request's tags, good
//!   exactly when they carry a value, whose spans lie inside the batch's bytes,
//!   or it is refused; the retries of a device error read only the failed
//!   request's tags;
//! - an answer to a write nobody sent is refused;
//! - nothing grows without bound: frames and batch bytes stay within [`MAX_FRAME`].
//!
//! `codec_test_kit!` implements [`Codec`] for a codec's session. [`one_input`]
//! runs one input of a coverage-guided fuzzer under the same checks.

mod input;
mod rng;

use alloc::vec::Vec;
use core::ops::Range;

pub use input::{Call, Input, Outcome, one_input};
pub use rng::Rng;

use crate::numeric::Number;
use crate::session::{Failure, Planned};

/// The largest frame, and the most batch bytes, any codec may produce.
pub const MAX_FRAME: usize = 65_536;

/// The most `frame-length` calls the engine makes for one answer.
pub const MAX_SIZING_CALLS: usize = 64;

/// What a codec says the first bytes of an answer tell (the WIT `frame-size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    Length(u32),
    Skip(u32),
    Need(u32),
}

/// Where the frame lies in `bytes`, found as the engine finds it: the codec is
/// shown `header-len` bytes, then as many as it asks for, after the bytes it
/// skipped. `None` when it refuses, `bytes` end first, or it has not sized a
/// frame in [`MAX_SIZING_CALLS`] calls (the engine's limit).
///
/// # Panics
/// When an answer breaks the framing invariants.
pub fn frame_in(codec: &impl Codec, bytes: &[u8]) -> Option<Range<usize>> {
    let header = codec.header_len() as usize;
    assert!((1..=MAX_FRAME).contains(&header), "a header of {header}");
    let (mut start, mut shown) = (0, header);
    for _ in 0..MAX_SIZING_CALLS {
        let head = bytes.get(start..start + shown)?;
        match codec.frame_length(head.to_vec()) {
            Ok(Size::Length(len)) => {
                let len = len as usize;
                assert!(
                    (shown..=MAX_FRAME).contains(&len),
                    "frame length {len} after seeing {shown} bytes"
                );
                return bytes.get(start..start + len).map(|_| start..start + len);
            }
            Ok(Size::Skip(len)) => {
                let len = len as usize;
                assert!((1..=shown).contains(&len), "skips {len} of {shown} bytes");
                start += len;
                shown = header;
            }
            Ok(Size::Need(len)) => {
                let len = len as usize;
                assert!(
                    (shown + 1..=MAX_FRAME).contains(&len),
                    "needs {len} bytes after seeing {shown}"
                );
                shown = len;
            }
            Err(refusal) => {
                refused(&refusal);
                return None;
            }
        }
    }
    None
}

/// A sample of a decoded answer, as far as the invariants look at it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub tag: u32,
    pub good: bool,
    /// The value a sample carries decoded (a BOOL, a number, text).
    pub value: Option<Number>,
    /// Start and length of a raw value in the batch's bytes.
    pub span: Option<(u32, u32)>,
}

impl Sample {
    /// Whether the sample carries a value, decoded or raw.
    pub fn valued(&self) -> bool {
        self.value.is_some() || self.span.is_some()
    }
}

/// A decoded answer: its samples and the batch's bytes, which raw values point into.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    pub samples: Vec<Sample>,
    pub bytes: Vec<u8>,
}

/// The calls of a codec session (the WIT `session` resource) in the harness's
/// own types.
pub trait Codec {
    fn header_len(&self) -> u32;
    fn frame_length(&self, head: Vec<u8>) -> Result<Size, Failure>;
    fn handshake(&self, step: u32) -> Option<Vec<u8>>;
    fn check_handshake(&self, step: u32, frame: Vec<u8>) -> Result<(), Failure>;
    fn plan(&self, due: Vec<u32>) -> Vec<Planned>;
    fn encode_read(&self, request: u32) -> Result<Vec<u8>, Failure>;
    fn parse_read(&self, request: u32, frame: Vec<u8>, ts_ms: i64) -> Result<Decoded, Failure>;
    fn encode_write(&self, tag: u32, value: Number) -> Result<Vec<u8>, Failure>;
    fn check_write(&self, frame: Vec<u8>) -> Result<(), Failure>;
    fn reset(&self);
}

/// A simulated device: valid answers to the frames a session sends.
pub trait Peer {
    /// The answer to handshake step `step`, sent as `sent`; nothing for a
    /// protocol without a handshake.
    fn handshake(&self, step: u32, sent: &[u8], rng: &mut Rng) -> Vec<u8> {
        let _ = (step, sent, rng);
        Vec::new()
    }
    /// The answer to the read request `sent`, its data drawn from `rng`.
    fn read(&self, sent: &[u8], rng: &mut Rng) -> Vec<u8>;
    /// The answer to the write request `sent`.
    fn write(&self, sent: &[u8]) -> Vec<u8>;
}

/// How many answers of each kind the session accepted: whether the mutations
/// still reach the paths past the checks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Reached {
    pub handshakes: usize,
    pub reads: usize,
    pub writes: usize,
}

/// Runs `rounds` rounds from `seed` against a session of `tags` tags.
///
/// # Panics
/// When the session breaks an invariant (or panics itself).
pub fn run(codec: &impl Codec, peer: &impl Peer, tags: u32, seed: u64, rounds: usize) -> Reached {
    let mut fuzz = Fuzz {
        codec,
        peer,
        tags,
        rng: Rng::new(seed),
        reached: Reached::default(),
        last: Vec::new(),
    };
    for round in 0..rounds {
        fuzz.frame_length();
        match round % 4 {
            0 => fuzz.handshake(),
            1 | 2 => fuzz.read(),
            _ => fuzz.write(),
        }
        if fuzz.rng.below(100) == 0 {
            codec.reset();
        }
    }
    fuzz.reached
}

/// The state of a run.
struct Fuzz<'a, C, P> {
    codec: &'a C,
    peer: &'a P,
    tags: u32,
    rng: Rng,
    reached: Reached,
    /// The last answer built, whose head `frame_length` gets mutated.
    last: Vec<u8>,
}

impl<C: Codec, P: Peer> Fuzz<'_, C, P> {
    /// A mutation of `answer`, which is kept as the last answer.
    fn mutated(&mut self, answer: Vec<u8>) -> Vec<u8> {
        let frame = self.rng.mutate(&answer);
        self.last = answer;
        frame
    }

    fn frame_length(&mut self) {
        let answer = self.rng.mutate(&self.last);
        frame_in(self.codec, &answer);
    }

    fn handshake(&mut self) {
        let step = self.rng.below(3) as u32;
        let Some(sent) = self.codec.handshake(step) else {
            return;
        };
        let answer = self.peer.handshake(step, &sent, &mut self.rng);
        let frame = self.mutated(answer);
        match self.codec.check_handshake(step, frame) {
            Ok(()) => self.reached.handshakes += 1,
            Err(refusal) => refused(&refusal),
        }
    }

    /// Every tag, or a few tags at random (unknown ones and repeats included).
    fn due(&mut self) -> Vec<u32> {
        if self.rng.below(4) != 0 {
            return (0..self.tags).collect();
        }
        let count = self.rng.below(self.tags as usize + 2);
        (0..count)
            .map(|_| self.rng.below(self.tags as usize + 1) as u32)
            .collect()
    }

    fn read(&mut self) {
        let due = self.due();
        let plan = self.codec.plan(due.clone());
        check_plan(&due, self.tags, &plan);
        let Some(read) = plan.get(self.rng.below(plan.len())) else {
            return;
        };
        let sent = match self.codec.encode_read(read.id) {
            Ok(sent) => sent,
            Err(refusal) => return refused(&refusal),
        };
        assert!(sent.len() <= MAX_FRAME, "a read of {} bytes", sent.len());
        let answer = self.peer.read(&sent, &mut self.rng);
        let frame = self.mutated(answer);
        let id = if self.rng.below(50) == 0 {
            read.id + 1
        } else {
            read.id
        };
        match self.codec.parse_read(id, frame, 0) {
            Ok(decoded) => {
                check_decoded(&decoded, &read.tags);
                self.reached.reads += 1;
            }
            Err(refusal) => check_read_refusal(&refusal, &read.tags),
        }
    }

    fn write(&mut self) {
        let tag = self.rng.below(self.tags as usize + 1) as u32;
        let value = self.rng.number();
        let sent = match self.codec.encode_write(tag, value) {
            Ok(sent) => sent,
            Err(refusal) => {
                refused(&refusal);
                let len = self.rng.below(30);
                let stray = self.codec.check_write(self.rng.bytes(len));
                return refused(&stray.expect_err("an answer to no write"));
            }
        };
        assert!(sent.len() <= MAX_FRAME, "a write of {} bytes", sent.len());
        let answer = self.peer.write(&sent);
        let frame = self.mutated(answer);
        match self.codec.check_write(frame) {
            Ok(()) => self.reached.writes += 1,
            Err(refusal) => refused(&refusal),
        }
    }
}

fn refused(refusal: &Failure) {
    assert!(!refusal.message().is_empty(), "a refusal without a message");
}

/// A plan reads the due tags the session has, and no others.
fn check_plan(due: &[u32], tags: u32, plan: &[Planned]) {
    let mut wanted: Vec<u32> = due.iter().copied().filter(|&t| t < tags).collect();
    let mut planned: Vec<u32> = plan.iter().flat_map(|p| p.tags.iter().copied()).collect();
    wanted.sort_unstable();
    wanted.dedup();
    planned.sort_unstable();
    planned.dedup();
    assert_eq!(planned, wanted, "the plan {plan:?} for {due:?}");
}

fn check_decoded(decoded: &Decoded, tags: &[u32]) {
    let bytes = decoded.bytes.len();
    assert!(bytes <= MAX_FRAME, "{bytes} batch bytes");
    assert!(
        decoded.samples.len() <= tags.len(),
        "more samples than tags"
    );
    for sample in &decoded.samples {
        assert!(tags.contains(&sample.tag), "a sample of tag {}", sample.tag);
        assert_eq!(sample.good, sample.valued(), "quality of {sample:?}");
        if let Some((start, len)) = sample.span {
            let end = u64::from(start) + u64::from(len);
            assert!(end <= bytes as u64, "{sample:?} past the bytes");
        }
    }
}

fn check_read_refusal(refusal: &Failure, tags: &[u32]) {
    refused(refusal);
    if let Failure::Device { retry, .. } = refusal {
        for read in retry {
            assert!(read.tags.iter().all(|t| tags.contains(t)), "retry {read:?}");
        }
    }
}

#[cfg(test)]
mod tests;
