//! One device at run time: its channels (a link and a codec session each), its
//! pipeline and its reporter, and the poll round that ties them together.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use super::latest::{LatestValues, RoundsDone, TagDisplay};
use super::metrics::DeviceCounters;
use super::push::PushInput;
use super::reach::Reach;
use super::reporter::{Identity, Reporter, Round};
use super::sink::SampleSink;
use crate::clock::now_ms;
use crate::intake::Arrived;
use crate::io::{Link, LinkError, LinkState, SharedLink};
use crate::lease::{EntityState, EntityType, Leases, PlainRenewal, TimeoutSource};
use crate::model::{Batch, PlannedRead, RawValues, Sample, TagSpec};
use crate::pipeline::DevicePipeline;
use crate::runtime::CodecSession;
use crate::scheduler::{DeviceSchedule, RoundOutcome};
use crate::store::SeqAllocator;
use crate::sync::{Swappable, lock};
use crate::uplink::Uplink;

/// A device's channel: the link it uses (maybe shared) and its codec session.
#[derive(Debug)]
pub struct Channel {
    pub id: String,
    pub link: Arc<SharedLink>,
    /// Taken once per round (or write): a new codec version applies from the next.
    pub session: Swappable<CodecSession>,
    /// Device tag index of each of the channel's tags.
    pub tags: Vec<u32>,
    /// How `tags` are laid out, for finding a tag among them.
    layout: Layout,
    /// The liveness probe the channel asks for (`heartbeatMs`), if any.
    pub probe: Option<Probe>,
    /// How long its reads wait for an answer (`readTimeoutMs`), even on a link
    /// it shares with channels that wait longer.
    pub read_timeout: std::time::Duration,
    /// The link epoch this channel last saw; a new one means a reconnect.
    epoch: AtomicU64,
    /// On a line shared with other units: how long this unit has gone unanswered.
    silence: Mutex<UnitSilence>,
    /// What the log was told of its connection problem (each channel its own:
    /// one that connects says nothing of another that does not).
    reach: Reach,
}

/// A unit on a shared line that stopped answering is asked again only after a
/// backoff, so the line's time goes to the units that answer: a dead unit costs
/// the others one timeout per backoff, not one per round (LINE-3).
#[derive(Debug, Default)]
struct UnitSilence {
    /// Rounds in a row that timed out.
    timeouts: u32,
    /// Not asked again before this.
    retry_at: Option<Instant>,
}

/// A channel's liveness probe: how often, and which of its tags it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pub every: std::time::Duration,
    /// Channel-local index of the tag read.
    pub tag: u32,
}

impl Channel {
    pub fn new(
        id: String,
        link: Arc<SharedLink>,
        session: CodecSession,
        tags: Vec<u32>,
        probe: Option<Probe>,
        read_timeout: std::time::Duration,
    ) -> Self {
        Self {
            id,
            link,
            session: Swappable::new(session),
            layout: Layout::of(&tags),
            tags,
            probe,
            read_timeout,
            silence: Mutex::default(),
            epoch: AtomicU64::new(0),
            reach: Reach::default(),
        }
    }

    /// The device tag index of channel-local tag `local`.
    pub(super) fn device_tag(&self, local: u32) -> u32 {
        self.tags.get(local as usize).copied().unwrap_or(u32::MAX)
    }

    /// The channel-local index of device tag `tag` (asked for each due tag of
    /// every round).
    pub(super) fn local(&self, tag: u32) -> Option<u32> {
        local_index(&self.tags, self.layout, tag)
    }
}

/// How a channel's device tag indexes are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// `first`, `first + 1`, ...: a device's only channel, or one of its
    /// channels as the compiler lists them, nearly always.
    Consecutive(u32),
    /// Ascending with gaps.
    Ascending,
    /// Any other order.
    Unordered,
}

impl Layout {
    fn of(tags: &[u32]) -> Layout {
        let first = tags.first().copied().unwrap_or(0);
        if (first..).zip(tags).all(|(expected, tag)| expected == *tag) {
            Layout::Consecutive(first)
        } else if tags.windows(2).all(|pair| pair[0] < pair[1]) {
            Layout::Ascending
        } else {
            Layout::Unordered
        }
    }
}

