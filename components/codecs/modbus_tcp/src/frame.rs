//! MBAP frames: the 7-byte header (transaction id, protocol id 0, length, unit id)
//! followed by the PDU.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// Bytes read before the frame length is known: transaction, protocol, length.
pub const HEAD_LEN: usize = 6;
/// The unit ids a channel may name.
pub const UNITS: (u32, u32) = (0, 255);
/// The largest length field: unit id plus the largest PDU (253 bytes).
const MAX_LENGTH_FIELD: u16 = 254;

/// A frame with `pdu` for `unit` under transaction `tid`.
pub fn build(tid: u16, unit: u8, pdu: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(7 + pdu.len());
    frame.extend_from_slice(&tid.to_be_bytes());
    frame.extend_from_slice(&[0, 0]);
    frame.extend_from_slice(&((pdu.len() + 1) as u16).to_be_bytes());
    frame.push(unit);
    frame.extend_from_slice(pdu);
    frame
}

/// Total frame size announced by a header.
///
/// # Errors
/// A protocol id other than 0 or a length no Modbus frame has.
pub fn total_len(head: &[u8]) -> Result<u32, String> {
    let [t0, t1, p0, p1, l0, l1] = head
        .get(..HEAD_LEN)
        .and_then(|h| <[u8; HEAD_LEN]>::try_from(h).ok())
        .ok_or_else(|| format!("header of {} bytes, expected {HEAD_LEN}", head.len()))?;
    let _ = (t0, t1);
    let protocol = u16::from_be_bytes([p0, p1]);
    if protocol != 0 {
        return Err(format!(
            "protocol id {protocol} in the MBAP header, expected 0"
        ));
    }
    let length = u16::from_be_bytes([l0, l1]);
    if !(2..=MAX_LENGTH_FIELD).contains(&length) {
        return Err(format!(
            "MBAP length {length} is outside 2..={MAX_LENGTH_FIELD}"
        ));
    }
    Ok(HEAD_LEN as u32 + u32::from(length))
}

/// The PDU of a response, after checking the header against what was sent.
///
/// # Errors
/// A transaction id, protocol id, length or unit id that does not match, or a
/// PDU of less than two bytes.
pub fn pdu(frame: &[u8], tid: u16, unit: u8) -> Result<&[u8], String> {
    if frame.len() < HEAD_LEN + 2 {
        return Err(format!("frame of {} bytes is too short", frame.len()));
    }
    let got_tid = u16::from_be_bytes([frame[0], frame[1]]);
    if got_tid != tid {
        return Err(format!("transaction id {got_tid}, expected {tid}"));
    }
    let total = total_len(&frame[..HEAD_LEN])? as usize;
    if total != frame.len() {
        return Err(format!(
            "MBAP length says {total} bytes, frame has {}",
            frame.len()
        ));
    }
    if frame[6] != unit {
        return Err(format!("unit id {}, expected {unit}", frame[6]));
    }
    match &frame[7..] {
        pdu @ [_, _, ..] => Ok(pdu),
        _ => Err("a PDU of one byte, with no data or exception code".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_and_check_a_frame() {
        let frame = build(7, 1, &[0x03, 0x00, 0x00, 0x00, 0x02]);
        assert_eq!(frame, [0, 7, 0, 0, 0, 6, 1, 3, 0, 0, 0, 2]);
        assert_eq!(total_len(&frame[..6]), Ok(12));
        assert_eq!(pdu(&frame, 7, 1), Ok(&frame[7..]));
        assert!(pdu(&frame, 8, 1).is_err());
        assert!(pdu(&frame, 7, 2).is_err());
        assert!(
            pdu(&build(7, 1, &[0x83]), 7, 1).is_err(),
            "no exception code"
        );
        assert!(total_len(&[0, 1, 0, 1, 0, 6]).is_err(), "protocol id 1");
        assert!(total_len(&[0, 1, 0, 0, 1, 0]).is_err(), "length 256");
        assert!(total_len(&[0, 1, 0]).is_err());
    }
}
