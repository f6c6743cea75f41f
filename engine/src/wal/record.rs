//! The encoding of one WAL record: a report (or any message) waiting for its PUBACK.
//!
//! ```text
//! crc32 (u32 LE, over everything after it) | seq (u64 LE) | retain (u8)
//! | device length (u16 LE) | device id | topic length (u16 LE) | topic | payload
//! ```
//! The checksum lets a reader tell a damaged record from a good one (WAL-5 of
//! `docs/wal.md`): a damaged record is skipped and counted, never published.

use bytes::Bytes;

/// A message to store and publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The device the message is about (empty for engine messages).
    pub device: String,
    /// The device's report sequence number (0 when not a report).
    pub seq: u64,
    pub topic: String,
    /// Shared, not copied, as the message goes from the outbox to the connection.
    pub payload: Bytes,
    pub retain: bool,
}

/// A stored message and its place in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Position in the log: ids only grow, so id order is append order.
    pub id: u64,
    pub message: Message,
}

/// Why bytes are not a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("checksum mismatch")]
    Checksum,
    #[error("record truncated")]
    Truncated,
    /// Only 0 and 1 are written; another value is not a record of this log.
    #[error("retain flag {0}, expected 0 or 1")]
    RetainFlag(u8),
}

/// The stored form of `message`.
pub fn encode(message: &Message) -> Vec<u8> {
    let device = message.device.as_bytes();
    let topic = message.topic.as_bytes();
    let device_len = device.len().min(u16::MAX as usize);
    let topic_len = topic.len().min(u16::MAX as usize);
    let mut out =
        Vec::with_capacity(4 + 8 + 1 + 2 + device_len + 2 + topic_len + message.payload.len());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&message.seq.to_le_bytes());
    out.push(u8::from(message.retain));
    out.extend_from_slice(&(device_len as u16).to_le_bytes());
    out.extend_from_slice(&device[..device_len]);
    out.extend_from_slice(&(topic_len as u16).to_le_bytes());
    out.extend_from_slice(&topic[..topic_len]);
    out.extend_from_slice(&message.payload);
    let crc = crc32fast::hash(&out[4..]);
    out[..4].copy_from_slice(&crc.to_le_bytes());
    out
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        if self.0.len() < n {
            return Err(RecordError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u16(&mut self) -> Result<usize, RecordError> {
        let b = self.take(2)?;
        Ok(usize::from(u16::from_le_bytes([b[0], b[1]])))
    }
}

/// Decodes and verifies a stored record.
///
/// # Errors
/// A checksum mismatch or a record cut short.
pub fn decode(bytes: &[u8]) -> Result<Message, RecordError> {
    let mut reader = Reader(bytes);
    let crc = reader.take(4)?;
    let expected = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    if crc32fast::hash(reader.0) != expected {
        return Err(RecordError::Checksum);
    }
    let seq = reader.take(8)?;
    let seq = u64::from_le_bytes(seq.try_into().map_err(|_| RecordError::Truncated)?);
    let retain = match reader.take(1)?[0] {
        0 => false,
        1 => true,
        other => return Err(RecordError::RetainFlag(other)),
    };
    let device_len = reader.u16()?;
    let device = String::from_utf8_lossy(reader.take(device_len)?).into_owned();
    let topic_len = reader.u16()?;
    let topic = String::from_utf8_lossy(reader.take(topic_len)?).into_owned();
    Ok(Message {
        device,
        seq,
        topic,
        payload: Bytes::copy_from_slice(reader.0),
        retain,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message() -> Message {
        Message {
            device: "dev-1".into(),
            seq: 42,
            topic: "P/D/property/post".into(),
            payload: Bytes::from_static(b"{\"seq\":42}"),
            retain: false,
        }
    }

    #[test]
    fn round_trip() {
        assert_eq!(decode(&encode(&message())), Ok(message()));
    }

    #[test]
    fn a_retain_flag_no_engine_writes_is_refused_even_under_a_good_checksum() {
        let mut bytes = encode(&message());
        bytes[12] = 0x33;
        let crc = crc32fast::hash(&bytes[4..]);
        bytes[..4].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(decode(&bytes), Err(RecordError::RetainFlag(0x33)));
    }

    #[test]
    fn any_flipped_bit_or_cut_is_detected() {
        let bytes = encode(&message());
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut damaged = bytes.clone();
                damaged[i] ^= 1 << bit;
                assert!(decode(&damaged).is_err(), "byte {i} bit {bit}");
            }
        }
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err(), "cut at {len}");
        }
    }
}
