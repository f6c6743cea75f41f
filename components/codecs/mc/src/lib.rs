//! Codec `mc`: Mitsubishi MELSEC communication protocol (MC protocol), binary
//! 3E and 4E frames, for the engine.
//!
//! Plans batch reads (command 0x0401) per device: word devices are read in word
//! units, bit devices in bit units, nearby device numbers (gap of at most 16 points)
//! are merged and requests split at 960 words / 3584 bits. Writes use batch write
//! (0x1401) of one tag. There is no handshake. A non-zero end code is a device
//! error carrying the end code (message `end code 0xC05C (...)`); when a merged
//! read fails with an end code that can be blamed on the devices asked for, it is
//! split in two and retried, and the split is kept for later rounds, so only the
//! tags at fault end BAD.
//!
//! # Settings
//! - `series`: `QnA`, `Q_L` (default) or `IQ_R`. QnA and Q/L use 3-byte device
//!   numbers and 1-byte device codes (subcommands 0x0000 words / 0x0001 bits); iQ-R
//!   uses 4-byte numbers and 2-byte codes (0x0002 / 0x0003). `A` is refused: A-series
//!   Ethernet modules only speak the 1E frame.
//! - `frameType`: `FRAME_3E` (default) or `FRAME_4E` (adds a serial number that the
//!   response must echo). `FRAME_1E` is refused: not supported.
//! - `monitorTimer`: 1-65535 (units of 250 ms, default 4), sent in every request.
//! - `byteOrder`: accepted and ignored: the engine applies byte order per tag.
//!
//! # Devices and addresses
//! Bit devices: `X` `Y` `B` `SB` (hexadecimal numbers), `M` `L` `F` `V` `SM` `TS`
//! `TC` `CS` `CC` (decimal). Word devices: `W` `SW` (hexadecimal), `D` `R` `ZR`
//! `TN` `CN` `SD` `Z` (decimal; `ZR` is decimal as in GX Works). `T100` and `C5`
//! mean the current values `TN100` and `CN5`. A word address may name one bit,
//! `D100.3` or `D100.F`, for a BOOL tag. Device numbers stop at 0xFFFFFF unless
//! the series is IQ_R. X/Y are hexadecimal as on Q/L/iQ-R CPUs (not octal as on
//! FX/iQ-F).
//!
//! # Data types and word order
//! BOOL on bit devices (read in bit units, four bits per byte, high nibble first)
//! or on a bit of a word (`D100.3`). On word devices: INT16/UINT16/BCD16 (1 word),
//! INT32/UINT32/FLOAT32/BCD32 (2 words), INT64/UINT64/FLOAT64 (4 words), BOOL (1
//! word, non-zero = true) and STRING (`length` characters, two per word, low byte
//! first). MC sends each word low byte first and multi-word values low word first,
//! so raw numeric samples are normalised to big-endian, high word first (all bytes
//! of the value reversed); strings keep the wire order (first character first). The
//! pipeline then applies the tag's `byteOrder` on top of this: ABCD (the default)
//! means "as the PLC stores it", CDAB swaps the words of a value a PLC program laid
//! out high word first, and so on. Writes do the inverse.
//!
//! # Limits
//! 960 words per word read, 3584 bits per bit read (the 3E limit is 7168; half of it
//! stays within what every module accepts), responses of at most 2048 data bytes.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

mod address;
mod frame;
mod plan;

use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use frame::FrameType;
use plan::{LIMITS, Request, TagRange, Unit};
use sluice_guest::numeric::{DataType, Number, encode, reorder_for};
use sluice_guest::settings::{SettingValue, unknown_key, wrong_type};

#[cfg(not(test))]
sluice_guest::guest_runtime!();

wit_bindgen::generate!({ world: "codec", path: "../../../wit" });

use exports::sluice::dataflow::protocol::{
    DeviceError, FrameError, Guest, GuestSession, PlannedRead, Session,
};
use sluice::dataflow::types::{Batch, ConfigError, Quality, Sample, Setting, Span, TagSpec, Value};

struct Component;

impl Guest for Component {
    type Session = McSession;
}

