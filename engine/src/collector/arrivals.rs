//! The messages of the devices that publish by themselves, handed to each
//! device in the order they came (PUSH-1 to PUSH-3 of `docs/push.md`): a
//! connection per broker the roster's devices publish to, subscribed to their
//! topics; each message routed by its topic to the devices whose filter it
//! matches; each device's rate enforced and the rest dropped and counted; a
//! worker per device, so a slow or hostile decoder holds up its device only.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{mpsc, watch};

use super::device::Device;
use super::fleet::Fleet;
use super::roster::Roster;
use crate::intake::{Arrived, Subscriber};

/// Messages waiting for the router, from every broker together: a full queue
/// holds the brokers' connections back (they keep what waits).
const ROUTER_QUEUE: usize = 4096;
/// Messages waiting for one device's worker: beyond them the device's
/// messages are dropped (and counted), whatever its rate.
const DEVICE_QUEUE: usize = 256;

/// Routes the messages of the roster's devices until `shutdown`, following
/// the roster as devices change.
pub async fn route(fleet: Arc<Fleet>, mut shutdown: watch::Receiver<bool>) {
    let (to_router, mut arrivals) = mpsc::channel::<Arrived>(ROUTER_QUEUE);
    let mut devices_changed = fleet.subscribe();
    let mut routes = Routes::of(&fleet.roster());
    let mut brokers: HashMap<String, Subscriber> = HashMap::new();
    connect(&fleet, &routes, &mut brokers, &to_router, &shutdown);
    let mut workers: HashMap<u64, mpsc::Sender<Arc<Arrived>>> = HashMap::new();
    loop {
        tokio::select! {
            Some(message) = arrivals.recv() => {
                // Shared by the devices it reaches: the payload is not copied.
                let message = Arc::new(message);
                for device in routes.matching(&message.topic) {
                    hand_over(&fleet, device, &message, &mut workers);
                }
            }
            Ok(()) = devices_changed.changed() => {
                routes = Routes::of(&fleet.roster());
                // A removed or rebuilt device's worker ends with its queue.
                workers.retain(|key, _| routes.keys.contains(key));
                connect(&fleet, &routes, &mut brokers, &to_router, &shutdown);
            }
            _ = shutdown.changed() => return,
        }
    }
}

/// Gives `message` to `device`'s worker, if the device is this engine's and
/// within its rate; counts it either way.
fn hand_over(
    fleet: &Arc<Fleet>,
    device: &Arc<Device>,
    message: &Arc<Arrived>,
    workers: &mut HashMap<u64, mpsc::Sender<Arc<Arrived>>>,
) {
    let Some(push) = &device.push else {
        return;
    };
    // Another engine owns it: its messages are that engine's (STATE-S7).
    if !fleet.owns(&device.id) {
        return;
    }
    push.counters.received.inc();
    if !push.admit(Instant::now()) {
        push.counters.dropped.inc();
        return;
    }
    let worker = workers
        .entry(device.key)
        .or_insert_with(|| spawn_worker(Arc::clone(fleet), Arc::clone(device)));
    if worker.try_send(Arc::clone(message)).is_err() {
        push.counters.dropped.inc();
    }
}

/// A device's worker: its messages one after another, until its queue closes.
fn spawn_worker(fleet: Arc<Fleet>, device: Arc<Device>) -> mpsc::Sender<Arc<Arrived>> {
    let (to_worker, mut messages) = mpsc::channel::<Arc<Arrived>>(DEVICE_QUEUE);
    tokio::spawn(async move {
        while let Some(message) = messages.recv().await {
            let services = fleet.services();
            device
                .ingest(&message, &services.seq, &services.uplink)
                .await;
        }
    });
    to_worker
}

