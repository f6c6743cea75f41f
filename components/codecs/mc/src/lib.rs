//! Codec `mc`: Mitsubishi MELSEC communication protocol (MC protocol), binary
//! 1E, 3E and 4E frames, for the engine.
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
//! - `series`: `A`, `QnA`, `Q_L` (default) or `IQ_R`. QnA and Q/L use 3-byte device
//!   numbers and 1-byte device codes (subcommands 0x0000 words / 0x0001 bits); iQ-R
//!   uses 4-byte numbers and 2-byte codes (0x0002 / 0x0003). A-series Ethernet
//!   modules speak only the 1E frame, so `A` needs `frameType: FRAME_1E`.
//! - `frameType`: `FRAME_3E` (default), `FRAME_4E` (adds a serial number that the
//!   response must echo) or `FRAME_1E` (the A-compatible frame: commands 00/01 read
//!   bits/words, 02/03 write them, 256 points a request, the devices
//!   `X Y M S F B TS TC TN CS CC CN D W R`; its answers carry no length, so their
//!   size follows from the request in flight; see `frame.rs`).
//! - `monitorTimer`: 1-65535 (units of 250 ms, default 10 = 2.5 s, as the seed's),
//!   sent in every request.
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
//! out high word first, and so on. Writes do the inverse. An array tag (a `length`
//! on a type other than STRING) takes its elements' words one after the other,
//! each normalised as a single value, or its bits of a bit device as booleans; it
//! is read in one request and written whole. An array cannot start at a bit of a
//! word.
//!
//! # Limits
//! 960 words per word read, 3584 bits per bit read (the 3E limit is 7168; half of it
//! stays within what every module accepts), responses of at most 2048 data bytes;
//! 256 points a request in the 1E frame. A 1E completion code other than `5B`
//! (the CPU's abnormal code follows) is taken as the devices' fault, so a merged
//! read it fails is split like one an end code blames.
#![cfg_attr(not(any(test, feature = "native")), no_std)]

extern crate alloc;

mod address;
mod config;
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
use plan::limits;
use sluice_guest::numeric::{ByteOrder, DataType};
use sluice_guest::session::range_codec::RangeCodec;
use sluice_guest::session::ranges::{Extent, RangeRequest, RangeState};
use sluice_guest::session::{Failure, tag_at};

sluice_guest::codec_component!(McSession);

/// The MELSEC communication protocol (MC protocol) over TCP, which has no
/// standard port: each Ethernet module's is set in the PLC.
fn protocols() -> Vec<ProtocolDeclaration> {
    alloc::vec![ProtocolDeclaration {
        name: "mc".into(),
        transports: alloc::vec![Transport::Tcp],
        default_port: None,
        settings: alloc::vec![
            declare(
                "series",
                choices(&["A", "QnA", "Q_L", "IQ_R"]),
                text("Q_L"),
                "the PLC series, which sets the width of device numbers",
            ),
            declare(
                "frameType",
                choices(&["FRAME_1E", "FRAME_3E", "FRAME_4E"]),
                text("FRAME_3E"),
                "the frame the Ethernet module is set to speak",
            ),
            declare(
                "monitorTimer",
                integers(1, i64::from(u16::MAX)),
                int(10),
                "how long the PLC may take to answer, in units of 250 ms; 0 would let it wait forever",
            ),
            declare(
                "byteOrder",
                choices(&["ABCD", "BADC", "CDAB", "DCBA", "GHEFCDAB"]),
                None,
                "how the channel's multi-word values are laid out (the codec's own order when left out)",
            ),
        ],
        address_help: "a device and its number in the device's radix: `D100`, `M10`, `X1F`, \
                       `ZR1000`, with `.N` for one bit of a word"
            .into(),
    }]
}

use sluice::dataflow::types::{Batch, ConfigError, Setting, TagSpec, Value};

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
    /// The elements of an array tag; `None` for one value.
    array_len: Option<u32>,
    byte_order: ByteOrder,
}

type Request = RangeRequest<Device>;

struct McSession {
    config: Config,
    tags: Vec<Tag>,
    /// The kit's state; a write in flight keeps whether it is in bit units.
    state: RefCell<RangeState<Device, bool>>,
}

impl McSession {
    /// Checks settings and tags; every mistake is reported.
    fn create(settings: &[Setting], tags: Vec<TagSpec>) -> Result<McSession, Vec<ConfigError>> {
        let (config, tags) = config::read(settings, tags)?;
        let state = RangeState::new(tags.iter().map(|t| t.extent), limits(config.frame));
        Ok(McSession {
            config,
            tags,
            state: RefCell::new(state),
        })
    }