/// Requests kept before old ones are dropped at the start of a plan.
const MAX_REQUESTS: usize = 1024;

const SETTINGS: &[&str] = &["series", "frameType", "monitorTimer", "byteOrder"];

/// Channel settings.
#[derive(Debug, Clone, Copy)]
struct Config {
    frame: FrameType,
    /// iQ-R: 4-byte device numbers and 2-byte device codes.
    wide: bool,
    timer: u16,
}

struct Tag {
    range: TagRange,
    /// Bit of a word read as a BOOL.
    bit: Option<u8>,
    data_type: DataType,
    spec: TagSpec,
}

struct State {
    requests: Vec<Request>,
    /// Plans by due set, valid until a split changes the boundaries.
    plans: Vec<(Vec<u32>, Vec<PlannedRead>)>,
    boundaries: BTreeSet<u32>,
    next_serial: u16,
    /// Request and serial number of the read in flight.
    pending_read: Option<(u32, u16)>,
    /// Serial number of the write in flight.
    pending_write: Option<u16>,
}

struct McSession {
    config: Config,
    tags: Vec<Tag>,
    state: RefCell<State>,
}

fn malformed(message: String) -> FrameError {
    FrameError::Malformed(message)
}

fn device_error(code: u16, what: &str, retry: Vec<PlannedRead>) -> FrameError {
    FrameError::Device(DeviceError {
        code: u32::from(code),
        message: format!(
            "end code 0x{code:04X} ({}) for {what}",
            frame::end_code_name(code)
        ),
        retry,
    })
}

fn read_settings(settings: &[Setting], errors: &mut Vec<ConfigError>) -> Config {
    let mut config = Config {
        frame: FrameType::E3,
        wide: false,
        timer: 4,
    };
    for setting in settings {
        let value = setting_value(setting);
        let key = setting.key.as_str();
        let mut fail = |message: String| errors.push(config_error(None, key, message));
        match (key, &value) {
            ("series", SettingValue::Text(name)) => match *name {
                "QnA" | "Q_L" => config.wide = false,
                "IQ_R" => config.wide = true,
                "A" => fail(
                    "series A is not supported: A-series Ethernet modules speak only the 1E \
                     frame; use QnA, Q_L or IQ_R"
                        .into(),
                ),
                other => fail(format!("unknown series `{other}`: use QnA, Q_L or IQ_R")),
            },
            ("frameType", SettingValue::Text(name)) => match *name {
                "FRAME_3E" => config.frame = FrameType::E3,
                "FRAME_4E" => config.frame = FrameType::E4,
                "FRAME_1E" => fail(
                    "frameType FRAME_1E is not supported by this codec: use FRAME_3E or FRAME_4E"
                        .into(),
                ),
                other => fail(format!(
                    "unknown frameType `{other}`: use FRAME_3E or FRAME_4E"
                )),
            },
            ("monitorTimer", _) => match value.as_u32() {
                Some(v @ 1..=65535) => config.timer = v as u16,
                _ => fail(wrong_type(
                    key,
                    "an integer from 1 to 65535 (units of 250 ms)",
                    &value,
                )),
            },
            ("series" | "frameType", _) => fail(wrong_type(key, "a name", &value)),
            ("byteOrder", _) => {}
            (other, _) => fail(unknown_key(other, SETTINGS)),
        }
    }
    config
}

/// Words a value of `data_type` occupies on a word device (counted without
/// overflow for any string length).
fn words_of(data_type: DataType) -> u64 {
    match data_type {
        DataType::String(chars) => u64::from(chars).div_ceil(2),
        other => (other.byte_len() / 2) as u64,
    }
}

