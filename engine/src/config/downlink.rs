//! `collector.downlink`: who may send the engine commands and configurations
//! over MQTT. A downlink message must carry a signature made with the
//! operator's key or its device's tenant's key (`tenants[].downlinkKeyFile`),
//! over its topic and payload, with a timestamp inside the window; see
//! `docs/security.md`.
//!
//! ```yaml
//! collector:
//!   downlink:
//!     requireSignature: true              # default
//!     windowSec: 300                      # default
//!     operatorKeyFile: /etc/sluice/operator.key
//!     trustedBroker: false                # default; true takes Sparkplug DCMD and NCMD
//! ```

use super::keyfile::KeyFile;
use super::read::{ranged, read_at};
use crate::yaml::{Diagnostics, Fields, Node};

/// `collector.downlink`.
#[derive(Debug, Clone, PartialEq)]
pub struct DownlinkConfig {
    /// `requireSignature`: refuse unsigned downlink messages (default true).
    /// `false` accepts them from a broker whose ACLs the operator vouches for
    /// (and so Sparkplug DCMD and NCMD too). A message that carries a bad
    /// signature is refused either way.
    pub require_signature: bool,
    /// `trustedBroker`: the broker's ACLs let only the platform publish
    /// commands, so Sparkplug DCMD and NCMD, which have no room for a
    /// signature, are taken (default false: refused while signatures are
    /// required). JSON downlinks still need their signature.
    pub trusted_broker: bool,
    /// `windowSec`: how far a message's `ts` may be from the engine's clock, in
    /// seconds (1 to 86400; default 300).
    pub window_sec: u64,
    /// `operatorKeyFile`: the operator's keys; a message signed with one of
    /// them may do anything an admin token may.
    pub operator_keys: Option<KeyFile>,
}

impl DownlinkConfig {
    /// Whether Sparkplug DCMD and NCMD, which carry no signature, are taken.
    pub fn takes_unsigned_sparkplug(&self) -> bool {
        self.trusted_broker || !self.require_signature
    }
}

impl Default for DownlinkConfig {
    fn default() -> Self {
        Self {
            require_signature: true,
            trusted_broker: false,
            window_sec: 300,
            operator_keys: None,
        }
    }
}

pub(super) fn read(node: &Node, errors: &mut Diagnostics) -> DownlinkConfig {
    let d = DownlinkConfig::default();
    let Some(mut f) = Fields::of(node, "collector.downlink", errors) else {
        return d;
    };
    let config = DownlinkConfig {
        require_signature: read_at::<bool>(&mut f, "requireSignature", errors)
            .map_or(d.require_signature, |(v, _)| v),
        trusted_broker: read_at::<bool>(&mut f, "trustedBroker", errors)
            .map_or(d.trusted_broker, |(v, _)| v),
        window_sec: ranged(&mut f, "windowSec", 1..=86_400, d.window_sec, errors),
        operator_keys: KeyFile::read(&mut f, "operatorKeyFile", errors),
    };
    f.finish(errors);
    config
}
