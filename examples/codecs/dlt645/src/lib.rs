//! A DL/T 645-2007 codec: the electricity-meter protocol of most RS-485 lines in
//! China, over a serial server's TCP port or a serial line shared by meters.
//!
//! A frame is `68 A0..A5 68 C L DATA CS 16`: the meter's 12-digit address as six
//! BCD bytes, lowest first; a control code (`11` to read, `91` a normal answer,
//! `D1` an abnormal one); `L` data bytes, each sent plus `33`; a checksum (the sum
//! of every byte from the first `68`, modulo 256); `16`. Meters may send up to
//! four `FE` wake-up bytes first, which `frame-length` skips, as it skips any
//! garbage before a `68` on a line.
//!
//! A channel names it `protocol: dlt645` (`fn protocols` declares it). Channel
//! settings: `meterAddress`, the 12 digits printed on the meter; `leaseSeconds`,
//! how long the meter may stay silent before it is offline (60 when left out,
//! reported to the engine as the device's lease). A tag's
//! `address` is a data identifier of 8 hex digits (`02010100`: phase A
//! voltage); its `dataType` is FLOAT64, the value scaled by the standard's
//! decimal format for that identifier (see `FORMATS`). Writes are refused.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;

use sluice::dataflow::types::{Batch, ConfigError, DataType, Setting, TagSpec, Value};

const START: u8 = 0x68;
const END: u8 = 0x16;
const WAKE_UP: u8 = 0xFE;
/// Every byte of the data field is sent plus this.
const OFFSET: u8 = 0x33;
/// `68 A0..A5 68 C L`: what tells a frame's length.
const HEAD_LEN: usize = 10;
const READ: u8 = 0x11;
/// A normal answer to a read, and one whose data continues in another frame.
const ANSWERS: [u8; 2] = [0x91, 0xB1];
const ABNORMAL: u8 = 0xD1;

/// The data formats of the identifiers this codec reads: the identifier's
/// mask and value, its data bytes, its decimals, and whether the top bit of its
/// highest byte is a sign.
const FORMATS: &[(u32, u32, usize, i32, bool)] = &[
    // Energy (kWh): XXXXXX.XX.
    (0xFF00_0000, 0x0000_0000, 4, 2, false),
    // Voltage (V): XXX.X.
    (0xFFFF_0000, 0x0201_0000, 2, 1, false),
    // Current (A): XXX.XXX, signed.
    (0xFFFF_0000, 0x0202_0000, 3, 3, true),
    // Active, reactive, apparent power (kW, kvar, kVA): XX.XXXX, signed.
    (0xFFFF_0000, 0x0203_0000, 3, 4, true),
    (0xFFFF_0000, 0x0204_0000, 3, 4, true),
    (0xFFFF_0000, 0x0205_0000, 3, 4, true),
    // Power factor: X.XXX, signed.
    (0xFFFF_0000, 0x0206_0000, 2, 3, true),
    // Grid frequency (Hz): XX.XX.
    (0xFFFF_FFFF, 0x0280_0002, 2, 2, false),
];

/// How one tag reads: its identifier and format.
#[derive(Clone, Copy)]
struct Item {
    id: u32,
    len: usize,
    decimals: i32,
    signed: bool,
}

/// A session: one meter's tags.
pub struct Meter {
    /// The address as it goes on the wire, lowest byte first.
    address: [u8; 6],
    items: Vec<Item>,
    /// The tag whose read was sent last.
    sent: Cell<Option<u32>>,
    /// How long the meter may stay silent before it is offline.
    lease_seconds: u32,
}

/// The six BCD bytes of a 12-digit meter address, lowest first.
fn wire_address(digits: &str) -> Option<[u8; 6]> {
    let bytes = digits.as_bytes();
    if bytes.len() != 12 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut address = [0u8; 6];
    for (i, pair) in bytes.chunks(2).rev().enumerate() {
        address[i] = ((pair[0] - b'0') << 4) | (pair[1] - b'0');
    }
    Some(address)
}

/// The format of data identifier `id`, if this codec knows it.
fn item(id: u32) -> Option<Item> {
    FORMATS
        .iter()
        .find(|(mask, value, ..)| id & mask == *value)
        .map(|&(_, _, len, decimals, signed)| Item {
            id,
            len,
            decimals,
            signed,
        })
}

