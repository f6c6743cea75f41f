//! The MQTT uplink (rumqttc): report and status publishing, the collector's own
//! status topic with a Last Will, and the connection's counters.
//!
//! Topics are `{prefix}/{productId}/{deviceNum}/{suffix}`, without a leading slash
//! when the prefix is empty. The collector itself publishes a retained status on
//! `{prefix}/collector/{clientId}/status/post`; the broker publishes the Last Will
//! (`{"status":"offline"}`, retained) there when the engine dies or loses its
//! connection for longer than the keep-alive.
//!
//! Reports are never published straight from a poll round: they go through the
//! outbox (write-ahead log) and the publisher sends them from there, releasing each
//! on its PUBACK. Publishing never blocks a poll round.

mod certificate;
mod connection;
mod guard;
mod handle;
mod message;
mod outbound;
mod publisher;
mod refusals;
mod sparkplug;
mod stats;
mod statuses;
mod tls;
mod wire;

pub use guard::{Admitted, Authority, DownlinkGuard};
pub use handle::{Uplink, UplinkIdentity};
pub use message::{Downlink, DownlinkRoute};
pub use sparkplug::{BD_SEQ_FILE, Births};
pub use stats::UplinkStats;
pub use tls::cause as connection_cause;
pub use tls::check_files as check_tls_files;

/// The TLS transport of a broker connection, its files read now (and the
/// end of the client certificate's validity, ms since the epoch).
///
/// # Errors
/// A file that cannot be read or holds no certificate or key.
pub fn tls_transport(tls: &crate::config::TlsConfig) -> Result<rumqttc::Transport, String> {
    tls::transport(tls).map(|(transport, _)| transport)
}