fn read_tag(index: usize, spec: TagSpec, wide: bool) -> Result<Tag, ConfigError> {
    let err = |key: &str, message: String| config_error(Some(index as u32), key, message);
    let address = address::parse(&spec.address, wide).map_err(|m| err("address", m))?;
    let data_type = tag_data_type(&spec);
    let (unit, count) = if address.device.bits {
        if data_type != DataType::Bool {
            return Err(err(
                "dataType",
                format!(
                    "{} is a bit device: the dataType must be BOOL",
                    address.device.name
                ),
            ));
        }
        (Unit::Bit, 1)
    } else if address.bit.is_some() {
        if data_type != DataType::Bool {
            return Err(err(
                "dataType",
                "a bit of a word (`.N`) must have dataType BOOL".into(),
            ));
        }
        (Unit::Word, 1)
    } else {
        (Unit::Word, words_of(data_type))
    };
    if count == 0 {
        return Err(err(
            "length",
            "a STRING needs a length of at least 1".into(),
        ));
    }
    if count > u64::from(LIMITS.max_words) {
        return Err(err(
            "length",
            format!(
                "the value needs {count} words, more than one request may read ({})",
                LIMITS.max_words
            ),
        ));
    }
    let last = if wide {
        u64::from(u32::MAX)
    } else {
        u64::from(address::MAX_NARROW)
    };
    if u64::from(address.number) + count - 1 > last {
        return Err(err(
            "address",
            format!("the value runs past device number {last}"),
        ));
    }
    Ok(Tag {
        range: TagRange {
            device: address.device,
            unit,
            start: address.number,
            count: count as u32,
        },
        bit: address.bit,
        data_type,
        spec,
    })
}

impl McSession {
    /// Checks settings and tags; every mistake is reported.
    fn create(settings: &[Setting], tags: Vec<TagSpec>) -> Result<McSession, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let config = read_settings(settings, &mut errors);
        let mut parsed = Vec::with_capacity(tags.len());
        for (index, spec) in tags.into_iter().enumerate() {
            match read_tag(index, spec, config.wide) {
                Ok(tag) => parsed.push(tag),
                Err(error) => errors.push(error),
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(McSession {
            config,
            tags: parsed,
            state: RefCell::new(State {
                requests: Vec::new(),
                plans: Vec::new(),
                boundaries: BTreeSet::new(),
                next_serial: 0,
                pending_read: None,
                pending_write: None,
            }),
        })
    }

    fn next_serial(state: &mut State) -> u16 {
        state.next_serial = state.next_serial.wrapping_add(1);
        state.next_serial
    }

    fn planned(state: &mut State, request: Request) -> PlannedRead {
        let id = state.requests.len() as u32;
        let tags = request.tags.clone();
        state.requests.push(request);
        PlannedRead { id, tags }
    }

    fn ranges(&self) -> Vec<TagRange> {
        self.tags.iter().map(|t| t.range).collect()
    }

    /// A request frame for `command` on `device` from `start` for `points`.
    fn frame(
        &self,
        state: &mut State,
        command: u16,
        range: (&address::Device, Unit, u32, u32),
        data: &[u8],
    ) -> (Vec<u8>, u16) {
        let (device, unit, start, points) = range;
        let serial = Self::next_serial(state);
        let mut body = Vec::with_capacity(8 + data.len());
        frame::push_device(&mut body, start, device.code, self.config.wide);
        body.extend_from_slice(&(points as u16).to_le_bytes());
        body.extend_from_slice(data);
        let sub = frame::subcommand(self.config.wide, unit == Unit::Bit);
        let bytes = frame::request(
            self.config.frame,
            serial,
            self.config.timer,
            command,
            sub,
            &body,
        );
        (bytes, serial)
    }

    /// Samples for the tags of `request` from its response data.
    fn samples(&self, request: &Request, data: &[u8], ts_ms: i64) -> Batch {
        let mut bytes = Vec::new();
        let mut samples = Vec::with_capacity(request.tags.len());
        for &index in &request.tags {
            let Some(tag) = self.tags.get(index as usize) else {
                continue;
            };
            let at = tag.range.start.wrapping_sub(request.start) as usize;
            let value = match (request.unit, tag.bit) {
                (Unit::Bit, _) => data.get(at / 2).map(|byte| {
                    let nibble = if at.is_multiple_of(2) {
                        byte >> 4
                    } else {
                        byte & 0x0F
                    };
                    Value::Boolean(nibble != 0)
                }),
                (Unit::Word, Some(bit)) => {
                    word_at(data, at).map(|word| Value::Boolean(word >> bit & 1 == 1))
                }
                (Unit::Word, None) => {
                    let len = tag.range.count as usize * 2;
                    let first = at.saturating_mul(2);
                    data.get(first..first.saturating_add(len)).map(|raw| {
                        let start = bytes.len();
                        bytes.extend_from_slice(raw);
                        if !matches!(tag.data_type, DataType::String(_))
                            && let Some(value) = bytes.get_mut(start..)
                        {
                            value.reverse();
                        }
                        Value::Raw(Span {
                            start: start as u32,
                            len: len as u32,
                        })
                    })
                }
            };
            samples.push(Sample {
                tag: index,
                quality: if value.is_some() {
                    Quality::Good
                } else {
                    Quality::Bad
                },
                value: value.unwrap_or(Value::None),
                ts_ms,
            });
        }
        Batch { samples, bytes }
    }

    /// Unit, points and wire data that write `value` to `tag`.
    fn write_data(&self, tag: &Tag, value: &Value) -> Result<(Unit, u32, Vec<u8>), String> {
        let number = number_from_value(value).ok_or("no value to write")?;
        match (tag.range.unit, tag.bit) {
            (Unit::Bit, _) => {
                let on = match number {
                    Number::Bool(b) => b,
                    Number::Int(0) | Number::Uint(0) => false,
                    Number::Int(1) | Number::Uint(1) => true,
                    _ => return Err("a bit device takes true/false or 0/1".into()),
                };
                Ok((Unit::Bit, 1, alloc::vec![if on { 0x10 } else { 0x00 }]))
            }
            (Unit::Word, Some(_)) => Err(
                "writing one bit of a word device is not supported: write the whole word".into(),
            ),
            (Unit::Word, None) => {
                let mut bytes = encode(tag.data_type, &number)
                    .map_err(|e| format!("{e:?}: value does not fit {:?}", tag.data_type))?;
                // Big-endian -> the normalised read form -> wire order.
                reorder_for(&mut bytes, tag.data_type, tag_byte_order(&tag.spec));
                if !matches!(tag.data_type, DataType::String(_)) {
                    bytes.reverse();
                }
                Ok((Unit::Word, (bytes.len() / 2) as u32, bytes))
            }
        }
    }
}

/// Word `at` of response data, sent low byte first.
fn word_at(data: &[u8], at: usize) -> Option<u16> {
    let pair = data.get(at.checked_mul(2)?..at.checked_mul(2)?.checked_add(2)?)?;
    Some(u16::from_le_bytes(<[u8; 2]>::try_from(pair).ok()?))
}

impl GuestSession for McSession {
    fn open(settings: Vec<Setting>, tags: Vec<TagSpec>) -> Result<Session, Vec<ConfigError>> {
        McSession::create(&settings, tags).map(Session::new)
    }

