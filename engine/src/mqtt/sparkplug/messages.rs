//! The payloads the edge node publishes: births, deaths and device data.
//!
//! Device data is stored in the WAL without its `seq` (a session's counter,
//! unknown until the record is published): the publisher appends it with
//! [`sequenced`], or rewrites a record from before the session's births with
//! [`historical`].

use std::sync::Arc;

use prost::Message as _;

use super::metric::{MetricTable, MetricType, metric};
use super::proto::{Metric, MetricValue, Payload};
use crate::model::{Sample, TagSpec};

/// The node's birth/death sequence metric.
pub const BD_SEQ: &str = "bdSeq";
/// The node control metric a host sets to true to ask for every birth again.
pub const REBIRTH: &str = "Node Control/Rebirth";

/// What a device's birth certificate needs: its tags and their last values.
#[derive(Debug, Clone)]
pub struct DeviceBirth {
    pub device_id: String,
    /// Its lease state is offline: a DDEATH follows the birth.
    pub offline: bool,
    pub tags: Arc<[TagSpec]>,
    /// The alias and datatype of each tag, as its data is published.
    pub metrics: MetricTable,
    /// The last sample of each tag, by tag index.
    pub latest: Vec<Sample>,
}

fn timestamp(now_ms: i64) -> Option<u64> {
    u64::try_from(now_ms).ok()
}

fn bd_seq_metric(bd_seq: u64) -> Metric {
    Metric {
        name: Some(BD_SEQ.to_owned()),
        datatype: Some(MetricType::Int64.code()),
        value: Some(MetricValue::Long(bd_seq)),
        ..Metric::default()
    }
}

/// NBIRTH: always seq 0, the connection's `bd_seq`, the rebirth control.
pub fn node_birth(bd_seq: u64, now_ms: i64) -> Vec<u8> {
    Payload {
        timestamp: timestamp(now_ms),
        metrics: vec![
            bd_seq_metric(bd_seq),
            Metric {
                name: Some(REBIRTH.to_owned()),
                datatype: Some(MetricType::Boolean.code()),
                value: Some(MetricValue::Boolean(false)),
                ..Metric::default()
            },
        ],
        seq: Some(0),
    }
    .encode_to_vec()
}

/// NDEATH, the connection's Last Will: the `bd_seq` of its NBIRTH, no seq.
pub fn node_death(bd_seq: u64, now_ms: i64) -> Vec<u8> {
    Payload {
        timestamp: timestamp(now_ms),
        metrics: vec![bd_seq_metric(bd_seq)],
        seq: None,
    }
    .encode_to_vec()
}

/// DBIRTH: every tag by name and alias with its datatype and last value.
pub fn device_birth(birth: &DeviceBirth, now_ms: i64, seq: u8) -> Vec<u8> {
    let metrics = birth
        .tags
        .iter()
        .zip(&birth.latest)
        .enumerate()
        .filter_map(|(index, (tag, sample))| {
            let (alias, datatype) = birth.metrics.get(index)?;
            Some(metric(alias, datatype, sample, Some(&tag.key)))
        })
        .collect();
    Payload {
        timestamp: timestamp(now_ms),
        metrics,
        seq: Some(u64::from(seq)),
    }
    .encode_to_vec()
}

/// DDEATH: no metrics.
pub fn device_death(now_ms: i64, seq: u8) -> Vec<u8> {
    Payload {
        timestamp: timestamp(now_ms),
        metrics: Vec::new(),
        seq: Some(u64::from(seq)),
    }
    .encode_to_vec()
}

/// DDATA of one report, without seq: each sample by alias.
pub fn device_data(now_ms: i64, samples: &[Sample], metrics: &MetricTable) -> Vec<u8> {
    Payload {
        timestamp: timestamp(now_ms),
        metrics: samples.iter().filter_map(|s| metrics.data(s)).collect(),
        seq: None,
    }
    .encode_to_vec()
}

/// A stored DDATA with its `seq` appended (a field may come in any order).
pub fn sequenced(mut stored: Vec<u8>, seq: u8) -> Vec<u8> {
    prost::encoding::uint64::encode(3, &u64::from(seq), &mut stored);
    stored
}

/// A stored DDATA from before this session's births: every metric marked
/// historical, and `seq`.
///
/// # Errors
/// The stored bytes are not a payload.
pub fn historical(stored: &[u8], seq: u8) -> Result<Vec<u8>, prost::DecodeError> {
    let mut payload = Payload::decode(stored)?;
    for metric in &mut payload.metrics {
        metric.is_historical = Some(true);
    }
    payload.seq = Some(u64::from(seq));
    Ok(payload.encode_to_vec())
}

/// When a stored payload was made: its leading `timestamp` field, as
/// [`device_data`] writes it.
pub fn made_at(stored: &[u8]) -> Option<u64> {
    use prost::encoding::{WireType, decode_key, decode_varint};
    let mut rest = stored;
    match decode_key(&mut rest) {
        Ok((1, WireType::Varint)) => decode_varint(&mut rest).ok(),
        _ => None,
    }
}

/// Whether a stored payload has a metric with a value (not all BAD or null);
/// one that does not decode counts as having one.
pub fn carries_values(stored: &[u8]) -> bool {
    Payload::decode(stored).map_or(true, |p| p.metrics.iter().any(|m| m.value.is_some()))
}
