//! Writing one tag of a device and reading one back, on the connection of the
//! tag's channel: the link's lock serialises them with polling, so a write never
//! interleaves with a round's frames. A device that publishes by itself is
//! written by a message its decoder encodes, published on its `commandTopic`,
//! and read back from its next message (PUSH-4 of `docs/push.md`).

use std::sync::Arc;
use std::time::Duration;

use super::device::{Channel, Device};
use super::push::PushInput;
use crate::clock::now_ms;
use crate::intake::NotPublished;
use crate::io::LinkError;
use crate::model::{Batch, DeviceError, FrameError, Sample, Value};

/// Why a tag could not be written or read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TagIoError {
    /// The device (or the codec, for a value it cannot encode) said no: trying
    /// again would get the same answer.
    #[error("refused (code {code}): {message}")]
    Refused { code: u32, message: String },
    /// No connection: nothing was sent, another attempt may work.
    #[error("{0}")]
    Unreachable(String),
    /// The request went out (or may have) but no valid answer came: a timeout,
    /// a lost connection, a broken answer. The device may have carried it out.
    #[error("{0}")]
    Lost(String),
    /// A component call failed.
    #[error("{0}")]
    Component(String),
}

impl From<LinkError> for TagIoError {
    fn from(error: LinkError) -> Self {
        match error {
            LinkError::Codec(error) | LinkError::Framing(error) => {
                TagIoError::Component(error.to_string())
            }
            other => TagIoError::Unreachable(other.to_string()),
        }
    }
}

fn from_frame(error: FrameError) -> TagIoError {
    match error {
        FrameError::Device(refusal) => refused(refusal),
        FrameError::Malformed(message) => {
            TagIoError::Unreachable(format!("malformed answer: {message}"))
        }
    }
}

fn refused(refusal: DeviceError) -> TagIoError {
    TagIoError::Refused {
        code: refusal.code,
        message: refusal.message,
    }
}

impl Device {
    /// The index of the tag `key`.
    pub fn tag_index(&self, key: &str) -> Option<u32> {
        self.tags
            .iter()
            .position(|t| t.key == key)
            .map(|i| i as u32)
    }

    /// Whether tag `tag` is read back after a write.
    pub fn reads_back(&self, tag: u32) -> bool {
        self.writable
            .as_ref()
            .is_some_and(|w| w.readback.get(tag as usize).copied().unwrap_or(false))
    }

    fn channel_of(&self, tag: u32) -> Result<(&Channel, u32), TagIoError> {
        self.channels
            .iter()
            .find_map(|c| c.local(tag).map(|local| (c, local)))
            .ok_or_else(|| TagIoError::Component(format!("no channel holds tag {tag}")))
    }

    /// Writes the raw (device-side) `value` to tag `tag`.
    ///
    /// # Errors
    /// Refused by the device or codec, unreachable (nothing sent), lost (sent,
    /// no valid answer), or a component failure before anything was sent.
    pub async fn write_tag(&self, tag: u32, value: Value) -> Result<(), TagIoError> {
        if let Some(push) = &self.push {
            return self.publish_write(push, tag, value).await;
        }
        let (channel, local) = self.channel_of(tag)?;
        let mut link = channel.link.lock().await;
        let session = channel.session.get();
        link.ensure_online(&*session).await?;
        let frame = session
            .encode_write(local, value)
            .map_err(|e| TagIoError::Component(e.to_string()))?
            .map_err(|error| self.unwritable(tag, error))?;
        // From here on the frame may reach the device: a failure leaves the
        // outcome in doubt.
        link.request(&*session, &frame, |answer| session.check_write(answer))
            .await
            .map_err(|error| TagIoError::Lost(error.to_string()))?
            .map_err(refused)
    }

    /// A value the codec cannot write to tag `tag`, with the tag's key before
    /// the codec's message (codecs keep no keys).
    fn unwritable(&self, tag: u32, error: FrameError) -> TagIoError {
        match error {
            FrameError::Device(mut refusal) => {
                if let Some(spec) = self.tags.get(tag as usize) {
                    refusal.message = format!("tag `{}`: {}", spec.key, refusal.message);
                }
                refused(refusal)
            }
            malformed @ FrameError::Malformed(_) => from_frame(malformed),
        }
    }