/// Where `tag` is in `tags`: by subtraction when they are consecutive, a
/// binary search when they ascend, a scan otherwise.
fn local_index(tags: &[u32], layout: Layout, tag: u32) -> Option<u32> {
    let found = match layout {
        Layout::Consecutive(first) => tag
            .checked_sub(first)
            .map(|i| i as usize)
            .filter(|i| *i < tags.len()),
        Layout::Ascending => tags.binary_search(&tag).ok(),
        Layout::Unordered => tags.iter().position(|t| *t == tag),
    };
    found.and_then(|i| u32::try_from(i).ok())
}

/// What a device needs to be written: which tags are read back, and a pipeline of
/// its own to decode what is read (the polling pipeline's memory, such as a
/// deadband, must not see these reads).
#[derive(Debug)]
pub struct Writable {
    pub readback: Vec<bool>,
    pub decoder: Swappable<DevicePipeline>,
}

/// How a device's rounds renew its lease.
#[derive(Debug, Clone)]
pub struct LeaseTerms {
    pub leases: Arc<Leases>,
    pub tenant_id: u32,
    /// The driver (codec) the device is read through.
    pub driver: String,
    pub timeout_seconds: u64,
    pub timeout_source: TimeoutSource,
    /// Where its lease ends: offline, or unknown (`stateWhenExpired`).
    pub expired_state: EntityState,
}

/// What a device is made of.
#[derive(Debug)]
pub struct DeviceParts {
    pub id: String,
    pub product_id: String,
    pub device_num: String,
    pub tenant_id: u32,
    /// The name of the device's pipeline.
    pub pipeline_name: String,
    pub tags: Arc<[TagSpec]>,
    /// Polling period of each tag, ms (0 = never polled).
    pub periods: Vec<u64>,
    pub channels: Vec<Channel>,
    pub pipeline: DevicePipeline,
    pub reporter: Reporter,
    pub lease: LeaseTerms,
    /// Who else hears of its samples (the alarm rules).
    pub sink: Option<Arc<dyn SampleSink>>,
    /// For a device with writable tags: read-back flags and a decoder.
    pub writable: Option<Writable>,
    /// For a device that publishes by itself: its decoder and limits.
    pub push: Option<PushInput>,
    /// Its series in the collector's metric families.
    pub counters: DeviceCounters,
    /// Told of every round that brought samples, fleet-wide.
    pub rounds_done: Arc<RoundsDone>,
    /// How the console shows each tag's values (empty: as they come).
    pub display: Box<[TagDisplay]>,
    /// Points of the last hour each numeric tag keeps for the console.
    pub trend_points: usize,
}

/// Gives every device built its own [`Device::key`].
static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

/// A device and everything a round needs.
#[derive(Debug)]
pub struct Device {
    /// Tells this build of the device apart from any other, an earlier build of the
    /// same `id` included: the scheduler polls devices by key.
    pub key: u64,
    pub id: String,
    pub product_id: String,
    pub device_num: String,
    pub tenant_id: u32,
    pub pipeline_name: String,
    pub tags: Arc<[TagSpec]>,
    periods: Vec<u64>,
    pub channels: Vec<Channel>,
    /// Taken once per round: a new one applies from the next round on.
    pipeline: Swappable<DevicePipeline>,
    pub reporter: Reporter,
    lease: LeaseTerms,
    sink: Option<Arc<dyn SampleSink>>,
    pub(super) writable: Option<Writable>,
    /// For a device that publishes by itself (its channels are then none).
    pub push: Option<PushInput>,
    /// Its rounds (counted by the scheduler), component failures and time.
    pub counters: DeviceCounters,
    /// The last sample of every tag, and the numeric ones' last hour, for the console.
    pub latest: LatestValues,
    /// How the console shows each tag's values; empty when no tag says.
    pub display: Box<[TagDisplay]>,
    rounds_done: Arc<RoundsDone>,
    last_error: Mutex<String>,
    /// Problems noted so far: a round that notes none and is answered clears
    /// `last_error`.
    errors_noted: AtomicU64,
    /// Rounds in a row in which the device answered and refused a request.
    refusing_rounds: AtomicU32,
}

/// Where a batch goes once read, and what it stands for.
#[derive(Clone, Copy)]
struct Delivery<'a> {
    pipeline: &'a Arc<DevicePipeline>,
    /// The tags it covers: BAD, all of them, if the pipeline fails.
    covers: &'a [u32],
    now: i64,
    seq: &'a SeqAllocator,
    uplink: &'a Uplink,
}

