//! Codec `modbus_tcp`: Modbus TCP framing for the engine.
//!
//! Plans reads (function code by table: coils FC01, discrete inputs FC02, holding
//! registers FC03, input registers FC04), merging nearby addresses and splitting at
//! 120 registers / 2000 bits; builds MBAP frames with a fresh transaction id and
//! checks the answer's transaction id, unit id, function and byte count. A Modbus
//! exception is a device error, never a malformed frame: a merged request failing
//! with an address exception is split in two and retried, and the split is kept for
//! later rounds, so only the tags at fault end BAD. Writes use FC05/FC06, or
//! FC15/FC16 for multi-register values and when `writeMultiple` is set.
//!
//! Settings: `unitId` (0-255, default 1), `mergeGap` (0-1000, default 16),
//! `maxRegisters` (1-125, default 120), `maxBits` (1-2000, default 2000),
//! `writeMultiple` (default false). `byteOrder` is accepted and ignored here: the
//! engine applies it per tag.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

mod address;
mod frame;
mod plan;
#[cfg(test)]
mod tests;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use address::Table;
use sluice_guest::numeric::{DataType, Number, encode, reorder_for};
use sluice_guest::session::ranges::{self, Extent, RangeLimits, RangeRequest};
use sluice_guest::session::{InFlight, Planned, Plans};
use sluice_guest::settings::{SettingValue, integer, read_all, unknown_key, wrong_type};

sluice_guest::codec_component!(ModbusSession);

use sluice::dataflow::types::{Batch, ConfigError, Setting, Span, TagSpec, Value};

const SETTINGS: &[&str] = &[
    "unitId",
    "mergeGap",
    "maxRegisters",
    "maxBits",
    "writeMultiple",
    "byteOrder",
];

struct Tag {
    extent: Extent<Table>,
    /// Bit of a register read as a BOOL.
    bit: Option<u8>,
    data_type: DataType,
    spec: TagSpec,
}

type Request = RangeRequest<Table>;

/// Function and the four bytes the answer to a write echoes.
type Echo = (u8, [u8; 4]);

#[derive(Default)]
struct State {
    plans: Plans<Request>,
    /// Transaction ids; the write in flight waits for its echo.
    exchange: InFlight<Echo>,
}

struct ModbusSession {
    unit: u8,
    limits: RangeLimits,
    write_multiple: bool,
    tags: Vec<Tag>,
    state: RefCell<State>,
}

fn exception(code: u8, what: &str, retry: Vec<Planned>) -> FrameError {
    let name = frame::exception_name(code);
    device_error(
        u32::from(code),
        format!("exception {code} ({name}) for {what}"),
        retry,
    )
}

fn read_settings(settings: &[Setting], errors: &mut Vec<ConfigError>) -> (u8, RangeLimits, bool) {
    let mut unit = 1u8;
    let mut limits = RangeLimits {
        merge_gap: 16,
        max_words: 120,
        max_bits: 2000,
    };
    let mut write_multiple = false;
    each_setting(settings, errors, |key, value| match key {
        "unitId" => integer(key, value, 0, 255).map(|v| unit = v as u8),
        "mergeGap" => integer(key, value, 0, 1000).map(|v| limits.merge_gap = v),
        "maxRegisters" => integer(key, value, 1, 125).map(|v| limits.max_words = v),
        "maxBits" => integer(key, value, 1, 2000).map(|v| limits.max_bits = v),
        "writeMultiple" => match value {
            SettingValue::Boolean(b) => {
                write_multiple = *b;
                Ok(())
            }
            _ => Err(wrong_type(key, "true or false", value)),
        },
        "byteOrder" => Ok(()),
        other => Err(unknown_key(other, SETTINGS)),
    });
    (unit, limits, write_multiple)
}

fn read_tag(index: usize, spec: TagSpec, limits: RangeLimits) -> Result<Tag, ConfigError> {
    let err = |key: &str, message: String| config_error(Some(index as u32), key, message);
    let address = address::parse(&spec.address).map_err(|m| err("address", m))?;
    let data_type = tag_data_type(&spec);
    let count = if address.table.is_bits() {
        if data_type != DataType::Bool {
            return Err(err(
                "dataType",
                format!(
                    "{} hold single bits: the dataType must be BOOL",
                    address.table.name()
                ),
            ));
        }
        1
    } else if address.bit.is_some() {
        if data_type != DataType::Bool {
            return Err(err(
                "dataType",
                "a register bit (`.N`) must have dataType BOOL".into(),
            ));
        }
        1
    } else {
        data_type.byte_len() / 2
    };
    if count > limits.max_words as usize {
        return Err(err(
            "length",
            format!(
                "the value needs {count} registers, more than one request may read ({})",
                limits.max_words
            ),
        ));
    }
    if u32::from(address.offset) + count as u32 > 65536 {
        return Err(err("address", "the value runs past register 65535".into()));
    }
    Ok(Tag {
        extent: Extent {
            area: address.table,
            start: u32::from(address.offset),
            count: count as u32,
        },
        bit: address.bit,
        data_type,
        spec,
    })
}

