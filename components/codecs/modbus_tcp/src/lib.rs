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

use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use address::Table;
use plan::{Limits, Request, TagRange};
use sluice_guest::numeric::{DataType, encode, reorder_for};
use sluice_guest::settings::{unknown_key, wrong_type};

#[cfg(not(test))]
sluice_guest::guest_runtime!();

wit_bindgen::generate!({ world: "codec", path: "../../../wit" });

use exports::sluice::dataflow::protocol::{
    DeviceError, FrameError, Guest, GuestSession, PlannedRead, Session,
};
use sluice::dataflow::types::{Batch, ConfigError, Quality, Sample, Setting, Span, TagSpec, Value};

struct Component;

impl Guest for Component {
    type Session = ModbusSession;
}

/// Requests kept before old ones are dropped at the start of a plan.
const MAX_REQUESTS: usize = 1024;

const SETTINGS: &[&str] = &[
    "unitId",
    "mergeGap",
    "maxRegisters",
    "maxBits",
    "writeMultiple",
    "byteOrder",
];

struct Tag {
    range: TagRange,
    data_type: DataType,
    spec: TagSpec,
}

struct State {
    requests: Vec<Request>,
    /// Plans by due set, valid until a split changes the boundaries.
    plans: Vec<(Vec<u32>, Vec<PlannedRead>)>,
    boundaries: BTreeSet<u32>,
    next_tid: u16,
    /// Request and transaction id of the read in flight.
    pending_read: Option<(u32, u16)>,
    /// Transaction id, function and the four echoed bytes of the write in flight.
    pending_write: Option<(u16, u8, [u8; 4])>,
}

struct ModbusSession {
    unit: u8,
    limits: Limits,
    write_multiple: bool,
    tags: Vec<Tag>,
    state: RefCell<State>,
}

fn malformed(message: String) -> FrameError {
    FrameError::Malformed(message)
}

fn device_error(code: u8, what: &str, retry: Vec<PlannedRead>) -> FrameError {
    FrameError::Device(DeviceError {
        code: u32::from(code),
        message: format!(
            "exception {code} ({}) for {what}",
            frame::exception_name(code)
        ),
        retry,
    })
}

fn read_settings(settings: &[Setting], errors: &mut Vec<ConfigError>) -> (u8, Limits, bool) {
    let mut unit = 1u8;
    let mut limits = Limits {
        merge_gap: 16,
        max_registers: 120,
        max_bits: 2000,
    };
    let mut write_multiple = false;
    for setting in settings {
        let value = setting_value(setting);
        let key = setting.key.as_str();
        let mut number = |target: &mut u16, min: u32, max: u32| match value.as_u32() {
            Some(v) if (min..=max).contains(&v) => *target = v as u16,
            _ => errors.push(config_error(
                None,
                key,
                wrong_type(key, &format!("an integer from {min} to {max}"), &value),
            )),
        };
        match key {
            "unitId" => {
                let mut v = 0u16;
                number(&mut v, 0, 255);
                unit = v as u8;
            }
            "mergeGap" => number(&mut limits.merge_gap, 0, 1000),
            "maxRegisters" => number(&mut limits.max_registers, 1, 125),
            "maxBits" => number(&mut limits.max_bits, 1, 2000),
            "writeMultiple" => match value {
                sluice_guest::settings::SettingValue::Boolean(b) => write_multiple = b,
                _ => errors.push(config_error(
                    None,
                    key,
                    wrong_type(key, "true or false", &value),
                )),
            },
            "byteOrder" => {}
            other => errors.push(config_error(None, other, unknown_key(other, SETTINGS))),
        }
    }
    (unit, limits, write_multiple)
}

