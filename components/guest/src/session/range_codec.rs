//! The session of a codec whose requests are ranges (Modbus, MC), written once:
//! what each WIT call does with the kit's [`RangeState`] around the protocol's
//! hooks, a [`RangeCodec`]. `range_session!` makes the WIT session of it.
//!
//! `V` and `B` are the codec's WIT `value` and `batch`.

use alloc::vec::Vec;
use core::cell::RefCell;

use super::failure::Failure;
use super::plans::Planned;
use super::ranges::{Area, RangeRequest, RangeState};

/// What a range codec adds to the kit: its protocol.
pub trait RangeCodec<V, B> {
    /// The protocol's areas (Modbus tables, MC devices).
    type Area: Area;
    /// What the answer to a write is checked against.
    type Echo;
    /// What a write sends, until its frame gets an exchange id.
    type Payload;

    /// Bytes to read before [`total_len`](Self::total_len) can tell a frame's size.
    fn head_len(&self) -> usize;

    /// The size of the frame that starts with `head`.
    ///
    /// # Errors
    /// A header no answer has.
    fn total_len(&self, head: &[u8]) -> Result<u32, alloc::string::String>;

    /// The frame of `read`, sent under exchange id `id`.
    fn read_frame(&self, read: &RangeRequest<Self::Area>, id: u16) -> Vec<u8>;

    /// The samples in the answer `frame` to `read`, sent under `id`.
    ///
    /// # Errors
    /// A malformed answer, or the device's error (its retries are the kit's).
    fn read_answer(
        &self,
        read: &RangeRequest<Self::Area>,
        id: u16,
        frame: &[u8],
        ts_ms: i64,
    ) -> Result<B, Failure>;

    /// Whether a device error of `code` can be blamed on the addresses asked
    /// for, so that splitting the request may isolate the tags at fault.
    fn blames_addresses(&self, code: u32) -> bool;

    /// What the answer to writing `value` to tag `tag` must echo, and what
    /// the write sends.
    ///
    /// # Errors
    /// An unknown tag, or a value the tag cannot take.
    fn write(&self, tag: u32, value: &V) -> Result<(Self::Echo, Self::Payload), Failure>;

    /// The frame of a write of `payload`, sent under exchange id `id`.
    fn write_frame(&self, payload: Self::Payload, id: u16) -> Vec<u8>;

    /// Checks the answer `frame` to the write sent under `id`.
    ///
    /// # Errors
    /// A malformed answer, or the device's error.
    fn write_answer(&self, echo: Self::Echo, id: u16, frame: &[u8]) -> Result<(), Failure>;

    /// The kit's state of the session.
    fn state(&self) -> &RefCell<RangeState<Self::Area, Self::Echo>>;
}

/// `plan`: the cached plan for `due`, or a new one.
pub fn plan<V, B>(codec: &impl RangeCodec<V, B>, due: Vec<u32>) -> Vec<Planned> {
    codec.state().borrow_mut().reads.plan(due)
}

/// `encode-read`: the frame of request `request`, now the read in flight.
///
/// # Errors
/// An unknown request.
pub fn encode_read<V, B>(codec: &impl RangeCodec<V, B>, request: u32) -> Result<Vec<u8>, Failure> {
    let mut state = codec.state().borrow_mut();
    let state = &mut *state;
    let read = state.reads.request(request).map_err(Failure::Malformed)?;
    let id = state.exchange.send_read(request);
    Ok(codec.read_frame(read, id))
}

/// `parse-read`: the samples in the answer to the read in flight; a merged
/// request the device refused for its addresses is split into retries.
///
/// # Errors
/// An answer out of turn, a malformed one, or the device's error.
pub fn parse_read<V, B>(
    codec: &impl RangeCodec<V, B>,
    request: u32,
    frame: &[u8],
    ts_ms: i64,
) -> Result<B, Failure> {
    let mut state = codec.state().borrow_mut();
    let state = &mut *state;
    let id = state
        .exchange
        .answered_read(request)
        .map_err(Failure::Malformed)?;
    let read = state.reads.request(request).map_err(Failure::Malformed)?;
    match codec.read_answer(read, id, frame, ts_ms) {
        Err(Failure::Device { code, message, .. }) if codec.blames_addresses(code) => {
            let read = read.clone();
            let retry = state.reads.split(&read);
            Err(Failure::Device {
                code,
                message,
                retry,
            })
        }
        answer => answer,
    }
}

/// `encode-write`: the frame that writes `value` to `tag`, now the write in flight.
///
/// # Errors
/// An unknown tag, or a value the tag cannot take.
pub fn encode_write<V, B>(
    codec: &impl RangeCodec<V, B>,
    tag: u32,
    value: &V,
) -> Result<Vec<u8>, Failure> {
    let (echo, payload) = codec.write(tag, value)?;
    let id = codec.state().borrow_mut().exchange.send_write(echo);
    Ok(codec.write_frame(payload, id))
}

/// `check-write`: checks the answer to the write in flight.
///
/// # Errors
/// No write in flight, a malformed answer, or the device's error.
pub fn check_write<V, B>(codec: &impl RangeCodec<V, B>, frame: &[u8]) -> Result<(), Failure> {
    let written = codec.state().borrow_mut().exchange.answered_write();
    let (id, echo) = written.map_err(Failure::Malformed)?;
    codec.write_answer(echo, id, frame)
}

