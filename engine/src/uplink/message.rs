//! Messages between the uplink's handle and its publisher.

use tokio::sync::oneshot;

/// A message whose PUBACK someone waits for: topic, payload, whom to tell.
pub(super) type Tracked = (String, Vec<u8>, oneshot::Sender<()>);

/// A message the broker delivered to the engine (a downlink command).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Downlink {
    pub topic: String,
    pub payload: Vec<u8>,
}