impl ModbusSession {
    /// Checks settings and tags; every mistake is reported.
    fn create(settings: &[Setting], tags: Vec<TagSpec>) -> Result<Self, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let (unit, limits, write_multiple) = read_settings(settings, &mut errors);
        let tags = read_all(tags, errors, |index, spec| read_tag(index, spec, limits))?;
        Ok(ModbusSession {
            unit,
            limits,
            write_multiple,
            tags,
            state: RefCell::new(State::default()),
        })
    }

    fn extent(&self, tag: u32) -> Option<Extent<Table>> {
        self.tags.get(tag as usize).map(|t| t.extent)
    }

    /// Samples for the tags of `request` from its response data.
    fn samples(&self, request: &Request, data: &[u8], ts_ms: i64) -> Batch {
        let samples = request
            .tags
            .iter()
            .filter_map(|&index| {
                let tag = self.tags.get(index as usize)?;
                Some(sample(index, value_of(tag, request, data), ts_ms))
            })
            .collect();
        Batch {
            samples,
            bytes: if request.area.is_bits() {
                Vec::new()
            } else {
                data.to_vec()
            },
        }
    }

    fn write_pdu(&self, tag: &Tag, value: &Value) -> Result<(u8, Vec<u8>, [u8; 4]), String> {
        let start = (tag.extent.start as u16).to_be_bytes();
        match (tag.extent.area, tag.bit) {
            (Table::Coils, _) => {
                let on = match number_from_value(value) {
                    Some(Number::Bool(b)) => b,
                    Some(Number::Int(0)) => false,
                    Some(Number::Int(1)) => true,
                    _ => return Err("a coil takes true/false or 0/1".into()),
                };
                if self.write_multiple {
                    let pdu = alloc::vec![0x0F, start[0], start[1], 0, 1, 1, u8::from(on)];
                    Ok((0x0F, pdu, [start[0], start[1], 0, 1]))
                } else {
                    let v = if on { [0xFF, 0x00] } else { [0x00, 0x00] };
                    Ok((
                        0x05,
                        alloc::vec![0x05, start[0], start[1], v[0], v[1]],
                        [start[0], start[1], v[0], v[1]],
                    ))
                }
            }
            (Table::HoldingRegisters, None) => {
                let number = number_from_value(value).ok_or("no value to write")?;
                let mut bytes = encode(tag.data_type, &number)
                    .map_err(|e| format!("{e:?}: value does not fit {:?}", tag.data_type))?;
                reorder_for(&mut bytes, tag.data_type, tag_byte_order(&tag.spec));
                let registers = (bytes.len() / 2) as u16;
                if registers == 1 && !self.write_multiple {
                    let pdu = alloc::vec![0x06, start[0], start[1], bytes[0], bytes[1]];
                    Ok((0x06, pdu, [start[0], start[1], bytes[0], bytes[1]]))
                } else {
                    let count = registers.to_be_bytes();
                    let mut pdu = alloc::vec![
                        0x10,
                        start[0],
                        start[1],
                        count[0],
                        count[1],
                        bytes.len() as u8
                    ];
                    pdu.extend_from_slice(&bytes);
                    Ok((0x10, pdu, [start[0], start[1], count[0], count[1]]))
                }
            }
            (Table::HoldingRegisters, Some(_)) => Err(
                "writing one bit of a register is not supported: write the whole register".into(),
            ),
            (table, _) => Err(format!("{} are read-only", table.name())),
        }
    }
}

