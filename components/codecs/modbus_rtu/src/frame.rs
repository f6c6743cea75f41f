//! RTU frames: the unit id, the PDU, and the CRC-16 of both (low byte first).
//! There is no length field and no transaction id: the line carries one
//! request at a time.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// Bytes read before the frame length is known: unit, function, byte count.
pub const HEAD_LEN: usize = 3;
/// The unit ids a channel may name (0 is a broadcast: nobody answers).
pub const UNITS: (u32, u32) = (1, 247);
/// The largest RTU frame: unit, 253 bytes of PDU, CRC.
const MAX_FRAME: u32 = 256;

/// CRC-16/MODBUS of `bytes`.
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc = 0xFFFFu16;
    for byte in bytes {
        crc ^= u16::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xA001
            } else {
                crc >> 1
            };
        }
    }
    crc
}

/// A frame with `pdu` for `unit`; RTU has no transaction id, so `_tid` is unused.
pub fn build(_tid: u16, unit: u8, pdu: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(3 + pdu.len());
    frame.push(unit);
    frame.extend_from_slice(pdu);
    let crc = crc16(&frame);
    frame.extend_from_slice(&crc.to_le_bytes());
    frame
}

/// Total size of the answer that starts with `head` (unit, function, and the
/// byte count of a read or the first byte of an echo or exception code).
///
/// # Errors
/// A function no answer to this codec's requests has.
pub fn total_len(head: &[u8]) -> Result<u32, String> {
    let [_, function, third] = <[u8; HEAD_LEN]>::try_from(head)
        .map_err(|_| format!("header of {} bytes, expected {HEAD_LEN}", head.len()))?;
    let total = match function {
        f if f & 0x80 != 0 => 5,
        1..=4 => 5 + u32::from(third),
        5 | 6 | 15 | 16 => 8,
        other => {
            return Err(format!(
                "function {other:#04x} in the answer: not one this codec asks for"
            ));
        }
    };
    if total > MAX_FRAME {
        return Err(format!("an answer of {total} bytes, more than RTU allows"));
    }
    Ok(total)
}

/// The PDU of an answer, after checking its CRC and unit.
///
/// # Errors
/// A frame too short for a PDU, a CRC that does not match, or an answer from
/// another unit.
pub fn pdu(frame: &[u8], _tid: u16, unit: u8) -> Result<&[u8], String> {
    if frame.len() < 5 {
        return Err(format!(
            "a frame of {} bytes is too short for unit, function, data and CRC",
            frame.len()
        ));
    }
    let (body, crc) = frame.split_at(frame.len() - 2);
    let got = u16::from_le_bytes([crc[0], crc[1]]);
    let want = crc16(body);
    if got != want {
        return Err(format!("CRC {got:#06x}, expected {want:#06x}"));
    }
    if body[0] != unit {
        return Err(format!("an answer from unit {}, expected {unit}", body[0]));
    }
    Ok(&body[1..])
}
