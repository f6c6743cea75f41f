//! Messages devices publish by themselves, from the brokers they publish to
//! (PUSH-1 of `docs/push.md`): one MQTT connection per broker, subscribed to
//! the topics of the devices on it (changed while it runs), in a persistent
//! session (QoS 1), so what a device publishes while the connection is down
//! waits at the broker. The only module beside the uplink that knows rumqttc.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::collections::HashMap;

use rumqttc::{AsyncClient, Event, Incoming, MqttOptions, Outgoing, QoS};
use tokio::sync::{mpsc, oneshot, watch};

use crate::clock::now_ms;
use crate::config::{BackoffConfig, TlsConfig};
use crate::model::Secret;
use crate::sync::lock;

/// A broker devices publish to, and how the engine logs in there.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerTarget {
    pub host: String,
    pub port: u16,
    /// Over TLS, how.
    pub tls: Option<TlsConfig>,
    pub username: Option<String>,
    pub password: Option<Secret>,
    /// The session's client id: the broker keeps the subscriptions and the
    /// messages that wait by it.
    pub client_id: String,
}

impl BrokerTarget {
    /// `host:port`, for logs and errors.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// What tells two targets apart: devices with equal keys share a connection.
    pub fn key(&self) -> String {
        let user = self.username.as_deref().unwrap_or("");
        let scheme = if self.tls.is_some() { "mqtts" } else { "mqtt" };
        format!("{scheme}://{user}@{}:{}", self.host, self.port)
    }
}

/// A message a device published.
#[derive(Debug, Clone)]
pub struct Arrived {
    pub topic: String,
    pub payload: bytes::Bytes,
    /// When the engine read it, ms since the Unix epoch.
    pub arrived_ms: i64,
}

/// How one broker connection is doing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrokerState {
    pub connected: bool,
    /// Why the last connection failed, if it did.
    pub last_error: Option<String>,
    /// Messages received since the engine started.
    pub messages: u64,
}

/// One broker connection, running: its subscriptions change with
/// [`Subscriber::subscribe`]; it publishes what [`BrokerPublisher`]s hand it.
#[derive(Debug)]
pub struct Subscriber {
    target: BrokerTarget,
    filters: watch::Sender<BTreeSet<String>>,
    publisher: BrokerPublisher,
}

/// Why a message was not published for sure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotPublished {
    /// The connection is down: nothing was sent.
    #[error("not connected to the device broker {0}: nothing was sent")]
    Unreachable(String),
    /// It went out, but the connection ended before the broker acknowledged it.
    #[error("the connection to the device broker {0} ended before it acknowledged the message")]
    Lost(String),
}

/// A message to publish, and who waits for its acknowledgement.
#[derive(Debug)]
struct Publish {
    topic: String,
    payload: Vec<u8>,
    done: oneshot::Sender<Result<(), NotPublished>>,
}

/// Publishes on one device broker's connection (QoS 1), for writes to devices.
#[derive(Debug, Clone)]
pub struct BrokerPublisher {
    address: String,
    requests: mpsc::Sender<Publish>,
    state: Arc<Mutex<BrokerState>>,
}

impl BrokerPublisher {
    /// The broker's address, as logged.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// How its connection is doing.
    pub fn state(&self) -> BrokerState {
        lock(&self.state).clone()
    }

    /// Publishes `payload` on `topic`; returns once the broker acknowledged it.
    ///
    /// # Errors
    /// Nothing sent (no connection), or sent and not acknowledged.
    pub async fn publish(&self, topic: String, payload: Vec<u8>) -> Result<(), NotPublished> {
        let (done, acknowledged) = oneshot::channel();
        let request = Publish {
            topic,
            payload,
            done,
        };
        if self.requests.send(request).await.is_err() {
            return Err(NotPublished::Unreachable(self.address.clone()));
        }
        acknowledged
            .await
            .unwrap_or_else(|_| Err(NotPublished::Lost(self.address.clone())))
    }
}

/// Filters a SUBSCRIBE carries at most.
const FILTERS_PER_SUBSCRIBE: usize = 100;
/// Requests the client queues before its event loop sends them: subscriptions
/// for that many SUBSCRIBEs, and the writes waiting to go out.
const REQUESTS: usize = 1024;

