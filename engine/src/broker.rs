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
                    match notification {
                        Some(Notification::Forward(forward)) => {
                            let topic =
                                String::from_utf8_lossy(&forward.publish.topic).into_owned();
                            if sender
                                .send((topic, forward.publish.payload.to_vec()))
                                .is_err()
                            {
                                return;
                            }
                        }
                        // The router stops forwarding to a link whose buffer
                        // filled up (a burst while this thread was behind) until
                        // the link says it is ready again: without this the
                        // subscription went silent for good.
                        Some(Notification::Unschedule) if link_rx.ready().is_err() => return,
                        _ => {}
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

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, TcpListener};
    use std::time::Duration;

    use rumqttc::{AsyncClient, Event, MqttOptions, Outgoing, QoS};

    use super::*;

    /// Far more than the router buffers for a link (200) before pausing it.
    const BURST: usize = 2_000;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_the_watcher_fell_behind_on_still_arrives_whole() {
        let address = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .expect("a free port");
        let broker = EmbeddedBroker::start(address).expect("start the broker");
        let options = MqttOptions::new("burst", "127.0.0.1", address.port());
        let (client, mut events) = AsyncClient::new(options, BURST);
        let publishing = tokio::spawn(async move {
            for n in 0..BURST {
                let payload = n.to_string().into_bytes();
                client
                    .publish("burst/n", QoS::AtMostOnce, false, payload)
                    .await
                    .expect("queue a publish");
            }
            client
        });
        // Every publish sent at once, as fast as the socket takes them: the
        // router reads them in one go and hands the watcher more than its
        // buffer holds, which pauses it.
        let (mut sent, mut refused) = (0, 0);
        while sent < BURST {
            let polled = tokio::time::timeout(Duration::from_secs(10), events.poll())
                .await
                .expect("the broker answers");
            match polled {
                Ok(Event::Outgoing(Outgoing::Publish(_))) => sent += 1,
                Ok(_) => {}
                // The broker's listener starts on a thread of its own.
                Err(error) if sent == 0 && refused < 100 => {
                    refused += 1;
                    tracing::debug!(%error, "broker not listening yet");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(error) => panic!("the connection broke: {error}"),
            }
        }
        let _client = publishing.await.expect("the publisher ends");
        let received = tokio::task::spawn_blocking(move || {
            (0..BURST)
                .map(|_| broker.messages().recv_timeout(Duration::from_secs(5)))
                .map_while(Result::ok)
                .map(|(_, payload)| String::from_utf8(payload).expect("utf-8"))
                .collect::<Vec<_>>()
        })
        .await
        .expect("the reader ends");
        let expected: Vec<String> = (0..BURST).map(|n| n.to_string()).collect();
        assert_eq!(received.len(), BURST, "messages received of {BURST}");
        assert_eq!(received, expected);
    }
}
