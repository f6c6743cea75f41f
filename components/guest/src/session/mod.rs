//! The session kit: the protocol-independent half of a codec session.
//!
//! Every codec plans reads into requests, hands out request ids, keeps the read
//! and the write in flight, and splits a merged request the device refused. This
//! module does that once, generic over the codec's request type (a [`Request`]);
//! the codec keeps what is its protocol's own: addresses, frames, limits.
//!
//! - [`merge`]: the [`Request`] trait, merging sorted reads and halving a request.
//! - [`plans`]: request ids, the plan cache and the split points learnt so far.
//! - [`exchange`]: fresh exchange ids and the read and write in flight.
//! - [`failure`]: a refused call, the WIT `frame-error` in the kit's types.
//! - [`ranges`]: requests for contiguous ranges of one area (Modbus tables, MC devices).
//! - [`range_codec`]: the WIT calls of a codec whose requests are ranges, over
//!   its protocol's hooks.
//!
//! The types take `&mut self`; a codec keeps them in the `RefCell` of its session
//! state, as the WIT resource methods take `&self`.

pub mod exchange;
pub mod failure;
pub mod merge;
pub mod plans;
pub mod range_codec;
pub mod ranges;

pub use exchange::InFlight;
pub use failure::{Failure, tag_at};
pub use merge::Request;
pub use plans::{Planned, Plans};