impl Meter {
    /// Checks the channel's settings and tags (every problem, each at its key).
    fn create(settings: &[Setting], tags: Vec<TagSpec>) -> Result<Self, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let mut address = None;
        let mut lease = DEFAULT_LEASE_SECONDS;
        each_setting(settings, &mut errors, |key, value| match (key, value) {
            ("leaseSeconds", value) => match value.as_u32() {
                Some(seconds @ 1..) => {
                    lease = seconds;
                    Ok(())
                }
                _ => Err(format!("a lease is 1 s or more, not {}", value.kind())),
            },
            ("meterAddress", sluice_guest::settings::SettingValue::Text(text)) => {
                address = wire_address(text);
                address
                    .map(|_| ())
                    .ok_or_else(|| format!("`{text}` is not a meter address: 12 digits"))
            }
            ("meterAddress", other) => Err(format!(
                "a meter address is 12 digits in quotes, not {}",
                other.kind()
            )),
            (other, _) => Err(format!(
                "unknown setting `{other}`: DL/T 645 has `meterAddress` and `leaseSeconds`"
            )),
        });
        if address.is_none() && !settings.iter().any(|s| s.key == "meterAddress") {
            errors.push(ConfigError {
                tag: None,
                key: "meterAddress".into(),
                message: "missing: the 12 digits printed on the meter".into(),
            });
        }
        let mut items = Vec::new();
        for (index, tag) in tags.iter().enumerate() {
            let problem = |key: &str, message: String| ConfigError {
                tag: Some(index as u32),
                key: key.into(),
                message,
            };
            let id = (tag.address.len() == 8)
                .then(|| u32::from_str_radix(&tag.address, 16).ok())
                .flatten();
            match id.map(|id| (id, item(id))) {
                Some((_, Some(found))) => items.push(found),
                Some((id, None)) => errors.push(problem(
                    "address",
                    format!("data identifier {id:08X} has no format this codec knows"),
                )),
                None => errors.push(problem(
                    "address",
                    format!(
                        "`{}` is not a data identifier: 8 hex digits, e.g. '02010100'",
                        tag.address
                    ),
                )),
            }
            if tag.data_type != DataType::Float64 {
                errors.push(problem(
                    "dataType",
                    "DL/T 645 values are FLOAT64 (the codec applies the decimals)".into(),
                ));
            }
        }
        match address {
            Some(address) if errors.is_empty() => Ok(Meter {
                address,
                items,
                sent: Cell::new(None),
                lease_seconds: lease,
            }),
            _ => Err(errors),
        }
    }

    /// The frame of control code `control` carrying `data` (offset added).
    fn frame(&self, control: u8, data: &[u8]) -> Vec<u8> {
        let mut frame = vec![WAKE_UP; 4];
        frame.push(START);
        frame.extend_from_slice(&self.address);
        frame.extend_from_slice(&[START, control, data.len() as u8]);
        frame.extend(data.iter().map(|b| b.wrapping_add(OFFSET)));
        let sum = checksum(&frame[4..]);
        frame.extend_from_slice(&[sum, END]);
        frame
    }
}

fn checksum(bytes: &[u8]) -> u8 {
    bytes.iter().fold(0u8, |sum, b| sum.wrapping_add(*b))
}

/// `bytes` (lowest first) as BCD digits, scaled by `decimals`; the top bit of
/// the highest byte a sign when `signed`.
fn bcd_value(bytes: &[u8], decimals: i32, signed: bool) -> Result<f64, String> {
    let mut value = 0.0;
    let mut negative = false;
    for (i, byte) in bytes.iter().rev().enumerate() {
        let mut byte = *byte;
        if i == 0 && signed {
            negative = byte & 0x80 != 0;
            byte &= 0x7F;
        }
        let (high, low) = (byte >> 4, byte & 0x0F);
        if high > 9 || low > 9 {
            return Err(format!("{byte:02X} is not BCD"));
        }
        value = value * 100.0 + f64::from(high * 10 + low);
    }
    let scale = (0..decimals).fold(1.0, |scale, _| scale * 10.0);
    let value = value / scale;
    Ok(if negative { -value } else { value })
}

/// What the error byte of an abnormal answer says, bit by bit.
fn error_words(byte: u8) -> String {
    const BITS: [&str; 7] = [
        "other error",
        "no data requested",
        "password wrong or not authorised",
        "baud rate cannot be changed",
        "too many annual time zones",
        "too many daily periods",
        "too many tariffs",
    ];
    let words: Vec<&str> = BITS
        .iter()
        .enumerate()
        .filter(|(bit, _)| byte & (1 << bit) != 0)
        .map(|(_, word)| *word)
        .collect();
    if words.is_empty() {
        String::from("no reason given")
    } else {
        words.join(", ")
    }
}

impl GuestSession for Meter {
    fn open(settings: Vec<Setting>, tags: Vec<TagSpec>) -> Result<Session, Vec<ConfigError>> {
        Meter::create(&settings, tags).map(Session::new)
    }

    fn header_len(&self) -> u32 {
        HEAD_LEN as u32
    }

    fn frame_length(&self, head: Vec<u8>) -> Result<FrameSize, FrameError> {
        // Wake-up bytes, or garbage on a line: everything before the next `68`.
        let before = head.iter().take_while(|b| **b != START).count();
        if before > 0 {
            return Ok(FrameSize::Skip(before as u32));
        }
        match (head.get(7), head.get(9)) {
            (Some(&START), Some(&len)) => {
                Ok(FrameSize::Length((HEAD_LEN + usize::from(len) + 2) as u32))
            }
            // A `68` that starts no frame: look for the next one.
            (Some(_), Some(_)) => Ok(FrameSize::Skip(1)),
            _ => Ok(FrameSize::Need(HEAD_LEN as u32)),
        }
    }

