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
mod data;
mod frame;
mod plan;
#[cfg(test)]
mod tests;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use address::Device;
use frame::FrameType;
use plan::LIMITS;
use sluice_guest::numeric::DataType;
use sluice_guest::session::ranges::{self, Extent, RangeRequest};
use sluice_guest::session::{InFlight, Planned, Plans};
use sluice_guest::settings::{SettingValue, read_all, unknown_key, wrong_type};

sluice_guest::codec_component!(McSession);

use sluice::dataflow::types::{Batch, ConfigError, Setting, TagSpec, Value};

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
    /// Device points: words of a word device, bits of a bit device.
    extent: Extent<Device>,
    /// Bit of a word read as a BOOL.
    bit: Option<u8>,
    data_type: DataType,
    spec: TagSpec,
}

type Request = RangeRequest<Device>;

#[derive(Default)]
struct State {
    plans: Plans<Request>,
    /// Serial numbers (echoed by 4E answers) and the exchange in flight.
    exchange: InFlight,
}

struct McSession {
    config: Config,
    tags: Vec<Tag>,
    state: RefCell<State>,
}

fn end_code(code: u16, what: &str, retry: Vec<Planned>) -> FrameError {
    let name = frame::end_code_name(code);
    device_error(
        u32::from(code),
        format!("end code 0x{code:04X} ({name}) for {what}"),
        retry,
    )
}

