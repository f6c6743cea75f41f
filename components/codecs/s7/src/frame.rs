//! ISO-on-TCP framing (RFC 1006): a 4-byte TPKT header (version 3, reserved,
//! total length) around a COTP TPDU (ISO 8073 class 0). The codec sends a
//! connection request (CR) once and then carries every S7 PDU in data TPDUs (DT).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// Bytes read before the frame length is known: the TPKT header.
pub const HEAD_LEN: usize = 4;
/// The shortest frame: TPKT header and a 3-byte DT header.
const MIN_FRAME: u16 = 7;
/// The longest frame accepted; far above the largest negotiated PDU.
pub const MAX_FRAME: u16 = 8192;

const CR: u8 = 0xE0;
const CC: u8 = 0xD0;
const DR: u8 = 0x80;
const ER: u8 = 0x70;
const DT: u8 = 0xF0;
/// Last data unit: the S7 PDU is complete in this TPDU.
const EOT: u8 = 0x80;

fn tpkt(payload_len: usize) -> Vec<u8> {
    let mut frame = Vec::with_capacity(HEAD_LEN + payload_len);
    frame.extend_from_slice(&[3, 0]);
    frame.extend_from_slice(&((HEAD_LEN + payload_len) as u16).to_be_bytes());
    frame
}

/// The COTP connection request: source reference 1, class 0, TPDU size 1024
/// (parameter `0xC0`), calling TSAP (`0xC1`) and called TSAP (`0xC2`).
pub fn connection_request(local_tsap: u16, remote_tsap: u16) -> Vec<u8> {
    let [l0, l1] = local_tsap.to_be_bytes();
    let [r0, r1] = remote_tsap.to_be_bytes();
    let cotp = [
        17, CR, 0x00, 0x00, 0x00, 0x01, 0x00, 0xC0, 0x01, 0x0A, 0xC1, 0x02, l0, l1, 0xC2, 0x02, r0,
        r1,
    ];
    let mut frame = tpkt(cotp.len());
    frame.extend_from_slice(&cotp);
    frame
}

/// A frame carrying `pdu` in one data TPDU.
pub fn data(pdu: &[u8]) -> Vec<u8> {
    let mut frame = tpkt(3 + pdu.len());
    frame.extend_from_slice(&[2, DT, EOT]);
    frame.extend_from_slice(pdu);
    frame
}

/// Total frame size announced by a TPKT header.
///
/// # Errors
/// A version other than 3 or a length outside 7..=8192.
pub fn total_len(head: &[u8]) -> Result<u32, String> {
    let [version, _, l0, l1] = head
        .get(..HEAD_LEN)
        .and_then(|h| <[u8; HEAD_LEN]>::try_from(h).ok())
        .ok_or_else(|| format!("TPKT header of {} bytes, expected {HEAD_LEN}", head.len()))?;
    if version != 3 {
        return Err(format!("TPKT version {version}, expected 3"));
    }
    let length = u16::from_be_bytes([l0, l1]);
    if !(MIN_FRAME..=MAX_FRAME).contains(&length) {
        return Err(format!(
            "TPKT length {length} is outside {MIN_FRAME}..={MAX_FRAME}"
        ));
    }
    Ok(u32::from(length))
}

/// The COTP TPDU of a frame (length indicator onwards), its type and its length
/// indicator, after checking the TPKT header against the frame size.
fn tpdu(frame: &[u8]) -> Result<(u8, &[u8]), String> {
    let total = total_len(frame.get(..HEAD_LEN).unwrap_or(frame))? as usize;
    if total != frame.len() {
        return Err(format!(
            "TPKT length says {total} bytes, the frame has {}",
            frame.len()
        ));
    }
    let tpdu = frame.get(HEAD_LEN..).unwrap_or_default();
    let (Some(&li), Some(&kind)) = (tpdu.first(), tpdu.get(1)) else {
        return Err("COTP header is missing".into());
    };
    if usize::from(li) + 1 > tpdu.len() || li < 2 {
        return Err(format!(
            "COTP length indicator {li} does not fit a TPDU of {} bytes",
            tpdu.len()
        ));
    }
    Ok((kind & 0xF0, tpdu))
}