    fn header_len(&self) -> u32 {
        self.config.frame.head_len() as u32
    }

    fn frame_length(&self, head: Vec<u8>) -> Result<u32, FrameError> {
        frame::total_len(self.config.frame, &head).map_err(malformed)
    }

    fn handshake(&self, _step: u32) -> Option<Vec<u8>> {
        None
    }

    fn check_handshake(&self, step: u32, _frame: Vec<u8>) -> Result<(), FrameError> {
        Err(malformed(format!(
            "MC protocol has no handshake step {step}"
        )))
    }

    fn plan(&self, due: Vec<u32>) -> Vec<PlannedRead> {
        let mut state = self.state.borrow_mut();
        if let Some((_, reads)) = state.plans.iter().find(|(d, _)| *d == due) {
            return reads.clone();
        }
        if state.requests.len() > MAX_REQUESTS {
            // Safe: a plan call starts a round, so no earlier request id is in flight.
            state.requests.clear();
            state.plans.clear();
        }
        let requests = plan::plan(&self.ranges(), &due, LIMITS, &state.boundaries);
        let reads: Vec<PlannedRead> = requests
            .into_iter()
            .map(|r| Self::planned(&mut state, r))
            .collect();
        state.plans.push((due, reads.clone()));
        reads
    }

    fn encode_read(&self, request: u32) -> Result<Vec<u8>, FrameError> {
        let mut state = self.state.borrow_mut();
        let (device, unit, start, count) = state
            .requests
            .get(request as usize)
            .map(|r| (r.device, r.unit, r.start, r.count))
            .ok_or_else(|| malformed(format!("unknown request {request}")))?;
        let (bytes, serial) =
            self.frame(&mut state, frame::READ, (&device, unit, start, count), &[]);
        state.pending_read = Some((request, serial));
        Ok(bytes)
    }

