//! The edge node's side of a Sparkplug B session: bdSeq and its Last Will,
//! births before data, one `seq` across the node's messages, deaths, rebirth
//! on request. It decides what to publish; the publisher publishes it.
//! Invariants SPB-1 to SPB-4 of `docs/sparkplug.md`.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use rumqttc::{LastWill, QoS};
use tokio::sync::watch;

use crate::clock::now_ms;
use crate::mqtt::sparkplug::{self, DeviceBirth, SparkplugTopics};
use crate::wal::Message;

/// Who knows the devices the node publishes for: their tags, last values and
/// lease states (the collector).
pub trait Births: Send + Sync + std::fmt::Debug {
    /// Every device this engine publishes for now.
    fn devices(&self) -> Vec<DeviceBirth>;
    /// One of them, if this engine publishes for it.
    fn device(&self, device_id: &str) -> Option<DeviceBirth>;
    /// Changes whenever the devices or their tags change.
    fn changes(&self) -> watch::Receiver<u64>;
}

/// A message the node publishes besides the WAL's records.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Outgoing {
    pub topic: String,
    pub payload: Vec<u8>,
    pub qos: QoS,
}

/// The edge node: its topics, bdSeq, and what this connection has published.
#[derive(Debug)]
pub(super) struct EdgeNode {
    topics: SparkplugTopics,
    /// Where the bdSeq of the last connection is kept, so that a restart goes on
    /// from it rather than from 0.
    bd_seq_file: PathBuf,
    bd_seq: u8,
    births: Option<Arc<dyn Births>>,
    /// When this connection's NBIRTH went out; `None` before.
    born_at: Option<i64>,
    /// The next message's seq.
    seq: u8,
    /// Devices with a DBIRTH on this connection and no DDEATH since.
    birthed: HashSet<String>,
    /// Devices with a DDEATH on this connection and no DBIRTH since.
    dead: HashSet<String>,
}

/// The file of the data directory that keeps the last bdSeq.
pub const BD_SEQ_FILE: &str = "sparkplug-bd-seq";

impl EdgeNode {
    pub(super) fn new(topics: SparkplugTopics, bd_seq_file: PathBuf) -> Self {
        let bd_seq = std::fs::read_to_string(&bd_seq_file)
            .ok()
            .and_then(|text| text.trim().parse::<u8>().ok())
            .unwrap_or(u8::MAX);
        Self {
            topics,
            bd_seq_file,
            bd_seq,
            births: None,
            born_at: None,
            seq: 0,
            birthed: HashSet::new(),
            dead: HashSet::new(),
        }
    }

    pub(super) fn topics(&self) -> &SparkplugTopics {
        &self.topics
    }

    /// A new connection: the next bdSeq (SPB-1), kept, and the Last Will carrying it.
    pub(super) fn connecting(&mut self) -> LastWill {
        self.bd_seq = self.bd_seq.wrapping_add(1);
        if let Err(error) = std::fs::write(&self.bd_seq_file, self.bd_seq.to_string()) {
            tracing::warn!(%error, file = %self.bd_seq_file.display(), "cannot keep the Sparkplug bdSeq; a restart begins again from 0");
        }
        self.born_at = None;
        self.birthed.clear();
        self.dead.clear();
        LastWill::new(
            self.topics.node_death(),
            sparkplug::node_death(u64::from(self.bd_seq), now_ms()),
            QoS::AtLeastOnce,
            false,
        )
    }

    /// The collector is known: births can go out.
    pub(super) fn set_births(&mut self, births: Arc<dyn Births>) {
        self.births = Some(births);
    }

    pub(super) fn changes(&self) -> Option<watch::Receiver<u64>> {
        self.births.as_ref().map(|b| b.changes())
    }

    /// Whether the births of this connection went out: records wait until then.
    pub(super) fn is_born(&self) -> bool {
        self.born_at.is_some()
    }

    fn next_seq(&mut self) -> u8 {
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        seq
    }

    /// NBIRTH (seq 0), then a DBIRTH for every device, and a DDEATH for each
    /// whose lease is offline (SPB-3). Nothing until the collector is known.
    pub(super) fn birth(&mut self) -> Vec<Outgoing> {
        let Some(births) = self.births.clone() else {
            return Vec::new();
        };
        let now = now_ms();
        self.born_at = Some(now);
        self.seq = 0;
        self.birthed.clear();
        self.dead.clear();
        let mut out = vec![Outgoing {
            topic: self.topics.node_birth(),
            payload: sparkplug::node_birth(u64::from(self.bd_seq), now),
            qos: QoS::AtMostOnce,
        }];
        self.seq = 1;
        for device in births.devices() {
            self.device_birth(&device, now, &mut out);
        }
        out
    }

