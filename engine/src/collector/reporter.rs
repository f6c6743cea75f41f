//! Turns a device's processed batch into published reports by report mode:
//! BATCH (one report per round), SINGLE (one report per value) or ON_CHANGE (one
//! report per round with only the values whose value or quality changed). Each
//! report takes the device's next sequence number.

use std::sync::Mutex;

use super::raw_values::raw_values;
use crate::config::ReportMode;
use crate::model::{Batch, Quality, RawValues, Sample, TagSpec, Value};
use crate::mqtt::sparkplug::{self, MetricTable};
use crate::mqtt::{ReportHeader, payload};
use crate::store::{SeqAllocator, StoreError};
use crate::sync::lock;
use crate::uplink::Uplink;
use crate::wal::Message;

/// Reporting state of one device.
#[derive(Debug)]
pub struct Reporter {
    mode: ReportMode,
    topic: String,
    encoding: Encoding,
    /// Whether JSON reports carry each value's `rawValue` (`collector.rawValue`).
    raw_values: bool,
    /// Last published value and quality per tag (ON_CHANGE only; empty otherwise).
    last: Mutex<Vec<Option<(Value, Quality)>>>,
}

/// A round's processed samples, and its raw values when reports carry them.
#[derive(Debug, Default)]
pub struct Round {
    pub samples: Vec<Sample>,
    pub raw: Option<RawValues>,
}

/// How a report's payload is written.
#[derive(Debug)]
pub enum Encoding {
    /// The engine's JSON report ([`payload`]).
    Json,
    /// Sparkplug B device data, by the device's metric aliases; its `seq` is
    /// added when published.
    Sparkplug(MetricTable),
}

/// Who the reports are about.
#[derive(Debug, Clone, Copy)]
pub struct Identity<'a> {
    pub device_id: &'a str,
    pub product_id: &'a str,
    pub device_num: &'a str,
}

impl Reporter {
    /// `raw_values`: JSON reports carry each value's `rawValue` (Sparkplug
    /// metrics have no place for it).
    pub fn new(
        mode: ReportMode,
        topic: String,
        encoding: Encoding,
        tags: usize,
        raw_values: bool,
    ) -> Self {
        let remembered = if mode == ReportMode::OnChange {
            tags
        } else {
            0
        };
        let raw_values = raw_values && matches!(encoding, Encoding::Json);
        Self {
            mode,
            topic,
            encoding,
            raw_values,
            last: Mutex::new(vec![None; remembered]),
        }
    }

    /// The raw values of `batch` (a round before its pipeline), when the
    /// reports carry them.
    pub fn raw_values(&self, batch: &Batch, tags: &[TagSpec]) -> Option<RawValues> {
        self.raw_values.then(|| raw_values(batch, tags))
    }

    /// The aliases and datatypes its Sparkplug data is published with.
    pub fn metric_table(&self) -> Option<&MetricTable> {
        match &self.encoding {
            Encoding::Sparkplug(table) => Some(table),
            Encoding::Json => None,
        }
    }

    /// Forgets what was published (after a reconnect every value is news again).
    pub fn forget(&self) {
        let mut last = lock(&self.last);
        last.iter_mut().for_each(|slot| *slot = None);
    }

    /// Queues the reports for `round` in the outbox; returns how many.
    ///
    /// # Errors
    /// When no sequence number could be reserved (the store failed).
    pub fn report(
        &self,
        who: Identity<'_>,
        round: Round,
        tags: &[TagSpec],
        seq: &SeqAllocator,
        uplink: &Uplink,
        now_ms: i64,
    ) -> Result<usize, StoreError> {
        let Round { samples, raw } = round;
        let samples = match self.mode {
            ReportMode::OnChange => self.changed(samples),
            ReportMode::Batch | ReportMode::Single => samples,
        };
        if samples.is_empty() {
            return Ok(0);
        }
        let groups: Vec<Vec<Sample>> = match self.mode {
            ReportMode::Single => samples.into_iter().map(|s| vec![s]).collect(),
            ReportMode::Batch | ReportMode::OnChange => vec![samples],
        };
        let mut sent = 0;
        for group in groups {
            let numbered = seq.next(who.device_id)?;
            let header = ReportHeader {
                product_id: who.product_id,
                device_num: who.device_num,
                timestamp_ms: now_ms,
                seq: numbered.seq,
                skipped: numbered.skipped,
            };
            let body = match &self.encoding {
                Encoding::Json => payload(header, &group, tags, raw.as_ref()),
                Encoding::Sparkplug(metrics) => sparkplug::device_data(now_ms, &group, metrics),
            };
            uplink.report(Message {
                device: who.device_id.to_owned(),
                seq: header.seq,
                topic: self.topic.clone(),
                payload: body.into(),
                retain: false,
            });
            sent += 1;
        }
        Ok(sent)
    }

    fn changed(&self, samples: Vec<Sample>) -> Vec<Sample> {
        let mut last = lock(&self.last);
        samples
            .into_iter()
            .filter(|sample| {
                let Some(slot) = last.get_mut(sample.tag as usize) else {
                    return true;
                };
                let now = (sample.value.clone(), sample.quality);
                if slot.as_ref() == Some(&now) {
                    return false;
                }
                *slot = Some(now);
                true
            })
            .collect()
    }
}
