//! MC protocol binary frames: 3E, 4E, and the A-compatible 1E frame.
//!
//! Request (3E): subheader `50 00`, network 0, PC `FF`, request destination module
//! I/O `03FF` (LE), station 0, request data length (LE, counted from the monitoring
//! timer on), monitoring timer, command, subcommand (all LE), then the command data.
//! Response: subheader `D0 00`, the same five route bytes, response data length (LE,
//! counted from the end code on), end code (LE), then the data (or, after a non-zero
//! end code, error information).
//!
//! 4E inserts a serial number (LE) and two reserved zero bytes after the subheader
//! (`54 00` request, `D4 00` response); the response echoes the serial number.
//!
//! 1E (the A-series frame, which Q/L modules speak too): the request is a
//! one-byte command (`00` read bits, `01` read words, `02` write bits, `03`
//! write words), PC `FF`, the monitoring timer (LE), the head device number (4
//! bytes LE), the device code (2 bytes LE, the device's name in ASCII: `D` is
//! `20 44`), the number of points (one byte, `00` meaning 256) and a `00`, then
//! the data of a write. The response is the command with its top bit set, a
//! completion code, and on success the data; it has no length field, so its
//! size follows from the request in flight. A completion code `5B` is followed
//! by an abnormal code; any other non-zero completion code ends the response.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// Batch read in word or bit units.
pub const READ: u16 = 0x0401;
/// Batch write in word or bit units.
pub const WRITE: u16 = 0x1401;

/// Network 0, PC `FF`, module I/O `03FF` (the CPU, LE), station 0.
const ROUTE: [u8; 5] = [0x00, 0xFF, 0xFF, 0x03, 0x00];
/// The largest response data length accepted: the end code plus 960 words
/// (1922 bytes) is the most a request of this codec asks for; a little slack on top.
const MAX_DATA_LEN: u16 = 2048;

/// The frame format of a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameType {
    E1,
    E3,
    E4,
}

impl FrameType {
    /// Bytes of a response up to and including its data length field (1E:
    /// its command and completion code, which tell its size with the request).
    pub fn head_len(self) -> usize {
        match self {
            FrameType::E1 => 2,
            FrameType::E3 => 9,
            FrameType::E4 => 13,
        }
    }

    fn response_subheader(self) -> [u8; 2] {
        match self {
            FrameType::E4 => [0xD4, 0x00],
            FrameType::E1 | FrameType::E3 => [0xD0, 0x00],
        }
    }
}

/// The most points one 1E request reads or writes, in words or bits.
pub const MAX_POINTS_1E: u32 = 256;

/// The 1E command of a batch read or write in bit or word units.
pub fn command_1e(write: bool, bits: bool) -> u8 {
    (if write { 2 } else { 0 }) | u8::from(!bits)
}

/// A 1E request: `command` on `points` (at most [`MAX_POINTS_1E`]) from device
/// `number` of the device of 1E code `code`, with a write's `data`.
pub fn request_1e(
    command: u8,
    timer: u16,
    number: u32,
    code: u16,
    points: u32,
    data: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + data.len());
    out.extend_from_slice(&[command, 0xFF]);
    out.extend_from_slice(&timer.to_le_bytes());
    out.extend_from_slice(&number.to_le_bytes());
    out.extend_from_slice(&code.to_le_bytes());
    // 256 points are written as 0.
    out.extend_from_slice(&[(points % 256) as u8, 0x00]);
    out.extend_from_slice(data);
    out
}

/// What the answer to a 1E request in flight is: its command byte, and the
/// data bytes it carries on success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expect1E {
    pub subheader: u8,
    pub data_len: u32,
}

impl Expect1E {
    /// The answer to `command` carrying `data_len` bytes on success.
    pub fn to(command: u8, data_len: u32) -> Self {
        Expect1E {
            subheader: command | 0x80,
            data_len,
        }
    }
}

/// The completion code after which an abnormal code follows.
const ABNORMAL_1E: u8 = 0x5B;

/// Total size of the 1E answer whose first two bytes are `head`.
///
/// # Errors
/// A short head, or a command byte other than the answer expected.
pub fn total_len_1e(head: &[u8], expect: Expect1E) -> Result<u32, String> {
    let [command, completion, ..] = *head else {
        return Err(format!("header of {} bytes, expected 2", head.len()));
    };
    if command != expect.subheader {
        return Err(format!(
            "response command {command:02X}, expected {:02X}",
            expect.subheader
        ));
    }
    Ok(match completion {
        0 => 2 + expect.data_len,
        ABNORMAL_1E => 3,
        _ => 2,
    })
}