/// What the round learnt while reading one channel.
#[derive(Debug, Default)]
struct ChannelRead {
    answered: bool,
    /// The device refused a request (an exception or end code) for good.
    refused: bool,
    unreachable: bool,
    /// A request went unanswered within the read timeout.
    timed_out: bool,
}

/// One channel's part of a round: what was read, and which tags could not be.
struct ChannelRound<'r> {
    channel: &'r Channel,
    batch: &'r mut Batch,
    bad: &'r mut Vec<u32>,
    read: ChannelRead,
}

impl ChannelRound<'_> {
    /// The channel-local `tags` are BAD this round.
    fn lose(&mut self, tags: &[u32]) {
        let channel = self.channel;
        self.bad.extend(tags.iter().map(|t| channel.device_tag(*t)));
    }
}

impl Device {
    pub fn new(parts: DeviceParts) -> Self {
        let tags = parts.tags.len();
        Self {
            key: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            id: parts.id,
            product_id: parts.product_id,
            device_num: parts.device_num,
            tenant_id: parts.tenant_id,
            pipeline_name: parts.pipeline_name,
            tags: parts.tags,
            periods: parts.periods,
            channels: parts.channels,
            pipeline: Swappable::new(parts.pipeline),
            reporter: parts.reporter,
            lease: parts.lease,
            sink: parts.sink,
            writable: parts.writable,
            push: parts.push,
            counters: parts.counters,
            latest: LatestValues::new(tags, parts.trend_points),
            display: parts.display,
            rounds_done: parts.rounds_done,
            last_error: Mutex::default(),
            errors_noted: AtomicU64::new(0),
            refusing_rounds: AtomicU32::new(0),
        }
    }

    /// How long the device's lease lasts, seconds.
    pub fn lease_seconds(&self) -> u64 {
        self.lease.timeout_seconds
    }

    /// Rounds in a row in which the device answered and refused a request (an
    /// address it does not have, say): a protocol error that keeps coming back.
    pub fn refusing_rounds(&self) -> u32 {
        self.refusing_rounds.load(Ordering::Relaxed)
    }

    /// What the scheduler polls of the device.
    pub fn schedule(&self) -> DeviceSchedule {
        DeviceSchedule {
            device: self.key,
            tag_periods: self.periods.clone(),
            counters: Arc::clone(&self.counters.rounds),
        }
    }

    /// How the pools of the device's components (codecs, decoders, stages) are doing.
    pub fn component_health(&self) -> Vec<crate::runtime::PoolHealth> {
        let mut health: Vec<_> = self
            .channels
            .iter()
            .map(|c| c.session.get().health())
            .collect();
        if let Some(push) = &self.push {
            health.extend(push.reader_health());
        }
        health.extend(self.pipeline.get().health());
        health
    }

    /// Puts new pipelines in place (and the decoder of writes, if the device has
    /// one); rounds in progress finish with the old ones.
    pub fn swap_pipeline(&self, pipeline: DevicePipeline, decoder: Option<DevicePipeline>) {
        self.pipeline.set(pipeline);
        if let (Some(writable), Some(decoder)) = (&self.writable, decoder) {
            writable.decoder.set(decoder);
        }
    }

    /// The device's last problem (a connect that failed, a frame it refused);
    /// none since a round went through.
    pub fn last_error(&self) -> Option<String> {
        let error = lock(&self.last_error);
        (!error.is_empty()).then(|| error.clone())
    }

    /// Each channel's id and its connection's state now.
    pub fn connections(&self) -> impl Iterator<Item = (&str, LinkState)> {
        self.channels
            .iter()
            .map(|channel| (channel.id.as_str(), channel.link.state()))
    }

    /// Runs a component call, adding its duration to the device's component time.
    fn timed<T>(&self, call: impl FnOnce() -> T) -> T {
        let started = std::time::Instant::now();
        let result = call();
        self.count_component_time(started);
        result
    }

    /// Adds the time since `started` to the device's component time.
    fn count_component_time(&self, started: std::time::Instant) {
        self.counters
            .component_seconds
            .inc_by(started.elapsed().as_secs_f64());
    }

    /// The device's last problem is over.
    fn clear_error(&self) {
        lock(&self.last_error).clear();
    }