    fn lease_seconds(&self) -> Option<u32> {
        Some(self.lease_seconds)
    }

    fn handshake(&self, _step: u32) -> Option<Vec<u8>> {
        None
    }

    fn check_handshake(&self, step: u32, _frame: Vec<u8>) -> Result<(), FrameError> {
        Err(malformed(format!("no handshake step {step} was sent")))
    }

    /// One read a due tag: a frame carries one data identifier.
    fn plan(&self, due: Vec<u32>) -> Vec<PlannedRead> {
        due.into_iter()
            .filter(|tag| (*tag as usize) < self.items.len())
            .map(|tag| PlannedRead {
                id: tag,
                tags: vec![tag],
            })
            .collect()
    }

    fn encode_read(&self, request: u32) -> Result<Vec<u8>, FrameError> {
        let item = self
            .items
            .get(request as usize)
            .ok_or_else(|| malformed(format!("no request {request} was planned")))?;
        self.sent.set(Some(request));
        Ok(self.frame(READ, &item.id.to_le_bytes()))
    }

    fn parse_read(&self, request: u32, frame: Vec<u8>, ts_ms: i64) -> Result<Batch, FrameError> {
        if self.sent.take() != Some(request) {
            return Err(malformed(format!(
                "an answer to read {request}, which was not sent"
            )));
        }
        let item = *self
            .items
            .get(request as usize)
            .ok_or_else(|| malformed(format!("no request {request} was planned")))?;
        let len = frame.len();
        if len < HEAD_LEN + 2 || frame[len - 1] != END {
            return Err(malformed("an answer without its end byte 16".into()));
        }
        if checksum(&frame[..len - 2]) != frame[len - 2] {
            return Err(malformed(format!(
                "checksum {:02X}, the bytes sum to {:02X}",
                frame[len - 2],
                checksum(&frame[..len - 2])
            )));
        }
        if frame[1..7] != self.address {
            return Err(malformed(format!(
                "an answer from meter {:02X?}, not this one",
                &frame[1..7]
            )));
        }
        let data: Vec<u8> = frame[HEAD_LEN..len - 2]
            .iter()
            .map(|b| b.wrapping_sub(OFFSET))
            .collect();
        match frame[8] {
            ABNORMAL => {
                let byte = data.first().copied().unwrap_or(0);
                Err(FrameError::Device(DeviceError {
                    code: u32::from(byte),
                    message: format!(
                        "the meter refused {:08X}: error byte {byte:02X} ({})",
                        item.id,
                        error_words(byte)
                    ),
                    retry: Vec::new(),
                }))
            }
            control if ANSWERS.contains(&control) => {
                let (id, value) = data
                    .split_at_checked(4)
                    .ok_or_else(|| malformed(format!("an answer of {} data bytes", data.len())))?;
                let id = u32::from_le_bytes([id[0], id[1], id[2], id[3]]);
                if id != item.id || value.len() != item.len {
                    return Err(malformed(format!(
                        "an answer for {id:08X} with {} bytes, asked {:08X} ({} bytes)",
                        value.len(),
                        item.id,
                        item.len
                    )));
                }
                let value = bcd_value(value, item.decimals, item.signed).map_err(malformed)?;
                Ok(batch_from_samples(
                    vec![sample(request, Some(Value::Float(value)), ts_ms)],
                    Vec::new(),
                ))
            }
            control => Err(malformed(format!(
                "control code {control:02X} answers no read"
            ))),
        }
    }

    fn encode_write(&self, _tag: u32, _value: Value) -> Result<Vec<u8>, FrameError> {
        Err(FrameError::Device(DeviceError {
            code: 0,
            message: "this codec does not write to meters".into(),
            retry: Vec::new(),
        }))
    }

    fn check_write(&self, _frame: Vec<u8>) -> Result<(), FrameError> {
        Err(malformed("no write was sent".into()))
    }

    fn reset(&self) {
        self.sent.set(None);
    }
}

sluice_guest::codec_component!(Meter, "wit");

/// A meter's lease when the channel sets none: a meter on a busy RS-485 line
/// answers one item at a time, so a round of many items takes seconds.
const DEFAULT_LEASE_SECONDS: u32 = 60;

/// `protocol: dlt645`, on a serial line shared by meters or through a serial
/// server's TCP port (which has no standard port).
fn protocols() -> Vec<ProtocolDeclaration> {
    vec![ProtocolDeclaration {
        name: "dlt645".into(),
        transports: vec![Transport::SerialLine, Transport::LineOverTcp],
        default_port: None,
        settings: vec![
            declare(
                "meterAddress",
                SettingType::Text,
                None,
                "the 12 digits printed on the meter, in quotes",
            ),
            declare(
                "leaseSeconds",
                integers(1, 86_400),
                int(i64::from(DEFAULT_LEASE_SECONDS)),
                "how long the meter may stay silent before it is offline",
            ),
        ],
        address_help: "a data identifier of 8 hex digits, e.g. `02010100` for phase A voltage"
            .into(),
    }]
}