/// Starts a connection for every broker the routes need, and gives each its
/// topics; a broker no device needs any more keeps its connection, with no
/// subscription.
fn connect(
    fleet: &Fleet,
    routes: &Routes,
    brokers: &mut HashMap<String, Subscriber>,
    to_router: &mpsc::Sender<Arrived>,
    shutdown: &watch::Receiver<bool>,
) {
    for subscriber in brokers.values() {
        let key = subscriber.target().key();
        subscriber.subscribe(routes.filters.get(&key).cloned().unwrap_or_default());
    }
    for (key, filters) in &routes.filters {
        if brokers.contains_key(key) {
            continue;
        }
        let Some(target) = routes.targets.get(key) else {
            continue;
        };
        let subscriber = Subscriber::start(
            target.clone(),
            filters.clone(),
            to_router.clone(),
            shutdown.clone(),
        );
        fleet
            .services()
            .device_brokers
            .insert(key.clone(), subscriber.publisher());
        brokers.insert(key.clone(), subscriber);
    }
}

/// Which devices a topic reaches.
#[derive(Default)]
struct Routes {
    /// Devices by the topic they publish on, for filters without wildcards.
    exact: HashMap<String, Vec<Arc<Device>>>,
    /// Devices whose filter has a wildcard, with the filter's levels.
    wild: Vec<(Vec<String>, Arc<Device>)>,
    /// The filters to subscribe to, by broker.
    filters: HashMap<String, BTreeSet<String>>,
    targets: HashMap<String, crate::intake::BrokerTarget>,
    /// The devices routed to.
    keys: BTreeSet<u64>,
}

impl Routes {
    fn of(roster: &Roster) -> Self {
        let mut routes = Routes::default();
        for device in roster.devices() {
            let Some(push) = &device.push else {
                continue;
            };
            let broker = push.broker.key();
            routes
                .filters
                .entry(broker.clone())
                .or_default()
                .insert(push.topic.clone());
            routes
                .targets
                .entry(broker)
                .or_insert_with(|| push.broker.clone());
            routes.keys.insert(device.key);
            if push.topic.contains(['+', '#']) {
                let levels = push.topic.split('/').map(str::to_owned).collect();
                routes.wild.push((levels, Arc::clone(device)));
            } else {
                routes
                    .exact
                    .entry(push.topic.clone())
                    .or_default()
                    .push(Arc::clone(device));
            }
        }
        routes
    }

    /// The devices whose filter `topic` matches.
    fn matching<'r>(&'r self, topic: &str) -> impl Iterator<Item = &'r Arc<Device>> {
        let exact = self.exact.get(topic).into_iter().flatten();
        // Split only when some filter has a wildcard: most fleets have none.
        let levels: Vec<&str> = if self.wild.is_empty() {
            Vec::new()
        } else {
            topic.split('/').collect()
        };
        let wild = self
            .wild
            .iter()
            .filter(move |(filter, _)| matches(filter, &levels))
            .map(|(_, device)| device);
        exact.chain(wild)
    }
}

/// Whether a topic's `levels` match a filter's (`+` one level, `#` the rest,
/// none of it starting with `$` at the first level, as MQTT says).
fn matches(filter: &[String], levels: &[&str]) -> bool {
    if levels.first().is_some_and(|l| l.starts_with('$'))
        && filter.first().is_some_and(|f| f == "+" || f == "#")
    {
        return false;
    }
    let mut levels = levels.iter();
    for part in filter {
        match (part.as_str(), levels.next()) {
            ("#", _) => return true,
            ("+", Some(_)) => {}
            (literal, Some(level)) if literal == *level => {}
            _ => return false,
        }
    }
    levels.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn filters_match_as_mqtt_says() {
        let cases = [
            ("a/+/c", "a/b/c", true),
            ("a/+/c", "a/b/d", false),
            ("a/+", "a/b/c", false),
            ("a/#", "a", true),
            ("a/#", "a/b/c", true),
            ("#", "$SYS/x", false),
            ("+/x", "$SYS/x", false),
            ("$SYS/#", "$SYS/x", true),
            ("a/b", "a/b", true),
            ("a/b", "a/b/c", false),
            ("+/+", "a/", true),
        ];
        for (filter, topic, expected) in cases {
            let filter: Vec<String> = filter.split('/').map(str::to_owned).collect();
            let levels: Vec<&str> = topic.split('/').collect();
            assert_eq!(matches(&filter, &levels), expected, "{filter:?} {topic}");
        }
    }
}
