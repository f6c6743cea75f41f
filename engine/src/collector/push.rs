//! A device that publishes by itself (`protocol: mqtt`): its decoder, the
//! topic its messages arrive on, what it may send, and what one message
//! becomes: samples of its tags, BAD with the decoder's reason where it gave
//! none (PUSH-2 of `docs/push.md`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::watch;

use crate::intake::{Arrived, BrokerPublisher, BrokerState, BrokerTarget};
use crate::model::Batch;
use crate::runtime::PayloadDecoder;
use crate::sync::{Swappable, lock};
use crate::telemetry::Counter;

/// The input of a device that publishes by itself.
#[derive(Debug)]
pub struct PushInput {
    /// Taken once per message: a new version applies from the next message.
    pub decoder: Swappable<PayloadDecoder>,
    /// The topic filter its messages arrive on, its placeholders filled in.
    pub topic: String,
    /// Where a write is published, when the device takes writes.
    pub command_topic: Option<String>,
    /// The broker its messages arrive on.
    pub broker: BrokerTarget,
    /// Device indexes of the tags a message should carry (not write-only).
    pub readable: Vec<u32>,
    limit: Mutex<RateLimit>,
    pub counters: MessageCounters,
    /// Where writes are published: the connection to its broker, once made.
    brokers: Arc<DeviceBrokers>,
    /// Counts the messages handled, so a write's read-back waits for the next.
    handled: watch::Sender<u64>,
}

/// The connections to the device brokers, by [`BrokerTarget::key`]: what
/// writes to devices that publish by themselves go out on.
#[derive(Debug, Default)]
pub struct DeviceBrokers(Mutex<HashMap<String, BrokerPublisher>>);

impl DeviceBrokers {
    pub(super) fn insert(&self, key: String, publisher: BrokerPublisher) {
        lock(&self.0).insert(key, publisher);
    }

    fn get(&self, key: &str) -> Option<BrokerPublisher> {
        lock(&self.0).get(key).cloned()
    }

    /// Every device broker connection made, by address, and how it is doing.
    pub fn states(&self) -> Vec<(String, BrokerState)> {
        let mut states: Vec<_> = lock(&self.0)
            .values()
            .map(|publisher| (publisher.address().to_owned(), publisher.state()))
            .collect();
        states.sort_by(|a, b| a.0.cmp(&b.0));
        states
    }
}

/// What a [`PushInput`] is made of.
#[derive(Debug)]
pub struct PushSetup {
    pub decoder: PayloadDecoder,
    pub topic: String,
    pub command_topic: Option<String>,
    pub broker: BrokerTarget,
    pub readable: Vec<u32>,
    /// Messages a second it may send (`maxMessagesPerSecond`), as many at once.
    pub max_per_second: u32,
    pub counters: MessageCounters,
    pub brokers: Arc<DeviceBrokers>,
}

/// What a device's messages counted.
#[derive(Debug, Default)]
pub struct MessageCounters {
    /// Every message that arrived for it.
    pub received: Counter,
    /// Messages the decoder refused a value of (or failed on).
    pub refused: Counter,
    /// Messages dropped unread: over its rate, or its queue full.
    pub dropped: Counter,
}

/// What one message gave.
#[derive(Debug)]
pub struct Decoding {
    /// Its samples, a BAD one for each tag it should have given a value and did not.
    pub batch: Batch,
    /// Whether it counts as the device alive and well: it gave a value, or
    /// refused none (a message about something else). A device whose messages
    /// give nothing but refusals is in fault.
    pub well: bool,
    /// The decoder's words (or the failed call's), when it refused something.
    pub problem: Option<String>,
    /// The decoder's call failed (a trap, a limit).
    pub failed_call: bool,
}

impl PushInput {
    pub fn new(setup: PushSetup) -> Self {
        Self {
            decoder: Swappable::new(setup.decoder),
            topic: setup.topic,
            command_topic: setup.command_topic,
            broker: setup.broker,
            readable: setup.readable,
            limit: Mutex::new(RateLimit::new(setup.max_per_second, Instant::now())),
            counters: setup.counters,
            brokers: setup.brokers,
            handled: watch::Sender::new(0),
        }
    }

    /// The connection writes go out on; `None` before it was first made.
    pub fn publisher(&self) -> Option<BrokerPublisher> {
        self.brokers.get(&self.broker.key())
    }