/// The largest message read from a device broker: bigger ones close the
/// connection (the broker's to refuse first).
const MAX_MESSAGE: usize = 1 << 20;
/// How the connection is retried: 100 ms doubling to 5 s, ±20%.
const BACKOFF: BackoffConfig = BackoffConfig {
    base_ms: 100,
    max_ms: 5000,
    jitter: 0.2,
};

impl Subscriber {
    /// Connects to `target` (and again whenever the connection is lost),
    /// subscribed to `filters`; hands every message to `to` until `shutdown`.
    /// A full `to` holds the connection's reading back, so nothing is dropped here.
    pub fn start(
        target: BrokerTarget,
        filters: BTreeSet<String>,
        to: mpsc::Sender<Arrived>,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        let (sender, wanted) = watch::channel(filters);
        let state = Arc::new(Mutex::new(BrokerState::default()));
        let (requests, publishes) = mpsc::channel(64);
        let publisher = BrokerPublisher {
            address: target.address(),
            requests,
            state: Arc::clone(&state),
        };
        let connection = Connection {
            target: target.clone(),
            wanted,
            state: Arc::clone(&state),
            to,
            publishes,
        };
        tokio::spawn(run(connection, shutdown));
        Self {
            target,
            filters: sender,
            publisher,
        }
    }

    /// Publishes on this connection.
    pub fn publisher(&self) -> BrokerPublisher {
        self.publisher.clone()
    }

    pub fn target(&self) -> &BrokerTarget {
        &self.target
    }

    /// Subscribes to exactly `filters` from now on.
    pub fn subscribe(&self, filters: BTreeSet<String>) {
        self.filters.send_if_modified(|wanted| {
            let changed = *wanted != filters;
            *wanted = filters;
            changed
        });
    }
}

/// What one broker's connection task owns.
struct Connection {
    target: BrokerTarget,
    wanted: watch::Receiver<BTreeSet<String>>,
    state: Arc<Mutex<BrokerState>>,
    to: mpsc::Sender<Arrived>,
    publishes: mpsc::Receiver<Publish>,
}

async fn run(mut connection: Connection, mut shutdown: watch::Receiver<bool>) {
    let mut failures: u32 = 0;
    loop {
        let ended = connection.once(&mut shutdown).await;
        match ended {
            Ended::Stopped => return,
            Ended::Failed(cause) => {
                failures = failures.saturating_add(1);
                let first = {
                    let mut state = lock(&connection.state);
                    let first = state.connected || state.last_error.as_deref() != Some(&cause);
                    state.connected = false;
                    state.last_error = Some(cause.clone());
                    first
                };
                if first {
                    tracing::warn!(broker = %connection.target.address(), error = %cause, "device broker connection failed; retrying");
                }
            }
        }
        let jitter = (now_ms().rem_euclid(1000) as f64) / 1000.0;
        let wait = crate::io::delay(&BACKOFF, failures, jitter);
        // While down, a write is refused at once: nothing was sent.
        let until = tokio::time::sleep(wait);
        tokio::pin!(until);
        loop {
            tokio::select! {
                () = &mut until => break,
                Some(publish) = connection.publishes.recv() => {
                    let address = connection.target.address();
                    let _ = publish.done.send(Err(NotPublished::Unreachable(address)));
                }
                _ = shutdown.changed() => return,
            }
        }
    }
}

enum Ended {
    Stopped,
    Failed(String),
}

impl Connection {
    fn options(&self) -> Result<MqttOptions, String> {
        let target = &self.target;
        let mut options = MqttOptions::new(&target.client_id, &target.host, target.port);
        options
            .set_keep_alive(Duration::from_secs(30))
            .set_clean_session(false)
            .set_max_packet_size(MAX_MESSAGE, MAX_MESSAGE);
        if let Some(username) = &target.username {
            let password = target.password.as_ref().map_or("", Secret::expose);
            options.set_credentials(username, password);
        }
        if let Some(tls) = &target.tls {
            // Read at every connect: a rotated certificate is used from the next one.
            options.set_transport(crate::uplink::tls_transport(tls)?);
        }
        Ok(options)
    }