    /// Reads tag `tag` now and decodes it (engineering value).
    ///
    /// # Errors
    /// Refused by the device, unreachable, a component failure, or a device
    /// without write access (nothing to decode with).
    pub async fn read_tag(&self, tag: u32) -> Result<Sample, TagIoError> {
        if let Some(push) = &self.push {
            return self.next_reported(push, tag).await;
        }
        let Some(writable) = &self.writable else {
            return Err(TagIoError::Component(format!(
                "device `{}` has no writable tag",
                self.id
            )));
        };
        let (channel, local) = self.channel_of(tag)?;
        let mut raw = Batch::default();
        {
            let mut link = channel.link.lock().await;
            let session = channel.session.get();
            link.ensure_online(&*session).await?;
            let plan = session
                .plan(&[local])
                .map_err(|e| TagIoError::Component(e.to_string()))?;
            for request in plan {
                let frame = session
                    .encode_read(request.id)
                    .map_err(|e| TagIoError::Component(e.to_string()))?
                    .map_err(from_frame)?;
                let parsed = link
                    .request(&*session, &frame, |answer| {
                        session.parse_read(request.id, answer, crate::clock::now_ms())
                    })
                    .await?
                    .map_err(refused)?;
                raw.append(parsed, |local| channel.device_tag(local));
            }
        }
        // A fresh decode each time: reset first, so no memory of an earlier read.
        let decoder = writable.decoder.get();
        decoder
            .reset_in_round()
            .await
            .map_err(|e| TagIoError::Component(e.to_string()))?;
        let decoded = decoder
            .run_in_round(raw)
            .await
            .map_err(|e| TagIoError::Component(e.to_string()))?;
        decoded
            .samples
            .into_iter()
            .find(|s| s.tag == tag)
            .ok_or_else(|| TagIoError::Component(format!("reading tag {tag} gave no value")))
    }

    /// Tag `tag`'s value before a write: read now from a polled device; the
    /// last one reported by a device that publishes by itself (asking it
    /// would mean waiting for its next message).
    ///
    /// # Errors
    /// As [`Device::read_tag`]; nothing reported yet.
    pub async fn value_before_write(&self, tag: u32) -> Result<Sample, TagIoError> {
        if self.push.is_none() {
            return self.read_tag(tag).await;
        }
        self.latest
            .get(tag)
            .filter(|s| s.ts_ms > 0)
            .ok_or_else(|| TagIoError::Unreachable("nothing reported yet".into()))
    }

    /// Publishes the message the decoder makes of `value` for tag `tag`, on
    /// the device's broker; done once the broker acknowledged it.
    async fn publish_write(
        &self,
        push: &PushInput,
        tag: u32,
        value: Value,
    ) -> Result<(), TagIoError> {
        let key = self.tags.get(tag as usize).map_or("?", |t| t.key.as_str());
        let Some(command_topic) = &push.command_topic else {
            return Err(TagIoError::Refused {
                code: 0,
                message: format!(
                    "device `{}` has no `commandTopic`: it takes no writes",
                    self.id
                ),
            });
        };
        let decoder = push.decoder.get();
        let outgoing = Arc::clone(&decoder)
            .call_in_round("encode", move |decoder| decoder.encode(tag, value))
            .await
            .map_err(|e| TagIoError::Component(e.to_string()))?
            .map_err(|message| TagIoError::Refused {
                code: 0,
                message: format!("tag `{key}`: {message}"),
            })?;
        // SEC-10: a decoder writes to its own device only.
        let below = outgoing
            .topic
            .strip_prefix(command_topic.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
        if !below {
            return Err(TagIoError::Component(format!(
                "decoder `{}` asked to publish on `{}`, outside the device's `commandTopic` `{command_topic}`: refused",
                decoder.component(),
                outgoing.topic
            )));
        }
        let Some(publisher) = push.publisher() else {
            return Err(TagIoError::Unreachable(format!(
                "not connected to the device broker {} yet: nothing was sent",
                push.broker.address()
            )));
        };
        publisher
            .publish(outgoing.topic, outgoing.payload)
            .await
            .map_err(|error| match error {
                NotPublished::Unreachable(_) => TagIoError::Unreachable(error.to_string()),
                NotPublished::Lost(_) => TagIoError::Lost(error.to_string()),
            })
    }

    /// Tag `tag` as the device's next message reports it (after the pipeline),
    /// waiting at most the device's lease for one that carries it.
    async fn next_reported(&self, push: &PushInput, tag: u32) -> Result<Sample, TagIoError> {
        let mut handled = push.watch_handled();
        let since = now_ms();
        let wait = Duration::from_secs(self.lease_seconds().max(1));
        let reported = tokio::time::timeout(wait, async {
            loop {
                if handled.changed().await.is_err() {
                    return None;
                }
                if let Some(sample) = self.latest.get(tag).filter(|s| s.ts_ms >= since) {
                    return Some(sample);
                }
            }
        })
        .await;
        match reported {
            Ok(Some(sample)) => Ok(sample),
            Ok(None) => Err(TagIoError::Unreachable("the device was removed".into())),
            Err(_) => Err(TagIoError::Unreachable(format!(
                "the device reported no value of tag {tag} within its lease ({} s)",
                wait.as_secs()
            ))),
        }
    }
}
