//! The harness against a toy session: a sound one passes, a lying one is caught.

use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;

use super::*;

/// Frames are a length byte and that many bytes, after any number of `FE`
/// bytes (a preamble). Every plan is one request, id 0; a read answer is
/// `[1, 0]`, a write answer echoes the tag written. `lie` is what
/// `frame-length` answers instead.
#[derive(Default)]
struct Toy {
    lie: Option<Size>,
    /// The tags of request 0, the one request of the last plan.
    planned: RefCell<Vec<u32>>,
    read: RefCell<Option<Vec<u32>>>,
    write: RefCell<Option<u8>>,
}

impl Codec for Toy {
    fn header_len(&self) -> u32 {
        1
    }

    fn frame_length(&self, head: Vec<u8>) -> Result<Size, Failure> {
        match head.first() {
            Some(_) if self.lie.is_some() => Ok(self.lie.unwrap_or(Size::Length(0))),
            Some(0xFE) => Ok(Size::Skip(1)),
            Some(&len) => Ok(Size::Length(1 + u32::from(len))),
            None => Err(Failure::Malformed("no header".into())),
        }
    }

    fn handshake(&self, _step: u32) -> Option<Vec<u8>> {
        None
    }

    fn check_handshake(&self, _step: u32, _frame: Vec<u8>) -> Result<(), Failure> {
        Err(Failure::Malformed("no handshake".into()))
    }

    fn plan(&self, due: Vec<u32>) -> Vec<Planned> {
        let mut tags: Vec<u32> = due.into_iter().filter(|&t| t < 3).collect();
        tags.sort_unstable();
        tags.dedup();
        self.planned.replace(tags.clone());
        vec![Planned { id: 0, tags }]
    }

    fn encode_read(&self, request: u32) -> Result<Vec<u8>, Failure> {
        *self.read.borrow_mut() = Some(self.planned.borrow().clone());
        match request {
            0 => Ok(vec![0]),
            _ => Err(Failure::Malformed("unknown request".into())),
        }
    }

    fn parse_read(&self, request: u32, frame: Vec<u8>, _ts_ms: i64) -> Result<Decoded, Failure> {
        let tags = self
            .read
            .borrow_mut()
            .take()
            .ok_or(Failure::Malformed("none".into()))?;
        if request != 0 || frame != [1, 0] {
            return Err(Failure::device(1, "refused".into()));
        }
        let sample = |tag| Sample {
            tag,
            good: true,
            value: None,
            span: Some((0, 1)),
        };
        Ok(Decoded {
            samples: tags.into_iter().map(sample).collect(),
            bytes: vec![0],
        })
    }

    fn encode_write(&self, tag: u32, _value: Number) -> Result<Vec<u8>, Failure> {
        if tag >= 3 {
            return Err(Failure::Malformed("unknown tag".into()));
        }
        *self.write.borrow_mut() = Some(tag as u8);
        Ok(vec![1, tag as u8])
    }

    fn check_write(&self, frame: Vec<u8>) -> Result<(), Failure> {
        match self.write.borrow_mut().take() {
            Some(tag) if frame == [1, tag] => Ok(()),
            Some(_) => Err(Failure::Malformed("no echo".into())),
            None => Err(Failure::Malformed("no write in flight".into())),
        }
    }

    fn reset(&self) {
        *self.read.borrow_mut() = None;
        *self.write.borrow_mut() = None;
    }
}

struct Device;

impl Peer for Device {
    fn read(&self, _sent: &[u8], _rng: &mut Rng) -> Vec<u8> {
        vec![1, 0]
    }

    fn write(&self, sent: &[u8]) -> Vec<u8> {
        sent.to_vec()
    }
}

#[test]
fn a_sound_session_passes_and_reaches_its_success_paths() {
    let reached = run(&Toy::default(), &Device, 3, 7, 2000);
    assert!(reached.reads > 50 && reached.writes > 50, "{reached:?}");
    assert_eq!(reached.handshakes, 0);
}

#[test]
#[should_panic(expected = "frame length 0 after seeing 1 bytes")]
fn a_frame_length_shorter_than_the_header_is_caught() {
    let liar = Toy {
        lie: Some(Size::Length(0)),
        ..Toy::default()
    };
    run(&liar, &Device, 3, 7, 2000);
}

#[test]
fn a_frame_is_found_after_the_bytes_skipped() {
    let toy = Toy::default();
    assert_eq!(frame_in(&toy, &[0xFE, 0xFE, 2, 7, 8]), Some(2..5));
    assert_eq!(frame_in(&toy, &[0xFE, 0xFE, 2, 7]), None, "ends first");
    let endless = [0xFE; 100];
    assert_eq!(
        frame_in(&toy, &endless),
        None,
        "the engine's limit of calls"
    );
}

#[test]
#[should_panic(expected = "skips 0 of 1 bytes")]
fn a_skip_of_nothing_is_caught() {
    let liar = Toy {
        lie: Some(Size::Skip(0)),
        ..Toy::default()
    };
    frame_in(&liar, &[1, 0]);
}

#[test]
#[should_panic(expected = "needs 1 bytes after seeing 1")]
fn a_need_of_no_more_bytes_is_caught() {
    let liar = Toy {
        lie: Some(Size::Need(1)),
        ..Toy::default()
    };
    frame_in(&liar, &[1, 0]);
}

#[test]
fn an_input_reads_back_as_written() {
    let answer = [1, 0, 9];
    for (call, value) in [
        (Call::Head, Number::Int(0)),
        (Call::Handshake, Number::Int(0)),
        (Call::Read, Number::Int(0)),
        (Call::Write, Number::Float(-2.5)),
        (Call::Write, Number::Bool(true)),
        (Call::Write, Number::Uint(u64::MAX)),
    ] {
        let input = Input {
            call,
            verbatim: true,
            index: 7,
            value,
            answer: &answer,
        };
        assert_eq!(Input::parse(&input.to_bytes()), input);
    }
    // Too short an input is still an input.
    assert_eq!(Input::parse(&[]).call, Call::Head);
    assert_eq!(Input::parse(&[3, 1, 4]).answer, &[] as &[u8]);
}

#[test]
fn one_input_makes_one_call_and_tells_what_it_reached() {
    let toy = || Toy::default();
    assert_eq!(one_input(&toy(), 3, None, &[2, 0, 1, 0]), Outcome::Accepted);
    assert_eq!(one_input(&toy(), 3, None, &[2, 0, 1, 1]), Outcome::Refused);
    assert_eq!(one_input(&toy(), 3, None, &[1, 0, 1, 0]), Outcome::Nothing);
    let write = |tag: u8, echo: u8| {
        let mut input = vec![3, tag, 1, 0, 0, 0, 0, 0, 0, 0, 1];
        input.extend([1, echo]);
        one_input(&toy(), 3, None, &input)
    };
    assert_eq!(write(2, 2), Outcome::Accepted);
    assert_eq!(write(2, 1), Outcome::Refused);
    // The echo range copies the request's bytes over the answer's.
    assert_eq!(
        one_input(
            &toy(),
            3,
            Some(1..2),
            &[3, 2, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0]
        ),
        Outcome::Accepted
    );
}

#[test]
#[should_panic(expected = "frame length 0 after seeing 1 bytes")]
fn one_input_catches_a_frame_length_shorter_than_the_header() {
    let liar = Toy {
        lie: Some(Size::Length(0)),
        ..Toy::default()
    };
    one_input(&liar, 3, None, &[0, 0, 5]);
}
