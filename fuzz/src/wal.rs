//! The WAL record decoder (WAL-5 of docs/wal.md): a damaged record is
//! refused, never misread; a record that decodes encodes back to its bytes
//! (FUZZ-7).

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
    let encoded = encode(&message);
    assert_eq!(
        decode(&encoded).as_ref(),
        Ok(&message),
        "a record that does not read back"
    );
    // Device ids and topics are stored as UTF-8; other bytes read as U+FFFD, so
    // only a record without it comes back byte for byte.
    let replaced = |text: &str| text.contains(char::REPLACEMENT_CHARACTER);
    if !replaced(&message.device) && !replaced(&message.topic) {
        assert_eq!(encoded, bytes, "a record that does not encode back");
    }
}