    fn note_error(&self, error: impl std::fmt::Display) {
        let text = error.to_string();
        tracing::debug!(device = %self.id, error = %text, "round problem");
        *lock(&self.last_error) = text;
        self.errors_noted.fetch_add(1, Ordering::Relaxed);
    }

    /// One poll round over `due` (device tag indexes): read every channel, run the
    /// pipeline, publish the reports.
    pub async fn poll(&self, due: &[u32], seq: &SeqAllocator, uplink: &Uplink) -> RoundOutcome {
        // The pipeline of this round, even if a new one is swapped in meanwhile.
        let pipeline = self.pipeline.get();
        let codec_failures_before = self.counters.codec_failures.get();
        let errors_before = self.errors_noted.load(Ordering::Relaxed);
        let mut batch = Batch::default();
        let mut bad: Vec<u32> = Vec::new();
        let mut answered = false;
        let mut refused = false;
        let mut unreachable = false;
        let mut reconnected = false;
        for channel in &self.channels {
            let local: Vec<u32> = due.iter().filter_map(|t| channel.local(*t)).collect();
            if local.is_empty() {
                continue;
            }
            let read = self
                .read_channel(channel, &local, &mut batch, &mut bad, &mut reconnected)
                .await;
            answered |= read.answered;
            refused |= read.refused;
            unreachable |= read.unreachable;
        }
        if refused {
            self.refusing_rounds.fetch_add(1, Ordering::Relaxed);
        } else if answered {
            self.refusing_rounds.store(0, Ordering::Relaxed);
        }
        if reconnected {
            // Deadband memory and ON_CHANGE memory start over after a reconnect.
            if let Err(error) = pipeline.reset_in_round().await {
                self.counters.stage_failures.inc();
                self.note_error(error);
            }
            self.reporter.forget();
        }
        let now = now_ms();
        for tag in bad {
            batch.push_bad(tag, now);
        }
        let delivery = Delivery {
            pipeline: &pipeline,
            covers: due,
            now,
            seq,
            uplink,
        };
        self.deliver(batch, delivery).await;
        let codec_failed = self.counters.codec_failures.get() > codec_failures_before;
        if answered && self.errors_noted.load(Ordering::Relaxed) == errors_before {
            // A round that went through: the last problem is over.
            self.clear_error();
        }
        self.renew_lease(answered, codec_failed);
        if answered || !unreachable {
            RoundOutcome::Done
        } else {
            RoundOutcome::Failed
        }
    }

    /// One message of a device that publishes by itself (PUSH-2): decoded,
    /// then through the pipeline, the rules and the reports as a round's
    /// samples; any message renews the lease (online, or fault when it gave
    /// nothing but refusals).
    pub async fn ingest(&self, message: &Arc<Arrived>, seq: &SeqAllocator, uplink: &Uplink) {
        let Some(push) = &self.push else {
            return;
        };
        let pipeline = self.pipeline.get();
        let ingester = push.ingester.get();
        let started = std::time::Instant::now();
        let decoding = match ingester.as_ref() {
            Some(ingester) => push.ingest(ingester, message, self.tags.len()),
            None => push.decode(message, self.tags.len()).await,
        };
        self.count_component_time(started);
        if decoding.failed_call {
            self.counters.codec_failures.inc();
        }
        if let Some(problem) = &decoding.problem {
            push.counters.refused.inc();
            self.note_error(problem);
        } else {
            self.clear_error();
        }
        // A message about something else gives no sample: nothing to run or
        // report. (One whose samples the pipeline all dropped is a round.)
        if decoding.gave || !decoding.batch.samples.is_empty() {
            let delivery = Delivery {
                pipeline: &pipeline,
                covers: &push.readable,
                now: message.arrived_ms,
                seq,
                uplink,
            };
            if decoding.processed {
                self.publish(decoding.batch.samples, None, &delivery);
            } else {
                self.deliver(decoding.batch, delivery).await;
            }
        }
        self.renew_lease(decoding.well, !decoding.well);
        push.handled();
    }