    /// The checked answer `frame` to the request sent with `serial`, which
    /// (in the 1E frame) answers `expect`.
    fn response<'a>(
        &self,
        serial: u16,
        expect: frame::Expect1E,
        frame: &'a [u8],
    ) -> Result<frame::Response<'a>, Failure> {
        match self.config.frame {
            FrameType::E1 => frame::response_1e(frame, expect),
            other => frame::response(other, serial, frame),
        }
        .map_err(Failure::Malformed)
    }

    /// The message of end code `code` for `what`.
    fn end_code(&self, code: u16, what: &str) -> String {
        match self.config.frame {
            FrameType::E1 => frame::end_code_1e(code, what),
            FrameType::E3 | FrameType::E4 => frame::end_code(code, what),
        }
    }

    /// What the 1E answer to the exchange in flight is: a read's data, or a
    /// write's acknowledgement.
    fn expected_1e(&self) -> Result<frame::Expect1E, String> {
        let state = self.state.borrow();
        if let Some(request) = state.exchange.read_in_flight() {
            let read = state.reads.request(request)?;
            return Ok(expect_read(read));
        }
        match state.exchange.write_in_flight() {
            Some(&bits) => Ok(frame::Expect1E::to(frame::command_1e(true, bits), 0)),
            None => Err("an answer arrived with nothing in flight".into()),
        }
    }

    /// A request frame for `command` on `points` (words or bits by the device).
    fn frame(&self, serial: u16, command: u16, points: Extent<Device>, data: &[u8]) -> Vec<u8> {
        let config = self.config;
        if config.frame == FrameType::E1 {
            let bits = points.area.bits;
            let command = frame::command_1e(command == frame::WRITE, bits);
            // Addresses are checked against the 1E devices when the session opens.
            let code = points.area.code_1e.unwrap_or_default();
            return frame::request_1e(
                command,
                config.timer,
                points.start,
                code,
                points.count,
                data,
            );
        }
        let mut body = Vec::with_capacity(8 + data.len());
        frame::push_device(&mut body, points.start, points.area.code, self.config.wide);
        body.extend_from_slice(&(points.count as u16).to_le_bytes());
        body.extend_from_slice(data);
        let sub = frame::subcommand(self.config.wide, points.area.bits);
        frame::request(config.frame, serial, config.timer, command, sub, &body)
    }
}

/// The data bytes of a successful answer to `read`: two a word, one a pair of bits.
fn data_len(read: &Request) -> u32 {
    if read.area.bits {
        read.count.div_ceil(2)
    } else {
        read.count * 2
    }
}

/// The 1E answer to `read`.
fn expect_read(read: &Request) -> frame::Expect1E {
    frame::Expect1E::to(frame::command_1e(false, read.area.bits), data_len(read))
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

impl RangeCodec<Value, Batch> for McSession {
    type Area = Device;
    /// Whether the write is in bit units (its 1E answer says so).
    type Echo = bool;
    /// The points written and their wire data.
    type Payload = (Extent<Device>, Vec<u8>);

    fn head_len(&self) -> usize {
        self.config.frame.head_len()
    }

    fn total_len(&self, head: &[u8]) -> Result<u32, String> {
        match self.config.frame {
            FrameType::E1 => frame::total_len_1e(head, self.expected_1e()?),
            other => frame::total_len(other, head),
        }
    }

    fn read_frame(&self, read: &Request, serial: u16) -> Vec<u8> {
        let points = Extent {
            area: read.area,
            start: read.start,
            count: read.count,
        };
        self.frame(serial, frame::READ, points, &[])
    }

    fn read_answer(
        &self,
        read: &Request,
        serial: u16,
        frame: &[u8],
        ts_ms: i64,
    ) -> Result<Batch, Failure> {
        let response = self.response(serial, expect_read(read), frame)?;
        let what = describe(read);
        if response.end_code != 0 {
            let code = response.end_code;
            return Err(Failure::device(u32::from(code), self.end_code(code, &what)));
        }
        let expected = data_len(read) as usize;
        if response.data.len() != expected {
            return Err(Failure::Malformed(format!(
                "{} data bytes, expected {expected} for {what}",
                response.data.len()
            )));
        }
        Ok(data::samples(&self.tags, read, response.data, ts_ms))
    }

    fn blames_addresses(&self, code: u32) -> bool {
        let blames = match self.config.frame {
            FrameType::E1 => frame::blames_addresses_1e,
            FrameType::E3 | FrameType::E4 => frame::blames_addresses,
        };
        u16::try_from(code).is_ok_and(blames)
    }

    fn write(&self, tag: u32, value: &Value) -> Result<(bool, Self::Payload), Failure> {
        let target = tag_at(&self.tags, tag)?;
        let (count, bytes) = data::write(target, value).map_err(Failure::unwritable)?;
        let points = Extent {
            count,
            ..target.extent
        };
        Ok((points.area.bits, (points, bytes)))
    }

    fn write_frame(&self, (points, bytes): Self::Payload, serial: u16) -> Vec<u8> {
        self.frame(serial, frame::WRITE, points, &bytes)
    }

    fn write_answer(&self, bits: bool, serial: u16, frame: &[u8]) -> Result<(), Failure> {
        let expect = frame::Expect1E::to(frame::command_1e(true, bits), 0);
        let response = self.response(serial, expect, frame)?;
        if response.end_code != 0 {
            let code = response.end_code;
            return Err(Failure::device(
                u32::from(code),
                self.end_code(code, "the write"),
            ));
        }
        if !response.data.is_empty() {
            return Err(Failure::Malformed(format!(
                "write response carries {} data bytes, expected none",
                response.data.len()
            )));
        }
        Ok(())
    }

    fn state(&self) -> &RefCell<RangeState<Device, bool>> {
        &self.state
    }
}

sluice_guest::range_session!(McSession, "MC protocol");

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
