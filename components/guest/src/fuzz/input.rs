//! One input of a coverage-guided fuzzer against a fresh session.
//!
//! Where [`run`](super::run) plays many random rounds, [`one_input`] turns a
//! byte string into exactly one call of a fresh session, so that a fuzzer's
//! input always means the same thing and a corpus file replays exactly. An
//! input is a small header and the answer's bytes ([`Input`]):
//!
//! | byte | meaning |
//! |---|---|
//! | 0 | the call ([`Call`], low two bits); bit 2 keeps the answer's echoed id as it is |
//! | 1 | handshake step, plan entry or tag |
//! | 2..11 | for a write: the value's kind, then 8 bytes of it (big-endian) |
//! | rest | the answer |
//!
//! Answers echo an id of their request (Modbus TCP's transaction id, S7's PDU
//! reference) that a fresh session chooses anew; unless bit 2 is set, the
//! request's id is copied over the answer's ([`Codec::echoed`]), so an answer
//! captured from a real device replays against any session. The same checks as
//! [`run`](super::run)'s apply to every call.

use alloc::vec::Vec;
use core::ops::Range;

use super::{Codec, MAX_FRAME, check_decoded, check_plan, check_read_refusal, frame_in, refused};
use crate::numeric::Number;

/// The call an input makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `frame-length` of the answer's first `header-len` bytes.
    Head,
    /// `check-handshake` of the answer to the handshake step sent.
    Handshake,
    /// `parse-read` of the answer to a planned read.
    Read,
    /// `check-write` of the answer to a write.
    Write,
}

/// A decoded fuzz input.
#[derive(Debug, Clone, PartialEq)]
pub struct Input<'a> {
    pub call: Call,
    /// Keep the answer's echoed id as it is.
    pub verbatim: bool,
    /// Handshake step, plan entry or tag (taken modulo what exists).
    pub index: u8,
    /// The value of a write.
    pub value: Number,
    pub answer: &'a [u8],
}

/// The header length of a write's input (call, index, kind, 8 value bytes).
const WRITE_HEADER: usize = 11;

impl<'a> Input<'a> {
    /// The input of `data`; too short an input is a head of nothing.
    pub fn parse(data: &'a [u8]) -> Self {
        let flags = data.first().copied().unwrap_or(0);
        let call = match flags & 3 {
            0 => Call::Head,
            1 => Call::Handshake,
            2 => Call::Read,
            _ => Call::Write,
        };
        let index = data.get(1).copied().unwrap_or(0);
        let (value, answer) = if call == Call::Write {
            (
                value_of(data.get(2..WRITE_HEADER)),
                data.get(WRITE_HEADER..),
            )
        } else {
            (Number::Int(0), data.get(2..))
        };
        Input {
            call,
            verbatim: flags & 4 != 0,
            index,
            value,
            answer: answer.unwrap_or(&[]),
        }
    }

    /// The bytes of this input, as [`Input::parse`] reads them.
    pub fn to_bytes(&self) -> Vec<u8> {
        let call = match self.call {
            Call::Head => 0,
            Call::Handshake => 1,
            Call::Read => 2,
            Call::Write => 3,
        };
        let mut out = Vec::with_capacity(WRITE_HEADER + self.answer.len());
        out.push(call | if self.verbatim { 4 } else { 0 });
        out.push(self.index);
        if self.call == Call::Write {
            let (kind, bits) = match &self.value {
                Number::Bool(v) => (0, u64::from(*v)),
                Number::Int(v) => (1, *v as u64),
                Number::Uint(v) => (2, *v),
                Number::Float(v) => (3, v.to_bits()),
                Number::Text(_) => (4, 0),
            };
            out.push(kind);
            out.extend_from_slice(&bits.to_be_bytes());
        }
        out.extend_from_slice(self.answer);
        out
    }
}

/// A write's value from its kind byte and 8 bytes; text is a fixed short string.
fn value_of(bytes: Option<&[u8]>) -> Number {
    let Some(bytes) = bytes else {
        return Number::Int(0);
    };
    let mut bits = [0; 8];
    bits.copy_from_slice(&bytes[1..9]);
    let bits = u64::from_be_bytes(bits);
    match bytes[0] % 5 {
        0 => Number::Bool(bits & 1 != 0),
        1 => Number::Int(bits as i64),
        2 => Number::Uint(bits),
        3 => Number::Float(f64::from_bits(bits)),
        _ => Number::Text("AB12".into()),
    }
}

/// What an input reached: whether the session accepted the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// No request to answer (no such handshake step, nothing planned).
    Nothing,
    Refused,
    Accepted,
}

/// Runs `data` against `codec`, a fresh session of `tags` tags whose answers
/// echo their request's bytes at `echo`.
///
/// # Panics
/// When the session breaks an invariant (or panics itself).
pub fn one_input(
    codec: &impl Codec,
    tags: u32,
    echo: Option<Range<usize>>,
    data: &[u8],
) -> Outcome {
    let input = Input::parse(data);
    let length = match frame_in(codec, input.answer) {
        Some(_) => Outcome::Accepted,
        None => Outcome::Refused,
    };
    let answer = |sent: &[u8]| {
        let mut frame = input.answer.to_vec();
        if let Some(echo) = echo.clone().filter(|_| !input.verbatim) {
            for at in echo {
                if let (Some(to), Some(from)) = (frame.get_mut(at), sent.get(at)) {
                    *to = *from;
                }
            }
        }
        frame
    };
    match input.call {
        Call::Head => length,
        Call::Handshake => {
            let step = u32::from(input.index % 4);
            let Some(sent) = codec.handshake(step) else {
                return Outcome::Nothing;
            };
            outcome(codec.check_handshake(step, answer(&sent)))
        }
        Call::Read => {
            let due: Vec<u32> = (0..tags).collect();
            let plan = codec.plan(due.clone());
            check_plan(&due, tags, &plan);
            if plan.is_empty() {
                return Outcome::Nothing;
            }
            let read = &plan[usize::from(input.index) % plan.len()];
            let sent = match codec.encode_read(read.id) {
                Ok(sent) => sent,
                Err(refusal) => {
                    refused(&refusal);
                    return Outcome::Refused;
                }
            };
            assert!(sent.len() <= MAX_FRAME, "a read of {} bytes", sent.len());
            match codec.parse_read(read.id, answer(&sent), 0) {
                Ok(decoded) => {
                    check_decoded(&decoded, &read.tags);
                    Outcome::Accepted
                }
                Err(refusal) => {
                    check_read_refusal(&refusal, &read.tags);
                    Outcome::Refused
                }
            }
        }
        Call::Write => {
            let tag = u32::from(input.index) % tags.max(1);
            let sent = match codec.encode_write(tag, input.value.clone()) {
                Ok(sent) => sent,
                Err(refusal) => {
                    refused(&refusal);
                    return Outcome::Refused;
                }
            };
            assert!(sent.len() <= MAX_FRAME, "a write of {} bytes", sent.len());
            outcome(codec.check_write(answer(&sent)))
        }
    }
}

fn outcome(result: Result<(), crate::session::Failure>) -> Outcome {
    match result {
        Ok(()) => Outcome::Accepted,
        Err(refusal) => {
            refused(&refusal);
            Outcome::Refused
        }
    }
}