    /// One connection, until it fails or the engine stops.
    async fn once(&mut self, shutdown: &mut watch::Receiver<bool>) -> Ended {
        let options = match self.options() {
            Ok(options) => options,
            Err(problem) => return Ended::Failed(problem),
        };
        let (client, mut events) = AsyncClient::new(options, REQUESTS);
        let mut subscribed: BTreeSet<String> = BTreeSet::new();
        let mut up = false;
        // Writes handed to the client, waiting for their packet id, in order;
        // then by packet id, waiting for their PUBACK.
        let mut numbering: std::collections::VecDeque<oneshot::Sender<Result<(), NotPublished>>> =
            std::collections::VecDeque::new();
        let mut unacknowledged: HashMap<u16, oneshot::Sender<Result<(), NotPublished>>> =
            HashMap::new();
        let ended = loop {
            tokio::select! {
                event = events.poll() => match event {
                    Ok(Event::Incoming(Incoming::ConnAck(_))) => {
                        up = true;
                        {
                            let mut state = lock(&self.state);
                            state.connected = true;
                            state.last_error = None;
                        }
                        tracing::info!(broker = %self.target.address(), "device broker connected");
                        let filters = self.wanted.borrow_and_update().clone();
                        if change(&client, &mut subscribed, filters).is_err() {
                            break Ended::Failed("the client stopped".into());
                        }
                    }
                    Ok(Event::Incoming(Incoming::Publish(message))) => {
                        lock(&self.state).messages += 1;
                        let arrived = Arrived {
                            topic: message.topic,
                            payload: message.payload,
                            arrived_ms: now_ms(),
                        };
                        if self.to.send(arrived).await.is_err() {
                            break Ended::Stopped;
                        }
                    }
                    Ok(Event::Outgoing(Outgoing::Publish(pkid))) => {
                        if let Some(done) = numbering.pop_front() {
                            unacknowledged.insert(pkid, done);
                        }
                    }
                    Ok(Event::Incoming(Incoming::PubAck(ack))) => {
                        if let Some(done) = unacknowledged.remove(&ack.pkid) {
                            let _ = done.send(Ok(()));
                        }
                    }
                    Ok(_) => {}
                    Err(error) => break Ended::Failed(crate::uplink::connection_cause(&error)),
                },
                Ok(()) = self.wanted.changed(), if up => {
                    let filters = self.wanted.borrow_and_update().clone();
                    if change(&client, &mut subscribed, filters).is_err() {
                        break Ended::Failed("the client stopped".into());
                    }
                }
                Some(publish) = self.publishes.recv() => {
                    let address = self.target.address();
                    if !up {
                        let _ = publish.done.send(Err(NotPublished::Unreachable(address)));
                        continue;
                    }
                    match client.try_publish(publish.topic, QoS::AtLeastOnce, false, publish.payload) {
                        Ok(()) => numbering.push_back(publish.done),
                        Err(_) => {
                            let _ = publish.done.send(Err(NotPublished::Unreachable(address)));
                        }
                    }
                }
                _ = shutdown.changed() => {
                    let _ = client.try_disconnect();
                    break Ended::Stopped;
                }
            }
        };
        // What went out and was not acknowledged may have reached the broker.
        let address = self.target.address();
        for done in numbering.into_iter().chain(unacknowledged.into_values()) {
            let _ = done.send(Err(NotPublished::Lost(address.clone())));
        }
        ended
    }
}

/// Subscribes to the filters of `wanted` not yet subscribed (several a
/// SUBSCRIBE), and unsubscribes from those no longer wanted. Requests are
/// queued without waiting: the event loop that sends them is this task's.
fn change(
    client: &AsyncClient,
    subscribed: &mut BTreeSet<String>,
    wanted: BTreeSet<String>,
) -> Result<(), rumqttc::ClientError> {
    let new: Vec<&String> = wanted.difference(subscribed).collect();
    for chunk in new.chunks(FILTERS_PER_SUBSCRIBE) {
        let filters = chunk
            .iter()
            .map(|filter| rumqttc::SubscribeFilter::new((*filter).clone(), QoS::AtLeastOnce));
        client.try_subscribe_many(filters)?;
    }
    for filter in subscribed.difference(&wanted) {
        // A filter left subscribed brings messages no device is routed: dropped.
        if client.try_unsubscribe(filter.as_str()).is_err() {
            tracing::debug!(%filter, "unsubscribe not queued");
        }
    }
    *subscribed = wanted;
    Ok(())
}
