//! An in-process MQTT broker (rumqttd) for the self-contained demo and for
//! benchmarks: nothing to install, loopback only.

use std::net::SocketAddr;
use std::sync::mpsc;

use rumqttd::{Broker, Config, ConnectionSettings, Notification, RouterConfig, ServerSettings};

/// A broker running on its own threads, with a local subscription to everything.
#[derive(Debug)]
pub struct EmbeddedBroker {
    address: SocketAddr,
    messages: mpsc::Receiver<(String, Vec<u8>)>,
}

impl EmbeddedBroker {
    /// Starts a broker listening on `address` (MQTT 3.1.1).
    ///
    /// # Errors
    /// When the broker's local link cannot be set up.
    pub fn start(address: SocketAddr) -> Result<Self, String> {
        let connections = ConnectionSettings {
            connection_timeout_ms: 10_000,
            max_payload_size: 1 << 20,
            max_inflight_count: 1000,
            auth: None,
            external_auth: None,
            dynamic_filters: true,
        };
        let server = ServerSettings {
            name: "sluice-embedded".into(),
            listen: address,
            tls: None,
            next_connection_delay_ms: 1,
            connections,
        };
        let config = Config {
            router: RouterConfig {
                max_connections: 1000,
                max_outgoing_packet_count: 1000,
                max_segment_size: 16 << 20,
                max_segment_count: 4,
                ..RouterConfig::default()
            },
            v4: Some([("1".to_owned(), server)].into_iter().collect()),
            ..Config::default()
        };
        let mut broker = Broker::new(config);
        let (mut link_tx, mut link_rx) = broker
            .link("sluice-embedded-watch")
            .map_err(|e| e.to_string())?;
        link_tx.subscribe("#").map_err(|e| e.to_string())?;
        std::thread::Builder::new()
            .name("mqtt-broker".into())
            .spawn(move || {
                if let Err(error) = broker.start() {
                    tracing::error!(%error, "embedded MQTT broker stopped");
                }
            })
            .map_err(|e| e.to_string())?;
        let (sender, messages) = mpsc::channel();
        std::thread::Builder::new()
            .name("mqtt-watch".into())
            .spawn(move || {
                // Keeps the link alive for the subscription; ends when the broker does.
                let _link_tx = link_tx;
                while let Ok(notification) = link_rx.recv() {
                    if let Some(Notification::Forward(forward)) = notification {
                        let topic = String::from_utf8_lossy(&forward.publish.topic).into_owned();
                        if sender
                            .send((topic, forward.publish.payload.to_vec()))
                            .is_err()
                        {
                            return;
                        }
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(Self { address, messages })
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Messages published to the broker, in arrival order (topic, payload).
    pub fn messages(&self) -> &mpsc::Receiver<(String, Vec<u8>)> {
        &self.messages
    }
}