fn read_tag(index: usize, spec: TagSpec, limits: Limits) -> Result<Tag, ConfigError> {
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
    if count > usize::from(limits.max_registers) {
        return Err(err(
            "length",
            format!(
                "the value needs {count} registers, more than one request may read ({})",
                limits.max_registers
            ),
        ));
    }
    if u32::from(address.offset) + count as u32 > 65536 {
        return Err(err("address", "the value runs past register 65535".into()));
    }
    Ok(Tag {
        range: TagRange {
            address,
            count: count as u16,
        },
        data_type,
        spec,
    })
}

impl ModbusSession {
    fn next_tid(state: &mut State) -> u16 {
        state.next_tid = state.next_tid.wrapping_add(1);
        state.next_tid
    }

    fn planned(&self, state: &mut State, request: Request) -> PlannedRead {
        let id = state.requests.len() as u32;
        let tags = request.tags.clone();
        state.requests.push(request);
        PlannedRead { id, tags }
    }

    /// Samples for the tags of `request` from its response data.
    fn samples(&self, request: &Request, data: &[u8], ts_ms: i64) -> Batch {
        let mut samples = Vec::with_capacity(request.tags.len());
        for &index in &request.tags {
            let Some(tag) = self.tags.get(index as usize) else {
                continue;
            };
            let at = usize::from(tag.range.address.offset - request.start);
            let value = if request.table.is_bits() {
                data.get(at / 8)
                    .map(|byte| Value::Boolean(byte >> (at % 8) & 1 == 1))
            } else if let Some(bit) = tag.range.address.bit {
                data.get(at * 2..at * 2 + 2)
                    .map(|w| Value::Boolean(u16::from_be_bytes([w[0], w[1]]) >> bit & 1 == 1))
            } else {
                let len = usize::from(tag.range.count) * 2;
                (at * 2 + len <= data.len()).then_some(Value::Raw(Span {
                    start: (at * 2) as u32,
                    len: len as u32,
                }))
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
        Batch {
            samples,
            bytes: if request.table.is_bits() {
                Vec::new()
            } else {
                data.to_vec()
            },
        }
    }

    fn write_pdu(&self, tag: &Tag, value: &Value) -> Result<(u8, Vec<u8>, [u8; 4]), String> {
        let address = tag.range.address;
        let start = address.offset.to_be_bytes();
        match (address.table, address.bit) {
            (Table::Coils, _) => {
                let on = match number_from_value(value) {
                    Some(sluice_guest::numeric::Number::Bool(b)) => b,
                    Some(sluice_guest::numeric::Number::Int(0)) => false,
                    Some(sluice_guest::numeric::Number::Int(1)) => true,
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

impl GuestSession for ModbusSession {
    fn open(settings: Vec<Setting>, tags: Vec<TagSpec>) -> Result<Session, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let (unit, limits, write_multiple) = read_settings(&settings, &mut errors);
        let mut parsed = Vec::with_capacity(tags.len());
        for (index, spec) in tags.into_iter().enumerate() {
            match read_tag(index, spec, limits) {
                Ok(tag) => parsed.push(tag),
                Err(error) => errors.push(error),
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Session::new(ModbusSession {
            unit,
            limits,
            write_multiple,
            tags: parsed,
            state: RefCell::new(State {
                requests: Vec::new(),
                plans: Vec::new(),
                boundaries: BTreeSet::new(),
                next_tid: 0,
                pending_read: None,
                pending_write: None,
            }),
        }))
    }

    fn header_len(&self) -> u32 {
        frame::HEAD_LEN as u32
    }

    fn frame_length(&self, head: Vec<u8>) -> Result<u32, FrameError> {
        frame::total_len(&head).map_err(malformed)
    }

    fn handshake(&self, _step: u32) -> Option<Vec<u8>> {
        None
    }

    fn check_handshake(&self, step: u32, _frame: Vec<u8>) -> Result<(), FrameError> {
        Err(malformed(format!(
            "Modbus TCP has no handshake step {step}"
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
        let ranges: Vec<TagRange> = self.tags.iter().map(|t| t.range).collect();
        let requests = plan::plan(&ranges, &due, self.limits, &state.boundaries);
        let reads: Vec<PlannedRead> = requests
            .into_iter()
            .map(|r| self.planned(&mut state, r))
            .collect();
        state.plans.push((due, reads.clone()));
        reads
    }

    fn encode_read(&self, request: u32) -> Result<Vec<u8>, FrameError> {
        let mut state = self.state.borrow_mut();
        let (table, start, count) = state
            .requests
            .get(request as usize)
            .map(|r| (r.table, r.start, r.count))
            .ok_or_else(|| malformed(format!("unknown request {request}")))?;
        let tid = Self::next_tid(&mut state);
        state.pending_read = Some((request, tid));
        let [s0, s1] = start.to_be_bytes();
        let [c0, c1] = count.to_be_bytes();
        Ok(frame::build(
            tid,
            self.unit,
            &[table.read_function(), s0, s1, c0, c1],
        ))
    }

    fn parse_read(&self, request: u32, frame: Vec<u8>, ts_ms: i64) -> Result<Batch, FrameError> {
        let mut state = self.state.borrow_mut();
        let tid = sluice_guest::exchange::answered_read(state.pending_read.take(), request)
            .map_err(malformed)?;
        let failed = state
            .requests
            .get(request as usize)
            .cloned()
            .ok_or_else(|| malformed(format!("unknown request {request}")))?;
        let pdu = frame::pdu(&frame, tid, self.unit).map_err(malformed)?;
        let function = failed.table.read_function();
        let what = format!(
            "{} {}..{}",
            failed.table.name(),
            failed.start,
            u32::from(failed.start) + u32::from(failed.count)
        );
        if pdu[0] == function | 0x80 {
            let code = pdu[1];
            let mut retry = Vec::new();
            if frame::blames_addresses(code) {
                let ranges: Vec<TagRange> = self.tags.iter().map(|t| t.range).collect();
                if let Some((first, second, boundary)) = plan::split(&ranges, &failed) {
                    state.boundaries.insert(boundary);
                    state.plans.clear();
                    retry.push(self.planned(&mut state, first));
                    retry.push(self.planned(&mut state, second));
                }
            }
            return Err(device_error(code, &what, retry));
        }
        if pdu[0] != function {
            return Err(malformed(format!(
                "function {:#04x} in the response, expected {function:#04x}",
                pdu[0]
            )));
        }
        let expected = if failed.table.is_bits() {
            usize::from(failed.count).div_ceil(8)
        } else {
            usize::from(failed.count) * 2
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
        let target = self
            .tags
            .get(tag as usize)
            .ok_or_else(|| malformed(format!("unknown tag {tag}")))?;
        let (function, pdu, echo) = self.write_pdu(target, &value).map_err(|message| {
            FrameError::Device(DeviceError {
                code: 0,
                message: format!("tag `{}`: {message}", target.spec.key),
                retry: Vec::new(),
            })
        })?;
        let mut state = self.state.borrow_mut();
        let tid = Self::next_tid(&mut state);
        state.pending_write = Some((tid, function, echo));
        Ok(frame::build(tid, self.unit, &pdu))
    }

    fn check_write(&self, frame: Vec<u8>) -> Result<(), FrameError> {
        let Some((tid, function, echo)) = self.state.borrow_mut().pending_write.take() else {
            return Err(malformed(
                "a write response arrived with no write in flight".into(),
            ));
        };
        let pdu = frame::pdu(&frame, tid, self.unit).map_err(malformed)?;
        if pdu[0] == function | 0x80 {
            return Err(device_error(pdu[1], "the write", Vec::new()));
        }
        if pdu[0] != function || pdu.get(1..5) != Some(&echo[..]) {
            return Err(malformed(format!(
                "write response {pdu:02x?} does not echo the request"
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

sluice_guest::wit_conversions!();

export!(Component);
