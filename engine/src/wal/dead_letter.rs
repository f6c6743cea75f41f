//! Messages set aside because they can never be sent (WAL-9 of
//! `docs/wal.md`, SEC-2 of `docs/security.md`): bigger than the broker's packet limit, or refused by the
//! broker time after time. They leave the log so that they never hold up what
//! follows, and wait here, counted, until the operator removes them or sends
//! them again.
//!
//! ```text
//! set aside at (i64 LE, ms) | reason length (u16 LE) | reason | record (see `record.rs`)
//! ```

use serde::Serialize;

use super::record::{Message, RecordError, decode, encode};

/// Dead letters kept at most; setting one more aside drops the oldest (counted).
pub const MAX_DEAD_LETTERS: usize = 1000;

/// The longest reason kept, in bytes.
const MAX_REASON: usize = 512;

/// A message set aside, with why and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The record id it had in the log (it keeps it here).
    pub id: u64,
    /// When it was set aside, ms since the Unix epoch.
    pub at_ms: i64,
    pub reason: String,
    pub message: Message,
}

/// A dead letter as the API shows it: what it was, not its bytes.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetterView {
    pub id: u64,
    pub at: i64,
    pub reason: String,
    pub topic: String,
    /// The device the message is about (empty for the engine's own messages).
    pub device: String,
    /// The report's sequence number (0 when it is not a report).
    pub seq: u64,
    /// The payload's size in bytes.
    pub bytes: usize,
}

impl DeadLetter {
    pub fn view(&self) -> DeadLetterView {
        DeadLetterView {
            id: self.id,
            at: self.at_ms,
            reason: self.reason.clone(),
            topic: self.message.topic.clone(),
            device: self.message.device.clone(),
            seq: self.message.seq,
            bytes: self.message.payload.len(),
        }
    }

    /// The stored form.
    pub fn encode(&self) -> Vec<u8> {
        let reason = bounded(&self.reason);
        let record = encode(&self.message);
        let mut out = Vec::with_capacity(8 + 2 + reason.len() + record.len());
        out.extend_from_slice(&self.at_ms.to_le_bytes());
        out.extend_from_slice(&(reason.len() as u16).to_le_bytes());
        out.extend_from_slice(reason.as_bytes());
        out.extend_from_slice(&record);
        out
    }

    /// Reads a stored dead letter kept under `id`.
    ///
    /// # Errors
    /// Bytes cut short, or a record that fails its checksum.
    pub fn decode(id: u64, bytes: &[u8]) -> Result<Self, RecordError> {
        let (at, rest) = bytes.split_at_checked(8).ok_or(RecordError::Truncated)?;
        let at_ms = i64::from_le_bytes(at.try_into().map_err(|_| RecordError::Truncated)?);
        let (len, rest) = rest.split_at_checked(2).ok_or(RecordError::Truncated)?;
        let len = usize::from(u16::from_le_bytes([len[0], len[1]]));
        let (reason, record) = rest.split_at_checked(len).ok_or(RecordError::Truncated)?;
        Ok(Self {
            id,
            at_ms,
            reason: String::from_utf8_lossy(reason).into_owned(),
            message: decode(record)?,
        })
    }
}

/// `reason` cut to [`MAX_REASON`] bytes, at a character boundary.
fn bounded(reason: &str) -> &str {
    let mut end = reason.len().min(MAX_REASON);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_letter_reads_back_and_damage_is_refused() {
        let letter = DeadLetter {
            id: 7,
            at_ms: 1_700_000_000_123,
            reason: "é".repeat(400),
            message: Message {
                device: "d".into(),
                seq: 3,
                topic: "P/d/property/post".into(),
                payload: vec![b'x'; 100].into(),
                retain: true,
            },
        };
        let bytes = letter.encode();
        let back = DeadLetter::decode(7, &bytes).expect("decodes");
        assert_eq!(back.message, letter.message);
        assert_eq!(back.reason.len(), 512, "cut to the bound, whole characters");
        assert_eq!(back.at_ms, letter.at_ms);
        for len in 0..bytes.len() {
            assert!(
                DeadLetter::decode(7, &bytes[..len]).is_err(),
                "cut at {len}"
            );
        }
    }
}
