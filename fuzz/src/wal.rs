//! The WAL record decoder (docs/wal.md, invariant 5): a damaged record is
//! refused, never misread; a record that decodes encodes back to its bytes.

use sluice::wal::{decode, encode};

/// Byte 0 bit 0 set: the input's checksum is recomputed, so the mutations
/// reach the fields behind it; clear: the record is decoded as it is.
pub fn record(data: &[u8]) {
    let Some((&flags, bytes)) = data.split_first() else {
        return;
    };
    let mut bytes = bytes.to_vec();
    if flags & 1 != 0 && bytes.len() >= 4 {
        let crc = crc32fast::hash(&bytes[4..]);
        bytes[..4].copy_from_slice(&crc.to_le_bytes());
    }
    let Ok(message) = decode(&bytes) else { return };
    // Device ids and topics are stored as UTF-8; other bytes read as U+FFFD,
    // so only a record of valid text comes back byte for byte.
    let stored_text = |at: usize| {
        let len = usize::from(u16::from_le_bytes([bytes[at], bytes[at + 1]]));
        (
            std::str::from_utf8(&bytes[at + 2..at + 2 + len]).is_ok(),
            at + 2 + len,
        )
    };
    let (device_ok, topic_at) = stored_text(13);
    let (topic_ok, _) = stored_text(topic_at);
    if device_ok && topic_ok {
        assert_eq!(
            encode(&message),
            bytes,
            "a record that does not encode back"
        );
    }
}