/// Checks a whole 1E answer: its end code is the completion code, or `5Bxx`
/// with the abnormal code `xx`.
///
/// # Errors
/// A wrong command byte, or a size other than [`total_len_1e`] says.
pub fn response_1e(bytes: &[u8], expect: Expect1E) -> Result<Response<'_>, String> {
    let total = total_len_1e(bytes, expect)? as usize;
    if total != bytes.len() {
        return Err(format!(
            "a 1E response of {} bytes, expected {total}",
            bytes.len()
        ));
    }
    let completion = bytes.get(1).copied().unwrap_or_default();
    let end_code = match completion {
        ABNORMAL_1E => u16::from_be_bytes([completion, bytes.get(2).copied().unwrap_or_default()]),
        other => u16::from(other),
    };
    Ok(Response {
        end_code,
        data: if completion == 0 {
            bytes.get(2..).unwrap_or_default()
        } else {
            &[]
        },
    })
}

/// The message of 1E end code `code` (see [`response_1e`]) for `what`.
pub fn end_code_1e(code: u16, what: &str) -> String {
    match code.to_be_bytes() {
        [ABNORMAL_1E, abnormal] => format!(
            "completion code 0x5B, abnormal code 0x{abnormal:02X} (the CPU could not be \
             reached; see the PLC manual) for {what}"
        ),
        _ => format!("completion code 0x{code:02X} (see the PLC manual) for {what}"),
    }
}

/// Whether a 1E end code can be blamed on the devices asked for: every
/// completion code but the CPU's abnormal one (`5B`) is about the request.
pub fn blames_addresses_1e(code: u16) -> bool {
    code != 0 && code >> 8 != u16::from(ABNORMAL_1E)
}

/// Subcommand of a batch read or write: word or bit units, Q/L (3-byte device
/// numbers, 1-byte codes) or iQ-R (4-byte numbers, 2-byte codes).
pub fn subcommand(wide: bool, bits: bool) -> u16 {
    (if wide { 2 } else { 0 }) | u16::from(bits)
}

/// Appends the device specification: head device number and device code.
pub fn push_device(out: &mut Vec<u8>, number: u32, code: u8, wide: bool) {
    let n = number.to_le_bytes();
    if wide {
        out.extend_from_slice(&n);
        out.extend_from_slice(&[code, 0x00]);
    } else {
        out.extend_from_slice(&[n[0], n[1], n[2], code]);
    }
}

/// A 3E or 4E request frame carrying `command`/`subcommand` and `data` (1E
/// requests are [`request_1e`]'s).
pub fn request(
    frame: FrameType,
    serial: u16,
    timer: u16,
    command: u16,
    subcommand: u16,
    data: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(frame.head_len() + 6 + data.len());
    match frame {
        FrameType::E1 | FrameType::E3 => out.extend_from_slice(&[0x50, 0x00]),
        FrameType::E4 => {
            out.extend_from_slice(&[0x54, 0x00]);
            out.extend_from_slice(&serial.to_le_bytes());
            out.extend_from_slice(&[0x00, 0x00]);
        }
    }
    out.extend_from_slice(&ROUTE);
    out.extend_from_slice(&((6 + data.len()) as u16).to_le_bytes());
    out.extend_from_slice(&timer.to_le_bytes());
    out.extend_from_slice(&command.to_le_bytes());
    out.extend_from_slice(&subcommand.to_le_bytes());
    out.extend_from_slice(data);
    out
}

fn le16(bytes: &[u8], at: usize) -> Option<u16> {
    let pair = bytes.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes(<[u8; 2]>::try_from(pair).ok()?))
}

/// Total size of the response whose head is `head`.
///
/// # Errors
/// A short head, a subheader other than the frame type's, or a data length no
/// answer of this codec has.
pub fn total_len(frame: FrameType, head: &[u8]) -> Result<u32, String> {
    let len = frame.head_len();
    if head.len() < len {
        return Err(format!("header of {} bytes, expected {len}", head.len()));
    }
    let subheader = frame.response_subheader();
    if head.get(..2) != Some(&subheader[..]) {
        return Err(format!(
            "subheader {:02X?}, expected {subheader:02X?}",
            head.get(..2).unwrap_or_default()
        ));
    }
    let data_len = le16(head, len - 2).unwrap_or_default();
    if !(2..=MAX_DATA_LEN).contains(&data_len) {
        return Err(format!(
            "response data length {data_len} is outside 2..={MAX_DATA_LEN}"
        ));
    }
    Ok(len as u32 + u32::from(data_len))
}

