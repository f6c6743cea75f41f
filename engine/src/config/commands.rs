//! `collector.commands`: durations and limits of downlink commands and writes.

use super::read::{at_least, text};
use crate::yaml::{Diagnostics, Fields, Node};

/// `collector.commands`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandConfig {
    /// `nodeId`: the node id under which this engine claims its own devices'
    /// commands (default `engine-{mqtt.clientId}`).
    pub node_id: Option<String>,
    /// `executeOwn`: whether this engine claims and writes its own devices'
    /// commands (default true); false leaves them to outside nodes.
    pub execute_own: bool,
    /// `leaseSec`: how long a claim holds (default 60).
    pub lease_sec: u64,
    /// `sentTimeoutSec`: a SENT command without a receipt this long fails (default 86400).
    pub sent_timeout_sec: u64,
    /// `expireSec`: a command not done this long after creation times out (default 259200).
    pub expire_sec: u64,
    /// `maxRetries`: requeues of a deferrable command before it times out (default 10).
    pub max_retries: u32,
    /// `maxReclaims`: reclaims after which a person is alarmed (default 5).
    pub max_reclaims: u32,
    /// `retryBaseMs` / `retryMaxMs`: backoff of a requeued command (1000 / 300000).
    pub retry_base_ms: u64,
    pub retry_max_ms: u64,
    /// `writeAttempts`: tries of one write on a lost connection or a read-back
    /// mismatch (default 3; a device's refusal is never retried).
    pub write_attempts: u32,
}

impl Default for CommandConfig {
    fn default() -> Self {
        Self {
            node_id: None,
            execute_own: true,
            lease_sec: 60,
            sent_timeout_sec: 86_400,
            expire_sec: 259_200,
            max_retries: 10,
            max_reclaims: 5,
            retry_base_ms: 1_000,
            retry_max_ms: 300_000,
            write_attempts: 3,
        }
    }
}

pub(super) fn read(node: &Node, errors: &mut Diagnostics) -> CommandConfig {
    let d = CommandConfig::default();
    let Some(mut f) = Fields::of(node, "collector.commands", errors) else {
        return d;
    };
    let config = CommandConfig {
        node_id: text(&mut f, "nodeId", errors),
        execute_own: super::read::read_at::<bool>(&mut f, "executeOwn", errors)
            .map_or(d.execute_own, |(v, _)| v),
        lease_sec: at_least(&mut f, "leaseSec", 1, d.lease_sec, errors),
        sent_timeout_sec: at_least(&mut f, "sentTimeoutSec", 1, d.sent_timeout_sec, errors),
        expire_sec: at_least(&mut f, "expireSec", 1, d.expire_sec, errors),
        max_retries: at_least(&mut f, "maxRetries", 0, d.max_retries, errors),
        max_reclaims: at_least(&mut f, "maxReclaims", 0, d.max_reclaims, errors),
        retry_base_ms: at_least(&mut f, "retryBaseMs", 1, d.retry_base_ms, errors),
        retry_max_ms: at_least(&mut f, "retryMaxMs", 1, d.retry_max_ms, errors),
        write_attempts: at_least(&mut f, "writeAttempts", 1, d.write_attempts, errors),
    };
    f.finish(errors);
    config
}
