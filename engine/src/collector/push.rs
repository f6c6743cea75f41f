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
use crate::runtime::{CallError, Decoded, Ingester, PayloadDecoder, PoolHealth, Refusal};
use crate::sync::{Swappable, lock};
use crate::telemetry::Counter;

/// The input of a device that publishes by itself.
#[derive(Debug)]
pub struct PushInput {
    /// Taken once per message: a new version applies from the next message.
    pub decoder: Swappable<PayloadDecoder>,
    /// The decoder and the pipeline in one call, when both are the engine's
    /// own; taken once per message, and used instead of the two apart.
    pub ingester: Swappable<Option<Ingester>>,
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
    pub ingester: Option<Ingester>,
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
    /// Whether `batch` has been through the device's pipeline already (one call).
    pub processed: bool,
    /// Whether the decoder gave any tag a value.
    pub gave: bool,
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
            ingester: Swappable::new(setup.ingester),
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

    /// How the pools that read its messages are doing: its decoder's, and
    /// the one call's when it has one (a failure of either is its decoder's).
    pub fn reader_health(&self) -> Vec<PoolHealth> {
        let mut health = vec![self.decoder.get().health()];
        if let Some(ingester) = &*self.ingester.get() {
            health.push(ingester.health());
        }
        health
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

    /// What `message` gives the device's `tags` (their number), decoded by
    /// the decoder; its batch still to go through the pipeline.
    pub async fn decode(&self, message: &Arc<Arrived>, tags: usize) -> Decoding {
        let arrived = Arc::clone(message);
        let decoded = self
            .decoder
            .get()
            .call_in_round("decode", move |decoder| {
                decoder.decode(&arrived.topic, &arrived.payload, arrived.arrived_ms)
            })
            .await;
        let Decoded {
            samples: mut batch,
            refusals,
        } = match decoded {
            Ok(decoded) => decoded,
            Err(failure) => return self.failed(&failure, message.arrived_ms),
        };
        let mut words = Vec::new();
        keep_known(&mut batch, tags, &mut words);
        let gave = !batch.samples.is_empty();
        for tag in self.refused(&refusals) {
            if !batch.samples.iter().any(|s| s.tag == tag) {
                batch.push_bad(tag, message.arrived_ms);
            }
        }
        finish(batch, false, gave, refusals, words)
    }

    /// What `message` gives the device's `tags` (their number) through its
    /// pipeline, in one call of `ingester` (which marks refused tags BAD
    /// itself, as [`PushInput::decode`] does).
    pub fn ingest(&self, ingester: &Ingester, message: &Arrived, tags: usize) -> Decoding {
        let ingested = ingester.ingest(&message.topic, &message.payload, message.arrived_ms);
        let mut ingested = match ingested {
            Ok(ingested) => ingested,
            Err(failure) => return self.failed(&failure, message.arrived_ms),
        };
        let mut words = Vec::new();
        keep_known(&mut ingested.samples, tags, &mut words);
        finish(
            ingested.samples,
            true,
            ingested.gave,
            ingested.refusals,
            words,
        )
    }

    /// A decoder call that failed: every readable tag BAD, stamped `at`.
    fn failed(&self, failure: &CallError, at: i64) -> Decoding {
        let mut batch = Batch::default();
        self.readable.iter().for_each(|t| batch.push_bad(*t, at));
        Decoding {
            batch,
            processed: false,
            gave: false,
            well: false,
            problem: Some(failure.to_string()),
            failed_call: true,
        }
    }

    /// The readable tags `refusals` name (all of them, for a refusal of the
    /// whole message), in order (PUSH-2).
    fn refused(&self, refusals: &[Refusal]) -> Vec<u32> {
        let mut refused: Vec<u32> = Vec::new();
        for refusal in refusals {
            match refusal.tag {
                Some(tag) if self.readable.contains(&tag) => refused.push(tag),
                Some(_) => {}
                None => refused.extend(&self.readable),
            }
        }
        refused.sort_unstable();
        refused.dedup();
        refused
    }
}

/// Leaves out a value for a tag the device does not have (of `tags`): the
/// decoder's mistake, put in `words`.
fn keep_known(batch: &mut Batch, tags: usize, words: &mut Vec<String>) {
    batch.samples.retain(|s| {
        let known = (s.tag as usize) < tags;
        if !known {
            words.push(format!(
                "the decoder gave a value to tag {}, which the device does not have",
                s.tag
            ));
        }
        known
    });
}

/// A message's [`Decoding`], its refusals' words after `words`.
fn finish(
    batch: Batch,
    processed: bool,
    gave: bool,
    refusals: Vec<Refusal>,
    mut words: Vec<String>,
) -> Decoding {
    words.extend(refusals.into_iter().map(|r| r.message));
    Decoding {
        batch,
        processed,
        gave,
        well: gave || words.is_empty(),
        problem: (!words.is_empty()).then(|| words.join("; ")),
        failed_call: false,
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
    use std::path::Path;
    use std::sync::Arc;
    use std::time::Duration;

    use super::{PushInput, PushSetup, RateLimit};
    use crate::intake::{Arrived, BrokerTarget};
    use crate::model::{Access, ByteOrder, DataType, TagSpec};
    use crate::pipeline::{DEFAULT_PIPELINE, Pipeline, load_str};
    use crate::runtime::{Limits, Registry, Runtime, RuntimeConfig};

    fn tag(key: &str, data_type: DataType, factor: f64, deadband: f64) -> TagSpec {
        TagSpec {
            key: key.into(),
            address: format!("/{key}").into(),
            data_type,
            length: 0,
            byte_order: ByteOrder::Abcd,
            factor,
            offset: 0.0,
            deadband,
            access: Access::Read,
            settings: Vec::new(),
        }
    }

    /// A device's push input over `json` with the default pipeline, and the
    /// pipeline its two-call path runs, within `limits`.
    struct Fixture {
        input: PushInput,
        pipeline: crate::pipeline::DevicePipeline,
        tags: usize,
    }

    impl Fixture {
        fn new(limits: Limits) -> Self {
            let registry =
                Registry::with_builtins(Runtime::new(RuntimeConfig::default()).expect("runtime"))
                    .expect("registry");
            let tags: Arc<[TagSpec]> = Arc::from([
                tag("a", DataType::Float64, 0.5, 1.0),
                tag("b", DataType::Int16, 1.0, 1.0),
                TagSpec {
                    access: Access::Write,
                    ..tag("w", DataType::Uint16, 1.0, 0.0)
                },
                TagSpec {
                    length: 2,
                    ..tag("arr", DataType::Int32, 2.0, 1.0)
                },
            ]);
            let spec = load_str("default.yaml", DEFAULT_PIPELINE, "default", Path::new("."))
                .expect("parses");
            let pipeline = Pipeline::build(&spec, &registry, limits).expect("builds");
            let pipeline = pipeline.for_device(&tags).expect("configured");
            let chain = pipeline.chained().expect("built-in stages only").to_vec();
            let json = registry.active("json").expect("built in");
            let runtime = registry.runtime();
            let decoder = (runtime.decoder_pool(&json, limits).expect("pool"))
                .decoder(&[], Arc::clone(&tags), false)
                .expect("decoder");
            let ingester = (runtime.ingest_pool(&json, limits).expect("pool"))
                .ingester(&[], &chain, Arc::clone(&tags))
                .expect("ingester");
            let input = PushInput::new(PushSetup {
                decoder,
                ingester: Some(ingester),
                topic: "m/up".into(),
                command_topic: None,
                broker: BrokerTarget {
                    host: "127.0.0.1".into(),
                    port: 1883,
                    tls: None,
                    username: None,
                    password: None,
                    client_id: "test".into(),
                },
                readable: vec![0, 1, 3],
                max_per_second: 100,
                counters: super::MessageCounters::default(),
                brokers: Arc::default(),
            });
            Self {
                input,
                pipeline,
                tags: tags.len(),
            }
        }

        /// What `payload` gives in one call.
        fn ingest(&self, payload: &Arrived) -> super::Decoding {
            let ingester = self.input.ingester.get();
            let ingester = (*ingester).as_ref().expect("an ingester");
            self.input.ingest(ingester, payload, self.tags)
        }
    }

    fn arrived(payload: Vec<u8>, arrived_ms: i64) -> Arc<Arrived> {
        Arc::new(Arrived {
            topic: "m/up".into(),
            payload: payload.into(),
            arrived_ms,
        })
    }

    /// One call a message gives what the decoder and then the pipeline give:
    /// the same samples (refused tags BAD, values scaled, the deadband's drops),
    /// words and signs of life, message after message (PUSH-2).
    #[tokio::test]
    async fn one_call_gives_what_the_decoder_and_the_pipeline_give_apart() {
        let fixture = Fixture::new(Limits::default());
        let messages: [&[u8]; 7] = [
            br#"{"a":10,"b":3,"arr":[1,2]}"#,
            // `a` and `arr` inside their deadbands, `b` refused.
            br#"{"a":10.4,"b":"x","arr":[1,2]}"#,
            b"not JSON",
            br#"{"a":30}"#,
            br#"{"a":30,"b":7,"arr":[5,6]}"#,
            // Every value inside its deadband: the pipeline leaves nothing.
            br#"{"a":30,"b":7,"arr":[5,6]}"#,
            br#"{"b":70000,"arr":[1]}"#,
        ];
        for (n, payload) in messages.into_iter().enumerate() {
            let arrived = arrived(payload.to_vec(), 1_000 + n as i64);
            let apart = fixture.input.decode(&arrived, fixture.tags).await;
            let one = fixture.ingest(&arrived);
            assert!(one.processed && !apart.processed);
            let processed = fixture.pipeline.run(apart.batch).expect("runs");
            assert_eq!(one.batch.samples, processed.samples, "message {n}");
            if n == 5 {
                assert!(one.gave && one.batch.samples.is_empty(), "all dropped");
            }
            assert_eq!(
                (one.gave, one.well, &one.problem, one.failed_call),
                (apart.gave, apart.well, &apart.problem, apart.failed_call),
                "message {n}"
            );
        }
    }

    /// A one call that fails (here: over its CPU budget) is the decoder's
    /// failure: every readable tag BAD, a fault for the lease, and counted
    /// in the health its driver's lease and the quarantine read.
    #[tokio::test]
    async fn a_failed_one_call_is_its_decoders_failure() {
        let fixture = Fixture::new(Limits {
            fuel_per_call: 2_000_000,
            ..Limits::default()
        });
        let mut payload = br#"{"a":1,"pad":""#.to_vec();
        payload.resize(payload.len() + (8 << 20), b'x');
        payload.extend(br#""}"#);
        let one = fixture.ingest(&arrived(payload, 7));
        assert!(one.failed_call && !one.well, "{one:?}");
        let bad: Vec<_> = one
            .batch
            .samples
            .iter()
            .map(|s| (s.tag, s.quality))
            .collect();
        assert_eq!(bad, [0, 1, 3].map(|tag| (tag, crate::model::Quality::Bad)));
        let failures: Vec<u64> = fixture
            .input
            .reader_health()
            .iter()
            .map(|h| h.failures)
            .collect();
        assert_eq!(failures, [0, 1], "the decoder's pool, then the one call's");
        // A message within the budget goes through again.
        let next = fixture.ingest(&arrived(br#"{"a":4,"b":1,"arr":[1,2]}"#.to_vec(), 8));
        assert!(next.well && !next.failed_call, "{next:?}");
    }

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
