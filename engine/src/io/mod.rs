//! Connections to devices: the connection budget, reconnect backoff and the link
//! state machine. Frames are built and parsed by codec components; this module
//! only moves bytes, keeps time and decides when a connection is lost.

mod backoff;
mod budget;
mod link;

pub use backoff::{Jitter, delay};
pub use budget::{Budget, BudgetExceeded, Permit};
pub use link::{Link, LinkError, LinkSettings, LinkState, MAX_FRAME};