/// `reset`: forgets the exchanges in flight.
pub fn reset<V, B>(codec: &impl RangeCodec<V, B>) {
    codec.state().borrow_mut().exchange.reset();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::failure::tag_at;
    use crate::session::ranges::{Extent, RangeLimits};
    use alloc::string::String;
    use alloc::vec;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Words;

    impl Area for Words {
        fn is_bits(self) -> bool {
            false
        }

        fn rank(self) -> u32 {
            0
        }
    }

    /// Frames are `[id, start, count]`; an answer `[id, 0, data..]` carries
    /// one byte a point, `[id, code]` is a device error (code 1 blames the
    /// addresses). Writes send `[id, tag, value]` and are echoed.
    struct Toy {
        tags: Vec<u8>,
        state: RefCell<RangeState<Words, u8>>,
    }

    impl RangeCodec<u8, Vec<u8>> for Toy {
        type Area = Words;
        type Echo = u8;
        type Payload = [u8; 2];

        fn head_len(&self) -> usize {
            1
        }

        fn total_len(&self, _head: &[u8]) -> Result<u32, String> {
            Err("no frames".into())
        }

        fn read_frame(&self, read: &RangeRequest<Words>, id: u16) -> Vec<u8> {
            vec![id as u8, read.start as u8, read.count as u8]
        }

        fn read_answer(
            &self,
            read: &RangeRequest<Words>,
            id: u16,
            frame: &[u8],
            _ts_ms: i64,
        ) -> Result<Vec<u8>, Failure> {
            match frame {
                [i, 0, data @ ..] if u16::from(*i) == id && data.len() == read.count as usize => {
                    Ok(data.to_vec())
                }
                [_, code] => Err(Failure::device(u32::from(*code), "refused".into())),
                _ => Err(Failure::Malformed("bad answer".into())),
            }
        }

        fn blames_addresses(&self, code: u32) -> bool {
            code == 1
        }

        fn write(&self, tag: u32, value: &u8) -> Result<(u8, [u8; 2]), Failure> {
            tag_at(&self.tags, tag)?;
            Ok((*value, [tag as u8, *value]))
        }

        fn write_frame(&self, [tag, value]: [u8; 2], id: u16) -> Vec<u8> {
            vec![id as u8, tag, value]
        }

        fn write_answer(&self, echo: u8, id: u16, frame: &[u8]) -> Result<(), Failure> {
            match frame {
                [i, _, v] if u16::from(*i) == id && *v == echo => Ok(()),
                _ => Err(Failure::Malformed("no echo".into())),
            }
        }

        fn state(&self) -> &RefCell<RangeState<Words, u8>> {
            &self.state
        }
    }

    fn toy() -> Toy {
        let extents = (0..4).map(|i| Extent {
            area: Words,
            start: i * 2,
            count: 2,
        });
        let limits = RangeLimits {
            merge_gap: 0,
            max_words: 100,
            max_bits: 0,
        };
        Toy {
            tags: vec![0; 4],
            state: RefCell::new(RangeState::new(extents, limits)),
        }
    }

    #[test]
    fn reads_take_fresh_ids_and_answer_in_turn() {
        let codec = toy();
        let plan = plan(&codec, vec![0, 1, 2, 3]);
        assert_eq!(
            plan,
            [Planned {
                id: 0,
                tags: vec![0, 1, 2, 3]
            }]
        );
        assert_eq!(encode_read(&codec, 0), Ok(vec![1, 0, 8]));
        assert!(matches!(encode_read(&codec, 5), Err(Failure::Malformed(_))));
        let data = [1, 0, 1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(parse_read(&codec, 0, &data, 0), Ok(data[2..].to_vec()));
        assert!(parse_read(&codec, 0, &data, 0).is_err(), "answered already");
        encode_read(&codec, 0).expect("planned");
        reset(&codec);
        assert!(parse_read(&codec, 0, &data, 0).is_err(), "forgotten");
    }

    #[test]
    fn device_errors_blaming_the_addresses_split_the_request() {
        let codec = toy();
        let id = plan(&codec, vec![0, 1, 2, 3])[0].id;
        encode_read(&codec, id).expect("planned");
        let Err(Failure::Device { code: 1, retry, .. }) = parse_read(&codec, id, &[1, 1], 0) else {
            panic!("a device error");
        };
        let halves: Vec<Vec<u32>> = retry.iter().map(|r| r.tags.clone()).collect();
        assert_eq!(halves, [vec![0, 1], vec![2, 3]]);
        encode_read(&codec, retry[0].id).expect("a retry");
        let busy = parse_read(&codec, retry[0].id, &[3, 2], 0);
        assert_eq!(busy, Err(Failure::device(2, "refused".into())), "final");
        assert_eq!(plan(&codec, vec![0, 1, 2, 3]).len(), 2, "the split is kept");
    }

    #[test]
    fn writes_are_checked_against_their_echo() {
        let codec = toy();
        assert!(
            check_write(&codec, &[1, 0, 7]).is_err(),
            "nothing in flight"
        );
        assert_eq!(encode_write(&codec, 2, &7), Ok(vec![1, 2, 7]));
        assert_eq!(check_write(&codec, &[1, 2, 7]), Ok(()));
        assert!(matches!(
            encode_write(&codec, 9, &7),
            Err(Failure::Malformed(_))
        ));
        encode_write(&codec, 2, &7).expect("a tag");
        assert!(check_write(&codec, &[2, 2, 8]).is_err());
    }
}