    /// Runs a batch through the pipeline, the rules, the latest values and
    /// the reports: what a round or a message read ends in.
    async fn deliver(&self, batch: Batch, delivery: Delivery<'_>) {
        let raw = self.reporter.raw_values(&batch, &self.tags);
        let started = std::time::Instant::now();
        let processed = delivery.pipeline.run_in_round(batch).await;
        self.count_component_time(started);
        let samples = match processed {
            Ok(processed) => processed.samples,
            Err(failure) => {
                // The stage's instance is rebuilt; these values are lost.
                self.counters.stage_failures.inc();
                self.note_error(&failure);
                let mut lost = Batch::default();
                for tag in delivery.covers {
                    lost.push_bad(*tag, delivery.now);
                }
                lost.samples
            }
        };
        self.publish(samples, raw, &delivery);
    }

    /// What the pipeline gave goes to the rules, the latest values and the reports.
    fn publish(&self, samples: Vec<Sample>, raw: Option<RawValues>, delivery: &Delivery<'_>) {
        let Delivery {
            now, seq, uplink, ..
        } = *delivery;
        if let Some(sink) = &self.sink {
            self.timed(|| sink.on_samples(&self.id, self.key, &samples));
        }
        self.latest.record(&samples, now, &self.rounds_done);
        let who = Identity {
            device_id: &self.id,
            product_id: &self.product_id,
            device_num: &self.device_num,
        };
        if let Err(error) =
            self.reporter
                .report(who, Round { samples, raw }, &self.tags, seq, uplink, now)
        {
            self.note_error(format!("reports not published: {error}"));
        }
    }

    /// A round that reached the device renews its lease; a codec that failed
    /// without any answer getting through reports a fault. Nothing renews a device
    /// that did not answer: its lease runs out and the scanner sets it offline.
    fn renew_lease(&self, answered: bool, codec_failed: bool) {
        let state = match (answered, codec_failed) {
            (true, _) => EntityState::Online,
            (false, true) => EntityState::Fault,
            (false, false) => return,
        };
        let terms = &self.lease;
        let heartbeat = PlainRenewal {
            entity_type: EntityType::Device,
            entity_id: &self.id,
            parent_id: &terms.driver,
            tenant_id: terms.tenant_id,
            state,
            timeout_seconds: terms.timeout_seconds,
            timeout_source: terms.timeout_source,
            expired_state: terms.expired_state,
        };
        match self.last_error() {
            None => terms.leases.renew_plain(heartbeat),
            Some(error) => {
                let mut renewal = heartbeat.to_renewal();
                renewal.extension = serde_json::json!({ "lastError": error });
                terms.leases.renew(renewal);
            }
        }
    }

    async fn read_channel(
        &self,
        channel: &Channel,
        local_due: &[u32],
        batch: &mut Batch,
        bad: &mut Vec<u32>,
        reconnected: &mut bool,
    ) -> ChannelRead {
        let mut round = ChannelRound {
            channel,
            batch,
            bad,
            read: ChannelRead::default(),
        };
        if lock(&channel.silence)
            .retry_at
            .is_some_and(|at| Instant::now() < at)
        {
            // A silent unit on a shared line: not asked this round, the line left
            // to the others.
            round.lose(local_due);
            round.read.unreachable = true;
            return round.read;
        }
        let mut link = channel.link.lock().await;
        // The codec of this round, even if a new version is swapped in meanwhile.
        let session = channel.session.get();
        if let Some(queue) = self
            .open_channel(&mut link, &session, &mut round, local_due, reconnected)
            .await
        {
            self.read_requests(&mut link, &session, &mut round, queue, local_due.len())
                .await;
        }
        let settings = link.settings();
        if settings.line.is_some() {
            let mut silence = lock(&channel.silence);
            if round.read.answered {
                *silence = UnitSilence::default();
            } else if round.read.timed_out {
                silence.timeouts = silence.timeouts.saturating_add(1);
                let wait = crate::io::delay(&settings.backoff, silence.timeouts, 0.5);
                silence.retry_at = Some(Instant::now() + wait);
            }
        }
        round.read
    }

