//! Connections to devices: the connection budget, reconnect backoff, the link
//! state machine and the whole exchange with a device. Frames are built and parsed
//! by codecs behind the [`Framer`] trait; this module moves bytes, keeps time,
//! tells a device's refusal from a transport failure and decides when a connection
//! is lost.

mod backoff;
mod budget;
mod error;
mod exchange;
mod framer;
mod link;
mod shared;
mod transport;

#[cfg(test)]
mod tests;

pub use backoff::{Jitter, delay, exponential};
pub use budget::{Budget, BudgetExceeded, Permit};
pub use error::LinkError;
pub use exchange::{Found, FrameFinder, MAX_FRAME};
pub use framer::Framer;
pub use link::{Link, LinkSettings, LinkState, LinkStatus};
pub use shared::SharedLink;
pub use transport::{Connection, Dialer, Dialing, Stream, Tcp, keep_alive};
