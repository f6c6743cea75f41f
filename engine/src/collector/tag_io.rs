//! Writing one tag of a device and reading one back, on the connection of the
//! tag's channel: the link's lock serialises them with polling, so a write never
//! interleaves with a round's frames.

use super::device::{Channel, Device};
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
}