/// The value of `tag` in the response `data` to `request`.
fn value_of(tag: &Tag, request: &Request, data: &[u8]) -> Option<Value> {
    let at = (tag.extent.start - request.start) as usize;
    if request.area.is_bits() {
        data.get(at / 8)
            .map(|byte| Value::Boolean(byte >> (at % 8) & 1 == 1))
    } else if let Some(bit) = tag.bit {
        data.get(at * 2..at * 2 + 2)
            .map(|w| Value::Boolean(u16::from_be_bytes([w[0], w[1]]) >> bit & 1 == 1))
    } else {
        let len = tag.extent.count as usize * 2;
        (at * 2 + len <= data.len()).then_some(Value::Raw(Span {
            start: (at * 2) as u32,
            len: len as u32,
        }))
    }
}

impl GuestSession for ModbusSession {
    fn open(settings: Vec<Setting>, tags: Vec<TagSpec>) -> Result<Session, Vec<ConfigError>> {
        Self::create(&settings, tags).map(Session::new)
    }

    fn header_len(&self) -> u32 {
        frame::HEAD_LEN as u32
    }

    fn frame_length(&self, head: Vec<u8>) -> Result<u32, FrameError> {
        frame::total_len(&head).map_err(malformed)
    }

    sluice_guest::no_handshake!("Modbus TCP");

    fn plan(&self, due: Vec<u32>) -> Vec<PlannedRead> {
        let mut state = self.state.borrow_mut();
        planned_reads(state.plans.plan(due, |due, boundaries| {
            ranges::plan(due, |t| self.extent(t), self.limits, boundaries)
        }))
    }

    fn encode_read(&self, request: u32) -> Result<Vec<u8>, FrameError> {
        let mut state = self.state.borrow_mut();
        let read = state.plans.request(request).map_err(malformed)?;
        let [s0, s1] = (read.start as u16).to_be_bytes();
        let [c0, c1] = (read.count as u16).to_be_bytes();
        let pdu = [read.area.read_function(), s0, s1, c0, c1];
        let tid = state.exchange.send_read(request);
        Ok(frame::build(tid, self.unit, &pdu))
    }

    fn parse_read(&self, request: u32, frame: Vec<u8>, ts_ms: i64) -> Result<Batch, FrameError> {
        let mut state = self.state.borrow_mut();
        let tid = state.exchange.answered_read(request).map_err(malformed)?;
        let failed = state.plans.request(request).map_err(malformed)?.clone();
        let pdu = frame::pdu(&frame, tid, self.unit).map_err(malformed)?;
        let function = failed.area.read_function();
        let what = format!("{} {}..{}", failed.area.name(), failed.start, failed.end());
        if pdu[0] == function | 0x80 {
            let code = pdu[1];
            let retry = if frame::blames_addresses(code) {
                state
                    .plans
                    .split(&failed, ranges::single(|t| self.extent(t)))
            } else {
                Vec::new()
            };
            return Err(exception(code, &what, retry));
        }
        if pdu[0] != function {
            return Err(malformed(format!(
                "function {:#04x} in the response, expected {function:#04x}",
                pdu[0]
            )));
        }
        let expected = if failed.area.is_bits() {
            (failed.count as usize).div_ceil(8)
        } else {
            failed.count as usize * 2
        };
        let count = usize::from(pdu[1]);
        let data = &pdu[2..];
        if count != expected || data.len() != count {
            return Err(malformed(format!(
                "byte count {count} with {} data bytes, expected {expected} for {what}",
                data.len()
            )));
        }
        Ok(self.samples(&failed, data, ts_ms))
    }

    fn encode_write(&self, tag: u32, value: Value) -> Result<Vec<u8>, FrameError> {
        let target = tag_at(&self.tags, tag)?;
        let (function, pdu, echo) = self
            .write_pdu(target, &value)
            .map_err(|message| unwritable(&target.spec.key, message))?;
        let tid = self
            .state
            .borrow_mut()
            .exchange
            .send_write((function, echo));
        Ok(frame::build(tid, self.unit, &pdu))
    }

    fn check_write(&self, frame: Vec<u8>) -> Result<(), FrameError> {
        let written = self.state.borrow_mut().exchange.answered_write();
        let (tid, (function, echo)) = written.map_err(malformed)?;
        let pdu = frame::pdu(&frame, tid, self.unit).map_err(malformed)?;
        if pdu[0] == function | 0x80 {
            return Err(exception(pdu[1], "the write", Vec::new()));
        }
        if pdu[0] != function || pdu.get(1..5) != Some(&echo[..]) {
            return Err(malformed(format!(
                "write response {pdu:02x?} does not echo the request"
            )));
        }
        Ok(())
    }

    fn reset(&self) {
        self.state.borrow_mut().exchange.reset();
    }
}