    /// Tells who waits (a write's read-back) that one more message was handled.
    pub(super) fn handled(&self) {
        if self.handled.receiver_count() > 0 {
            self.handled.send_modify(|n| *n += 1);
        }
    }

    /// Told of every message handled from now on.
    pub(super) fn watch_handled(&self) -> watch::Receiver<u64> {
        self.handled.subscribe()
    }

    /// Whether one more message may be taken now (PUSH-3): the device's
    /// rate, with a second's worth of burst.
    pub fn admit(&self, now: Instant) -> bool {
        lock(&self.limit).take(now)
    }

    /// What `message` gives the device's `tags` (their number).
    pub async fn decode(&self, message: &Arc<Arrived>, tags: usize) -> Decoding {
        let at = message.arrived_ms;
        let arrived = Arc::clone(message);
        let decoded = self
            .decoder
            .get()
            .call_in_round("decode", move |decoder| {
                decoder.decode(&arrived.topic, &arrived.payload, arrived.arrived_ms)
            })
            .await;
        let mut decoded = match decoded {
            Ok(decoded) => decoded,
            Err(failure) => {
                let mut batch = Batch::default();
                self.readable.iter().for_each(|t| batch.push_bad(*t, at));
                return Decoding {
                    batch,
                    well: false,
                    problem: Some(failure.to_string()),
                    failed_call: true,
                };
            }
        };
        let mut words: Vec<String> = Vec::new();
        // A value for no tag of the device is the decoder's mistake: left out.
        decoded.samples.samples.retain(|s| {
            let known = (s.tag as usize) < tags;
            if !known {
                words.push(format!(
                    "the decoder gave a value to tag {}, which the device does not have",
                    s.tag
                ));
            }
            known
        });
        let gave = !decoded.samples.samples.is_empty();
        let mut batch = decoded.samples;
        let mut refused: Vec<u32> = Vec::new();
        for refusal in decoded.refusals {
            match refusal.tag {
                Some(tag) if self.readable.contains(&tag) => refused.push(tag),
                Some(_) => {}
                None => refused.extend(&self.readable),
            }
            words.push(refusal.message);
        }
        refused.sort_unstable();
        refused.dedup();
        for tag in refused {
            if !batch.samples.iter().any(|s| s.tag == tag) {
                batch.push_bad(tag, at);
            }
        }
        Decoding {
            batch,
            well: gave || words.is_empty(),
            problem: (!words.is_empty()).then(|| words.join("; ")),
            failed_call: false,
        }
    }
}

/// A token bucket kept in whole nanoseconds (no rounding drift): a message
/// costs a `rate`th of a second of credit, and at most a second of credit is kept.
#[derive(Debug)]
struct RateLimit {
    /// Nanoseconds of credit one message costs.
    cost: u64,
    /// Credit now, nanoseconds.
    credit: u64,
    at: Instant,
}

/// The most credit kept: a second's worth of messages at once.
const BURST_NS: u64 = 1_000_000_000;

impl RateLimit {
    fn new(rate: u32, now: Instant) -> Self {
        Self {
            cost: BURST_NS / u64::from(rate.max(1)),
            credit: BURST_NS,
            at: now,
        }
    }

    fn take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_nanos();
        let elapsed = u64::try_from(elapsed).unwrap_or(u64::MAX);
        self.credit = self.credit.saturating_add(elapsed).min(BURST_NS);
        self.at = now;
        if self.credit >= self.cost {
            self.credit -= self.cost;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::RateLimit;

    #[test]
    fn a_flood_gets_its_rate_and_a_seconds_burst_no_more() {
        let start = std::time::Instant::now();
        let mut limit = RateLimit::new(10, start);
        let burst = (0..100).filter(|_| limit.take(start)).count();
        assert_eq!(burst, 10, "a second's worth at once");
        // Then 10 a second: 100 tries every 10 ms over 2 s take 20.
        let taken = (1..=200)
            .filter(|i| limit.take(start + Duration::from_millis(i * 10)))
            .count();
        assert_eq!(taken, 20);
        // A quiet minute refills no more than a second's worth.
        let later = start + Duration::from_secs(62);
        assert_eq!((0..100).filter(|_| limit.take(later)).count(), 10);
    }
}