/// A checked response: its end code and what follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response<'a> {
    pub end_code: u16,
    pub data: &'a [u8],
}

/// Checks a whole response frame against the request it answers.
///
/// # Errors
/// A wrong subheader, length, route or (4E) serial number.
pub fn response(frame: FrameType, serial: u16, bytes: &[u8]) -> Result<Response<'_>, String> {
    let total = total_len(frame, bytes)? as usize;
    if total != bytes.len() {
        return Err(format!(
            "response data length says {total} bytes, frame has {}",
            bytes.len()
        ));
    }
    let head = frame.head_len();
    if frame == FrameType::E4 {
        let got = le16(bytes, 2).unwrap_or_default();
        if got != serial {
            return Err(format!("serial number {got}, expected {serial}"));
        }
        if bytes.get(4..6) != Some(&[0, 0][..]) {
            return Err("reserved bytes of the 4E header are not zero".into());
        }
    }
    let route = bytes.get(head - 7..head - 2).unwrap_or_default();
    if route != ROUTE {
        return Err(format!(
            "route {route:02X?} in the response, expected {ROUTE:02X?}"
        ));
    }
    let end_code = le16(bytes, head).ok_or("response without an end code")?;
    Ok(Response {
        end_code,
        data: bytes.get(head + 2..).unwrap_or_default(),
    })
}

/// The message of end code `code` for `what` was asked.
pub fn end_code(code: u16, what: &str) -> String {
    format!("end code 0x{code:04X} ({}) for {what}", end_code_name(code))
}

/// What an end code means (the common ones; the PLC manual lists the rest).
fn end_code_name(code: u16) -> &'static str {
    match code {
        0xC051..=0xC054 => "number of points out of range",
        0xC056 => "request exceeds the largest device number",
        0xC058 => "request data length does not match",
        0xC059 => "command or subcommand not supported",
        0xC05B => "the CPU cannot access the device",
        0xC05C => "request data error",
        0xC061 => "request data length mismatch",
        0x4000..=0x4FFF => "error detected by the CPU",
        _ => "see the PLC manual",
    }
}