fn read_settings(settings: &[Setting], errors: &mut Vec<ConfigError>) -> Config {
    let mut config = Config {
        frame: FrameType::E3,
        wide: false,
        timer: 4,
    };
    each_setting(settings, errors, |key, value| {
        match (key, value) {
            ("series", SettingValue::Text(name)) => match *name {
                "QnA" | "Q_L" => config.wide = false,
                "IQ_R" => config.wide = true,
                "A" => {
                    return Err(
                        "series A is not supported: A-series Ethernet modules speak only \
                                the 1E frame; use QnA, Q_L or IQ_R"
                            .into(),
                    );
                }
                other => return Err(format!("unknown series `{other}`: use QnA, Q_L or IQ_R")),
            },
            ("frameType", SettingValue::Text(name)) => match *name {
                "FRAME_3E" => config.frame = FrameType::E3,
                "FRAME_4E" => config.frame = FrameType::E4,
                "FRAME_1E" => {
                    return Err("frameType FRAME_1E is not supported by this codec: use \
                                FRAME_3E or FRAME_4E"
                        .into());
                }
                other => {
                    return Err(format!(
                        "unknown frameType `{other}`: use FRAME_3E or FRAME_4E"
                    ));
                }
            },
            ("monitorTimer", _) => match value.as_u32() {
                Some(v @ 1..=65535) => config.timer = v as u16,
                _ => {
                    let expected = "an integer from 1 to 65535 (units of 250 ms)";
                    return Err(wrong_type(key, expected, value));
                }
            },
            ("series" | "frameType", _) => return Err(wrong_type(key, "a name", value)),
            ("byteOrder", _) => {}
            (other, _) => return Err(unknown_key(other, SETTINGS)),
        }
        Ok(())
    });
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
    let count = if address.device.bits {
        if data_type != DataType::Bool {
            return Err(err(
                "dataType",
                format!(
                    "{} is a bit device: the dataType must be BOOL",
                    address.device.name
                ),
            ));
        }
        1
    } else if address.bit.is_some() {
        if data_type != DataType::Bool {
            return Err(err(
                "dataType",
                "a bit of a word (`.N`) must have dataType BOOL".into(),
            ));
        }
        1
    } else {
        words_of(data_type)
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
        extent: Extent {
            area: address.device,
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
        let tags = read_all(tags, errors, |index, spec| {
            read_tag(index, spec, config.wide)
        })?;
        Ok(McSession {
            config,
            tags,
            state: RefCell::new(State::default()),
        })
    }

    fn extent(&self, tag: u32) -> Option<Extent<Device>> {
        self.tags.get(tag as usize).map(|t| t.extent)
    }

    /// A request frame for `command` on `points` (words or bits by the device).
    fn frame(&self, serial: u16, command: u16, points: Extent<Device>, data: &[u8]) -> Vec<u8> {
        let mut body = Vec::with_capacity(8 + data.len());
        frame::push_device(&mut body, points.start, points.area.code, self.config.wide);
        body.extend_from_slice(&(points.count as u16).to_le_bytes());
        body.extend_from_slice(data);
        let sub = frame::subcommand(self.config.wide, points.area.bits);
        let config = self.config;
        frame::request(config.frame, serial, config.timer, command, sub, &body)
    }
}

/// The points of `request`, for messages: `D100..D111 (12 words)`.
fn describe(request: &Request) -> String {
    let device = request.area;
    let last = request
        .start
        .saturating_add(request.count.saturating_sub(1));
    let unit = if device.bits { "bits" } else { "words" };
    format!(
        "{name}{start}..{name}{end} ({count} {unit})",
        name = device.name,
        start = DeviceNumber(device, request.start),
        end = DeviceNumber(device, last),
        count = request.count,
    )
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

    sluice_guest::no_handshake!("MC protocol");

    fn plan(&self, due: Vec<u32>) -> Vec<PlannedRead> {
        let mut state = self.state.borrow_mut();
        planned_reads(state.plans.plan(due, |due, boundaries| {
            ranges::plan(due, |t| self.extent(t), LIMITS, boundaries)
        }))
    }

    fn encode_read(&self, request: u32) -> Result<Vec<u8>, FrameError> {
        let mut state = self.state.borrow_mut();
        let read = state.plans.request(request).map_err(malformed)?;
        let points = Extent {
            area: read.area,
            start: read.start,
            count: read.count,
        };
        let serial = state.exchange.send_read(request);
        Ok(self.frame(serial, frame::READ, points, &[]))
    }

    fn parse_read(&self, request: u32, frame: Vec<u8>, ts_ms: i64) -> Result<Batch, FrameError> {
        let mut state = self.state.borrow_mut();
        let serial = state.exchange.answered_read(request).map_err(malformed)?;
        let failed = state.plans.request(request).map_err(malformed)?.clone();
        let response = frame::response(self.config.frame, serial, &frame).map_err(malformed)?;
        let what = describe(&failed);
        if response.end_code != 0 {
            let retry = if frame::blames_addresses(response.end_code) {
                state
                    .plans
                    .split(&failed, ranges::single(|t| self.extent(t)))
            } else {
                Vec::new()
            };
            return Err(end_code(response.end_code, &what, retry));
        }
        let expected = if failed.area.bits {
            (failed.count as usize).div_ceil(2)
        } else {
            failed.count as usize * 2
        };
        if response.data.len() != expected {
            return Err(malformed(format!(
                "{} data bytes, expected {expected} for {what}",
                response.data.len()
            )));
        }
        Ok(data::samples(&self.tags, &failed, response.data, ts_ms))
    }

    fn encode_write(&self, tag: u32, value: Value) -> Result<Vec<u8>, FrameError> {
        let target = tag_at(&self.tags, tag)?;
        let (points, bytes) =
            data::write(target, &value).map_err(|message| unwritable(&target.spec.key, message))?;
        let serial = self.state.borrow_mut().exchange.send_write(());
        let points = Extent {
            count: points,
            ..target.extent
        };
        Ok(self.frame(serial, frame::WRITE, points, &bytes))
    }

    fn check_write(&self, frame: Vec<u8>) -> Result<(), FrameError> {
        let written = self.state.borrow_mut().exchange.answered_write();
        let (serial, ()) = written.map_err(malformed)?;
        let response = frame::response(self.config.frame, serial, &frame).map_err(malformed)?;
        if response.end_code != 0 {
            return Err(end_code(response.end_code, "the write", Vec::new()));
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
        self.state.borrow_mut().exchange.reset();
    }
}

/// A device number in the device's radix, for messages.
struct DeviceNumber(Device, u32);

impl core::fmt::Display for DeviceNumber {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.0.hex {
            write!(f, "{:X}", self.1)
        } else {
            write!(f, "{}", self.1)
        }
    }
}