    /// A DBIRTH of every device again (the devices or their tags changed), and
    /// a DDEATH of each device no longer among them.
    pub(super) fn rebirth_devices(&mut self) -> Vec<Outgoing> {
        let Some(births) = self.births.clone().filter(|_| self.is_born()) else {
            return Vec::new();
        };
        let now = now_ms();
        let mut out = Vec::new();
        let devices = births.devices();
        // A device gone from the configuration (or to another engine) dies.
        let mut gone: Vec<String> = self
            .birthed
            .iter()
            .filter(|id| !devices.iter().any(|d| &d.device_id == *id))
            .cloned()
            .collect();
        gone.sort();
        for device_id in gone {
            self.device_death(&device_id, now, &mut out);
        }
        for device in devices {
            self.device_birth(&device, now, &mut out);
        }
        out
    }

    fn device_birth(&mut self, device: &DeviceBirth, now: i64, out: &mut Vec<Outgoing>) {
        let seq = self.next_seq();
        out.push(Outgoing {
            topic: self.topics.device_birth(&device.device_id),
            payload: sparkplug::device_birth(device, now, seq),
            qos: QoS::AtMostOnce,
        });
        self.dead.remove(&device.device_id);
        if device.offline {
            self.device_death(&device.device_id, now, out);
        } else {
            self.birthed.insert(device.device_id.clone());
        }
    }

    fn device_death(&mut self, device_id: &str, now: i64, out: &mut Vec<Outgoing>) {
        let seq = self.next_seq();
        out.push(Outgoing {
            topic: self.topics.device_death(device_id),
            payload: sparkplug::device_death(now, seq),
            qos: QoS::AtMostOnce,
        });
        self.birthed.remove(device_id);
        self.dead.insert(device_id.to_owned());
    }

    /// A device's lease went offline (DDEATH) or came back (DBIRTH).
    pub(super) fn device_state(&mut self, device_id: &str, offline: bool) -> Vec<Outgoing> {
        let mut out = Vec::new();
        if !self.is_born() {
            return out;
        }
        let now = now_ms();
        if offline && self.birthed.contains(device_id) {
            self.device_death(device_id, now, &mut out);
        } else if !offline
            && !self.birthed.contains(device_id)
            && let Some(device) = self.births.as_ref().and_then(|b| b.device(device_id))
        {
            self.device_birth(
                &DeviceBirth {
                    offline: false,
                    ..device
                },
                now,
                &mut out,
            );
        }
        out
    }

    /// A WAL record as this connection publishes it: device data gets its seq,
    /// and is marked historical when made before this connection's births (SPB-4);
    /// a device without a DBIRTH on this connection gets one first (SPB-3).
    /// `None`: data of a device after its DDEATH that carries no value, which
    /// is released unpublished (SPB-5).
    pub(super) fn record(&mut self, mut message: Message) -> Option<(Vec<Outgoing>, Message)> {
        let mut before = Vec::new();
        if !self.topics.is_device_data(&message.topic) {
            return Some((before, message));
        }
        if self.dead.contains(&message.device) && !sparkplug::carries_values(&message.payload) {
            return None;
        }
        if !self.birthed.contains(&message.device)
            && let Some(device) = self.births.as_ref().and_then(|b| b.device(&message.device))
        {
            self.device_birth(
                &DeviceBirth {
                    offline: false,
                    ..device
                },
                now_ms(),
                &mut before,
            );
        }
        let seq = self.next_seq();
        let born_at = self.born_at.unwrap_or(i64::MAX);
        let made_at = sparkplug::made_at(&message.payload);
        let stored = std::mem::take(&mut message.payload);
        let payload = match made_at {
            Some(at) if i64::try_from(at).is_ok_and(|at| at >= born_at) => {
                sparkplug::sequenced(stored.into(), seq)
            }
            _ => sparkplug::historical(&stored, seq).unwrap_or_else(|error| {
                tracing::warn!(%error, topic = %message.topic, "a stored Sparkplug payload does not decode; published as stored");
                sparkplug::sequenced(stored.into(), seq)
            }),
        };
        message.payload = payload.into();
        Some((before, message))
    }

    /// An NCMD: a rebirth request gives every birth again (same bdSeq).
    pub(super) fn node_command(&mut self, payload: &[u8]) -> Vec<Outgoing> {
        match sparkplug::asks_rebirth(payload) {
            Ok(true) => {
                tracing::info!("rebirth requested by the host");
                self.birth()
            }
            Ok(false) => Vec::new(),
            Err(error) => {
                tracing::warn!(%error, "an NCMD refused");
                Vec::new()
            }
        }
    }

    /// The NDEATH published on a clean shutdown (the broker sends no will then).
    pub(super) fn death(&self) -> Outgoing {
        Outgoing {
            topic: self.topics.node_death(),
            payload: sparkplug::node_death(u64::from(self.bd_seq), now_ms()),
            qos: QoS::AtLeastOnce,
        }
    }
}

#[cfg(test)]
mod tests;