/// Whether an end code can be blamed on the devices asked for, so splitting a
/// merged request may isolate the tags at fault.
pub fn blames_addresses(code: u16) -> bool {
    matches!(code, 0xC051..=0xC054 | 0xC056 | 0xC05B | 0xC05C | 0x4030..=0x4032)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_3e_request_and_response() {
        let frame = request(FrameType::E3, 9, 4, READ, 0, &[1, 2]);
        assert_eq!(
            frame,
            [
                0x50, 0x00, 0x00, 0xFF, 0xFF, 0x03, 0x00, 0x08, 0x00, 0x04, 0x00, 0x01, 0x04, 0x00,
                0x00, 1, 2
            ]
        );
        let answer = [
            0xD0, 0x00, 0x00, 0xFF, 0xFF, 0x03, 0x00, 0x04, 0x00, 0x00, 0x00, 0x34, 0x12,
        ];
        assert_eq!(total_len(FrameType::E3, &answer[..9]), Ok(13));
        assert_eq!(
            response(FrameType::E3, 0, &answer),
            Ok(Response {
                end_code: 0,
                data: &[0x34, 0x12]
            })
        );
        assert!(response(FrameType::E3, 0, &answer[..12]).is_err());
        let mut bad_route = answer;
        bad_route[3] = 0x01;
        assert!(response(FrameType::E3, 0, &bad_route).is_err());
        assert!(total_len(FrameType::E3, &[0xD4, 0, 0, 0xFF, 0xFF, 3, 0, 2, 0]).is_err());
        assert!(total_len(FrameType::E3, &[0xD0, 0, 0, 0xFF, 0xFF, 3, 0, 1, 0]).is_err());
        assert!(total_len(FrameType::E3, &[0xD0, 0, 0, 0xFF, 0xFF, 3, 0, 0, 0x10]).is_err());
        assert!(total_len(FrameType::E3, &[0xD0, 0]).is_err());
    }

    #[test]
    fn a_4e_request_and_response() {
        let frame = request(FrameType::E4, 0x1234, 10, WRITE, 1, &[]);
        assert_eq!(
            frame,
            [
                0x54, 0x00, 0x34, 0x12, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0x03, 0x00, 0x06, 0x00, 0x0A,
                0x00, 0x01, 0x14, 0x01, 0x00
            ]
        );
        let answer = [
            0xD4, 0x00, 0x34, 0x12, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0x03, 0x00, 0x02, 0x00, 0x5C,
            0xC0,
        ];
        assert_eq!(total_len(FrameType::E4, &answer[..13]), Ok(15));
        assert_eq!(
            response(FrameType::E4, 0x1234, &answer).map(|r| r.end_code),
            Ok(0xC05C)
        );
        assert!(response(FrameType::E4, 0x1235, &answer).is_err());
    }

    /// The reference manual's example of a batch read of D100..D102 in
    /// word units (monitoring timer 10) and its answer.
    #[test]
    fn a_1e_read_of_three_words_and_its_answer() {
        let frame = request_1e(command_1e(false, false), 10, 100, 0x4420, 3, &[]);
        assert_eq!(
            frame,
            [
                0x01, 0xFF, 0x0A, 0x00, 0x64, 0x00, 0x00, 0x00, 0x20, 0x44, 0x03, 0x00
            ]
        );
        let expect = Expect1E::to(0x01, 6);
        let answer = [0x81, 0x00, 0x34, 0x12, 0x02, 0x00, 0xEF, 0x1D];
        assert_eq!(total_len_1e(&answer[..2], expect), Ok(8));
        assert_eq!(
            response_1e(&answer, expect),
            Ok(Response {
                end_code: 0,
                data: &answer[2..]
            })
        );
        assert!(response_1e(&answer[..7], expect).is_err(), "short");
        assert!(total_len_1e(&[0x80, 0x00], expect).is_err(), "a bit answer");
        assert!(total_len_1e(&[0x81], expect).is_err());
    }

    #[test]
    fn a_1e_error_and_a_write_of_bits() {
        let expect = Expect1E::to(0x01, 6);
        // A completion code ends the answer; 5B brings an abnormal code.
        assert_eq!(total_len_1e(&[0x81, 0x56], expect), Ok(2));
        let refused = response_1e(&[0x81, 0x56], expect).expect("an answer");
        assert_eq!((refused.end_code, refused.data), (0x56, &[][..]));
        assert!(blames_addresses_1e(0x56));
        assert_eq!(total_len_1e(&[0x81, 0x5B], expect), Ok(3));
        let abnormal = response_1e(&[0x81, 0x5B, 0x10], expect).expect("an answer");
        assert_eq!(abnormal.end_code, 0x5B10);
        assert!(!blames_addresses_1e(0x5B10));
        assert!(end_code_1e(0x5B10, "D100").contains("abnormal code 0x10"));
        // M100..M103 set to 1 0 1 1: two points a byte, the first in the high nibble.
        let frame = request_1e(command_1e(true, true), 4, 100, 0x4D20, 4, &[0x10, 0x11]);
        assert_eq!(
            frame,
            [
                0x02, 0xFF, 0x04, 0x00, 0x64, 0x00, 0x00, 0x00, 0x20, 0x4D, 0x04, 0x00, 0x10, 0x11
            ]
        );
        let expect = Expect1E::to(0x02, 0);
        assert_eq!(
            response_1e(&[0x82, 0x00], expect).map(|r| r.end_code),
            Ok(0)
        );
        // 256 points are written as 0.
        assert_eq!(request_1e(0x01, 4, 0, 0x4420, 256, &[])[10], 0);
    }

    #[test]
    fn device_specifications() {
        let mut narrow = Vec::new();
        push_device(&mut narrow, 0x12_3456, 0xA8, false);
        assert_eq!(narrow, [0x56, 0x34, 0x12, 0xA8]);
        let mut wide = Vec::new();
        push_device(&mut wide, 0x1234_5678, 0xA8, true);
        assert_eq!(wide, [0x78, 0x56, 0x34, 0x12, 0xA8, 0x00]);
        assert_eq!(
            [
                subcommand(false, false),
                subcommand(false, true),
                subcommand(true, false),
                subcommand(true, true)
            ],
            [0, 1, 2, 3]
        );
    }
}