    fn parse_read(&self, request: u32, frame: Vec<u8>, ts_ms: i64) -> Result<Batch, FrameError> {
        let mut state = self.state.borrow_mut();
        let serial = sluice_guest::exchange::answered_read(state.pending_read.take(), request)
            .map_err(malformed)?;
        let failed = state
            .requests
            .get(request as usize)
            .cloned()
            .ok_or_else(|| malformed(format!("unknown request {request}")))?;
        let response = frame::response(self.config.frame, serial, &frame).map_err(malformed)?;
        let what = format!(
            "{name}{start}..{name}{end} ({count} {unit})",
            name = failed.device.name,
            start = DeviceNumber(failed.device, failed.start),
            end = DeviceNumber(
                failed.device,
                failed.start.saturating_add(failed.count.saturating_sub(1))
            ),
            count = failed.count,
            unit = if failed.unit == Unit::Bit {
                "bits"
            } else {
                "words"
            },
        );
        if response.end_code != 0 {
            let mut retry = Vec::new();
            if frame::blames_addresses(response.end_code)
                && let Some((first, second, boundary)) = plan::split(&self.ranges(), &failed)
            {
                state.boundaries.insert(boundary);
                state.plans.clear();
                retry.push(Self::planned(&mut state, first));
                retry.push(Self::planned(&mut state, second));
            }
            return Err(device_error(response.end_code, &what, retry));
        }
        let expected = match failed.unit {
            Unit::Word => failed.count as usize * 2,
            Unit::Bit => (failed.count as usize).div_ceil(2),
        };
        if response.data.len() != expected {
            return Err(malformed(format!(
                "{} data bytes, expected {expected} for {what}",
                response.data.len()
            )));
        }
        Ok(self.samples(&failed, response.data, ts_ms))
    }

    fn encode_write(&self, tag: u32, value: Value) -> Result<Vec<u8>, FrameError> {
        let target = self
            .tags
            .get(tag as usize)
            .ok_or_else(|| malformed(format!("unknown tag {tag}")))?;
        let (unit, points, data) = self.write_data(target, &value).map_err(|message| {
            FrameError::Device(DeviceError {
                code: 0,
                message: format!("tag `{}`: {message}", target.spec.key),
                retry: Vec::new(),
            })
        })?;
        let mut state = self.state.borrow_mut();
        let range = (&target.range.device, unit, target.range.start, points);
        let (bytes, serial) = self.frame(&mut state, frame::WRITE, range, &data);
        state.pending_write = Some(serial);
        Ok(bytes)
    }

    fn check_write(&self, frame: Vec<u8>) -> Result<(), FrameError> {
        let Some(serial) = self.state.borrow_mut().pending_write.take() else {
            return Err(malformed(
                "a write response arrived with no write in flight".into(),
            ));
        };
        let response = frame::response(self.config.frame, serial, &frame).map_err(malformed)?;
        if response.end_code != 0 {
            return Err(device_error(response.end_code, "the write", Vec::new()));
        }
        if !response.data.is_empty() {
            return Err(malformed(format!(
                "write response carries {} data bytes, expected none",
                response.data.len()
            )));
        }
        Ok(())
    }

    fn reset(&self) {
        let mut state = self.state.borrow_mut();
        state.pending_read = None;
        state.pending_write = None;
    }
}

/// A device number in the device's radix, for messages.
struct DeviceNumber(address::Device, u32);

impl core::fmt::Display for DeviceNumber {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.0.hex {
            write!(f, "{:X}", self.1)
        } else {
            write!(f, "{}", self.1)
        }
    }
}

sluice_guest::wit_conversions!();

export!(Component);

#[cfg(test)]
mod tests;