/// Why a connection request was not confirmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not a COTP answer to a connection request.
    Malformed(String),
    /// The PLC refused the connection: disconnect reason or reject cause.
    Refused(u8, &'static str),
}

/// Checks the answer to the connection request: a connection confirm (CC).
///
/// # Errors
/// A disconnect request (DR) or a TPDU error (ER) is a refusal; anything else
/// that is not a CC is malformed.
pub fn connection_confirm(frame: &[u8]) -> Result<(), Refusal> {
    let (kind, tpdu) = tpdu(frame).map_err(Refusal::Malformed)?;
    match kind {
        CC if tpdu.len() >= 7 => Ok(()),
        DR => Err(Refusal::Refused(
            tpdu.get(6).copied().unwrap_or(0),
            "disconnect request",
        )),
        ER => Err(Refusal::Refused(
            tpdu.get(4).copied().unwrap_or(0),
            "TPDU error",
        )),
        _ => Err(Refusal::Malformed(format!(
            "COTP TPDU type {kind:#04x}, expected a connection confirm (0xd0)"
        ))),
    }
}

/// The S7 PDU carried by a data TPDU.
///
/// # Errors
/// A bad TPKT header, a TPDU other than DT, or a PDU split over several TPDUs.
pub fn payload(frame: &[u8]) -> Result<&[u8], String> {
    let (kind, tpdu) = tpdu(frame)?;
    if kind != DT {
        return Err(format!("COTP TPDU type {kind:#04x}, expected data (0xf0)"));
    }
    let eot = tpdu.get(2).copied().unwrap_or(0);
    if eot & EOT == 0 {
        return Err("the PDU is split over several COTP data units".into());
    }
    let li = usize::from(tpdu.first().copied().unwrap_or(0));
    Ok(tpdu.get(li + 1..).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_request_is_byte_exact() {
        assert_eq!(
            connection_request(0x0100, 0x0102),
            [
                0x03, 0x00, 0x00, 0x16, 0x11, 0xE0, 0x00, 0x00, 0x00, 0x01, 0x00, 0xC0, 0x01, 0x0A,
                0xC1, 0x02, 0x01, 0x00, 0xC2, 0x02, 0x01, 0x02
            ]
        );
    }

    #[test]
    fn header_lengths() {
        assert_eq!(total_len(&[3, 0, 0, 0x16]), Ok(22));
        assert_eq!(total_len(&[3, 0, 0x20, 0x00]), Ok(8192));
        assert!(total_len(&[3, 0, 0x20, 0x01]).is_err());
        assert!(total_len(&[3, 0, 0, 6]).is_err());
        assert!(total_len(&[2, 0, 0, 22]).is_err());
        assert!(total_len(&[3, 0, 0]).is_err());
    }

    #[test]
    fn confirm_refusal_and_data() {
        let cc = [
            0x03, 0x00, 0x00, 0x16, 0x11, 0xD0, 0x00, 0x01, 0x00, 0x01, 0x00, 0xC0, 0x01, 0x0A,
            0xC1, 0x02, 0x01, 0x00, 0xC2, 0x02, 0x01, 0x02,
        ];
        assert_eq!(connection_confirm(&cc), Ok(()));
        let dr = [3, 0, 0, 11, 6, 0x80, 0, 1, 0, 0, 0x81];
        assert_eq!(
            connection_confirm(&dr),
            Err(Refusal::Refused(0x81, "disconnect request"))
        );
        assert!(matches!(
            connection_confirm(&cc[..21]),
            Err(Refusal::Malformed(_))
        ));
        let frame = data(&[0x32, 0x03]);
        assert_eq!(frame, [3, 0, 0, 9, 2, 0xF0, 0x80, 0x32, 0x03]);
        assert_eq!(payload(&frame), Ok(&[0x32, 0x03][..]));
        assert!(payload(&cc).is_err(), "a CC carries no PDU");
        assert!(payload(&[3, 0, 0, 9, 2, 0xF0, 0x00, 0x32, 0x03]).is_err());
    }
}