    /// Connects the channel's link if it is not, and plans the round's requests;
    /// `None` when there is nothing to send (its tags are then BAD).
    async fn open_channel(
        &self,
        link: &mut Link,
        session: &CodecSession,
        round: &mut ChannelRound<'_>,
        local_due: &[u32],
        reconnected: &mut bool,
    ) -> Option<VecDeque<PlannedRead>> {
        let channel = round.channel;
        let epoch = match link.ensure_online(session).await {
            Ok(epoch) => {
                let reach = &channel.reach;
                reach.reached(&self.id, &channel.id, || link.settings().address());
                epoch
            }
            Err(error) => {
                if !matches!(error, LinkError::Backoff { .. }) {
                    let address = link.settings().address();
                    let cause = error.to_string();
                    let now = std::time::Instant::now();
                    let reach = &channel.reach;
                    reach.failed(&self.id, &channel.id, &address, &cause, now);
                    self.note_error(format!("channel {}: {cause}", channel.id));
                }
                round.lose(local_due);
                round.read.unreachable = true;
                return None;
            }
        };
        if channel.epoch.swap(epoch, Ordering::Relaxed) != epoch {
            *reconnected = true;
            if let Err(error) = session.reset() {
                self.counters.codec_failures.inc();
                self.note_error(error);
            }
        }
        match session.plan(local_due) {
            Ok(plan) => Some(plan.into()),
            Err(error) => {
                self.counters.codec_failures.inc();
                self.note_error(error);
                round.lose(local_due);
                None
            }
        }
    }

    /// Sends the planned requests one after another, splitting those the device
    /// refused when the codec says how, until the queue is empty or the link is lost.
    async fn read_requests(
        &self,
        link: &mut Link,
        session: &CodecSession,
        round: &mut ChannelRound<'_>,
        mut queue: VecDeque<PlannedRead>,
        due: usize,
    ) {
        let channel = round.channel;
        // Splits after exceptions add requests; this bound stops a codec that keeps
        // splitting from looping forever.
        let mut allowance = 4 * due + 16;
        while let Some(request) = queue.pop_front() {
            if allowance == 0 {
                let message = format!("channel {}: the codec kept splitting requests", channel.id);
                self.note_error(message);
                round.lose(&request.tags);
                continue;
            }
            allowance -= 1;
            let frame = match session.encode_read(request.id) {
                Ok(Ok(frame)) => frame,
                Ok(Err(error)) => {
                    self.note_error(error);
                    round.lose(&request.tags);
                    continue;
                }
                Err(error) => {
                    self.counters.codec_failures.inc();
                    self.note_error(error);
                    round.lose(&request.tags);
                    continue;
                }
            };
            // The sample time is when the answer arrived, not when it was processed.
            let exchanged = link
                .request_within(session, &frame, channel.read_timeout, |answer| {
                    let arrived = now_ms();
                    self.timed(|| session.parse_read(request.id, answer, arrived))
                })
                .await;
            match exchanged {
                Ok(Ok(parsed)) => {
                    round.read.answered = true;
                    round
                        .batch
                        .append(parsed, |local| round.channel.device_tag(local));
                }
                Ok(Err(refusal)) => {
                    // The device answered: the connection is fine.
                    round.read.answered = true;
                    if refusal.retry.is_empty() {
                        self.note_error(format!("channel {}: {}", channel.id, refusal.message));
                        round.read.refused = true;
                        round.lose(&request.tags);
                    }
                    for split in refusal.retry.into_iter().rev() {
                        queue.push_front(split);
                    }
                }
                Err(LinkError::Codec(error)) => {
                    self.counters.codec_failures.inc();
                    self.note_error(error);
                    round.lose(&request.tags);
                }
                Err(lost) => {
                    // A lost connection or a malformed answer ends the channel's round.
                    round.read.timed_out |= matches!(lost, LinkError::Timeout(_));
                    self.note_error(format!("channel {}: {lost}", channel.id));
                    round.lose(&request.tags);
                    for rest in &queue {
                        round.lose(&rest.tags);
                    }
                    round.read.unreachable = true;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Layout, local_index};

    #[test]
    fn a_tag_is_found_the_same_whatever_the_layout() {
        let lists: [&[u32]; 5] = [
            &[4, 5, 6, 7],
            &[0],
            &[2, 3, 5, 8, 13],
            &[8, 2, 13, 5, 3],
            &[],
        ];
        let layouts = [
            Layout::Consecutive(4),
            Layout::Consecutive(0),
            Layout::Ascending,
            Layout::Unordered,
            Layout::Consecutive(0),
        ];
        for (tags, layout) in lists.iter().zip(layouts) {
            assert_eq!(Layout::of(tags), layout, "{tags:?}");
            for tag in 0..15 {
                let expected = tags.iter().position(|t| *t == tag);
                assert_eq!(
                    local_index(tags, layout, tag).map(|i| i as usize),
                    expected,
                    "{tag} in {tags:?}"
                );
            }
        }
    }
}
