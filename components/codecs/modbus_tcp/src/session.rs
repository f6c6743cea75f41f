//! The Modbus session: read planning, answers, writes and their echoes, over
//! the framing of the crate that includes it (`crate::frame`: MBAP for Modbus
//! TCP, address + CRC-16 for Modbus RTU). Shared by both codecs' crates.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use sluice_guest::columns::{Cell, Columns};
use sluice_guest::numeric::{ByteOrder, DataType, Number, encode_each};
use sluice_guest::session::range_codec::RangeCodec;
use sluice_guest::session::ranges::{Extent, RangeRequest, RangeState};
use sluice_guest::session::{Failure, tag_at};

use crate::address::Table;
use crate::sluice::dataflow::types::{Batch, ConfigError, Setting, TagSpec, Value};
use crate::{columns_into_batch, numbers_to_write};
use crate::{config, frame, pdu};

pub struct Tag {
    pub extent: Extent<Table>,
    /// Bit of a register read as a BOOL.
    pub bit: Option<u8>,
    pub data_type: DataType,
    /// The elements of an array tag; `None` for one value.
    pub array_len: Option<u32>,
    pub byte_order: ByteOrder,
}

type Request = RangeRequest<Table>;

/// Function and the four bytes the answer to a write echoes.
type Echo = (u8, [u8; 4]);

pub struct ModbusSession {
    pub(crate) unit: u8,
    write_multiple: bool,
    pub(crate) tags: Vec<Tag>,
    state: RefCell<RangeState<Table, Echo>>,
}

impl ModbusSession {
    /// Checks settings and tags; every mistake is reported.
    pub fn create(settings: &[Setting], tags: Vec<TagSpec>) -> Result<Self, Vec<ConfigError>> {
        let (options, limits, tags) = config::read(settings, tags)?;
        let state = RangeState::new(tags.iter().map(|t| t.extent), limits);
        Ok(ModbusSession {
            unit: options.unit,
            write_multiple: options.write_multiple,
            tags,
            state: RefCell::new(state),
        })
    }

    /// Samples for the tags of `request` from its response data, written
    /// straight into the columns the batch crosses the boundary as.
    fn samples(&self, request: &Request, data: &[u8], ts_ms: i64) -> Batch {
        let mut columns = Columns::with_capacity(request.tags.len());
        for &index in &request.tags {
            let Some(tag) = self.tags.get(index as usize) else {
                continue;
            };
            match tag.array_len {
                Some(len) if request.area.is_bits() => match bits_of(tag, request, data, len) {
                    Some(bits) => columns.push_array(index, bits.map(Number::Bool), ts_ms),
                    None => columns.push_read(index, None, ts_ms),
                },
                _ => columns.push_read(index, value_of(tag, request, data), ts_ms),
            }
        }
        if !request.area.is_bits() {
            columns.bytes = data.to_vec();
        }
        columns_into_batch(columns)
    }

    fn write_pdu(&self, tag: &Tag, value: &Value) -> Result<(u8, Vec<u8>, [u8; 4]), String> {
        let start = (tag.extent.start as u16).to_be_bytes();
        let numbers = numbers_to_write(value, tag.array_len)?;
        match (tag.extent.area, tag.bit) {
            (Table::Coils, _) if tag.array_len.is_some() || self.write_multiple => {
                let mut packed = alloc::vec![0u8; numbers.len().div_ceil(8)];
                for (i, number) in numbers.iter().enumerate() {
                    if coil(number)? {
                        packed[i / 8] |= 1 << (i % 8);
                    }
                }
                Ok(write_multiple(0x0F, start, numbers.len() as u16, &packed))
            }
            (Table::Coils, _) => {
                let v = if coil(&numbers[0])? {
                    [0xFF, 0x00]
                } else {
                    [0x00, 0x00]
                };
                Ok((
                    0x05,
                    alloc::vec![0x05, start[0], start[1], v[0], v[1]],
                    [start[0], start[1], v[0], v[1]],
                ))
            }
            (Table::HoldingRegisters, None) => {
                let bytes = encode_each(tag.data_type, tag.byte_order, &numbers)
                    .map_err(|e| format!("{e:?}: value does not fit {:?}", tag.data_type))?;
                let registers = (bytes.len() / 2) as u16;
                if registers == 1 && !self.write_multiple {
                    let pdu = alloc::vec![0x06, start[0], start[1], bytes[0], bytes[1]];
                    Ok((0x06, pdu, [start[0], start[1], bytes[0], bytes[1]]))
                } else {
                    Ok(write_multiple(0x10, start, registers, &bytes))
                }
            }
            (Table::HoldingRegisters, Some(_)) => Err(
                "writing one bit of a register is not supported: write the whole register".into(),
            ),
            (table, _) => Err(format!("{} are read-only", table.name())),
        }
    }
}

/// An FC15 or FC16 write of `count` coils or registers from `start`, `data`
/// packed: the function, the PDU and what the answer echoes.
fn write_multiple(function: u8, start: [u8; 2], count: u16, data: &[u8]) -> (u8, Vec<u8>, [u8; 4]) {
    let count = count.to_be_bytes();
    let mut pdu = alloc::vec![
        function,
        start[0],
        start[1],
        count[0],
        count[1],
        data.len() as u8
    ];
    pdu.extend_from_slice(data);
    (function, pdu, [start[0], start[1], count[0], count[1]])
}

/// The state a coil is written to: true/false or 1/0.
fn coil(number: &Number) -> Result<bool, String> {
    match number {
        Number::Bool(b) => Ok(*b),
        Number::Int(0) | Number::Uint(0) => Ok(false),
        Number::Int(1) | Number::Uint(1) => Ok(true),
        _ => Err("a coil takes true/false or 0/1".into()),
    }
}

/// The `len` bits of array tag `tag` in the response `data` to `request` (of
/// an area of bits, packed low bit first).
fn bits_of<'d>(
    tag: &Tag,
    request: &Request,
    data: &'d [u8],
    len: u32,
) -> Option<impl Iterator<Item = bool> + 'd> {
    let at = (tag.extent.start - request.start) as usize;
    let end = at + len as usize;
    (end.div_ceil(8) <= data.len()).then(|| (at..end).map(|i| data[i / 8] >> (i % 8) & 1 == 1))
}

/// The value of `tag` in the response `data` to `request`.
fn value_of(tag: &Tag, request: &Request, data: &[u8]) -> Option<Cell<'static>> {
    let at = (tag.extent.start - request.start) as usize;
    if request.area.is_bits() {
        data.get(at / 8)
            .map(|byte| Cell::Boolean(byte >> (at % 8) & 1 == 1))
    } else if let Some(bit) = tag.bit {
        data.get(at * 2..at * 2 + 2)
            .map(|w| Cell::Boolean(u16::from_be_bytes([w[0], w[1]]) >> bit & 1 == 1))
    } else {
        let len = tag.extent.count as usize * 2;
        (at * 2 + len <= data.len()).then_some(Cell::Raw {
            start: (at * 2) as u32,
            len: len as u32,
        })
    }
}

impl RangeCodec<Value, Batch> for ModbusSession {
    type Area = Table;
    type Echo = Echo;
    type Payload = Vec<u8>;

    fn head_len(&self) -> usize {
        frame::HEAD_LEN
    }

    fn total_len(&self, head: &[u8]) -> Result<u32, String> {
        frame::total_len(head)
    }

    fn read_frame(&self, read: &Request, tid: u16) -> Vec<u8> {
        let [s0, s1] = (read.start as u16).to_be_bytes();
        let [c0, c1] = (read.count as u16).to_be_bytes();
        let pdu = [read.area.read_function(), s0, s1, c0, c1];
        frame::build(tid, self.unit, &pdu)
    }

    fn read_answer(
        &self,
        read: &Request,
        tid: u16,
        frame: &[u8],
        ts_ms: i64,
    ) -> Result<Batch, Failure> {
        let pdu = frame::pdu(frame, tid, self.unit).map_err(Failure::Malformed)?;
        let function = read.area.read_function();
        // Named in errors only: not formatted for an answer that is fine.
        let what = || format!("{} {}..{}", read.area.name(), read.start, read.end());
        if pdu[0] == function | 0x80 {
            let code = pdu[1];
            return Err(Failure::device(
                u32::from(code),
                pdu::exception(code, &what()),
            ));
        }
        if pdu[0] != function {
            return Err(Failure::Malformed(format!(
                "function {:#04x} in the response, expected {function:#04x}",
                pdu[0]
            )));
        }
        let expected = if read.area.is_bits() {
            (read.count as usize).div_ceil(8)
        } else {
            read.count as usize * 2
        };
        let count = usize::from(pdu[1]);
        let data = &pdu[2..];
        if count != expected || data.len() != count {
            return Err(Failure::Malformed(format!(
                "byte count {count} with {} data bytes, expected {expected} for {}",
                data.len(),
                what()
            )));
        }
        Ok(self.samples(read, data, ts_ms))
    }

    fn blames_addresses(&self, code: u32) -> bool {
        u8::try_from(code).is_ok_and(pdu::blames_addresses)
    }

    fn write(&self, tag: u32, value: &Value) -> Result<(Echo, Vec<u8>), Failure> {
        let target = tag_at(&self.tags, tag)?;
        let (function, pdu, echo) = self.write_pdu(target, value).map_err(Failure::unwritable)?;
        Ok(((function, echo), pdu))
    }

    fn write_frame(&self, pdu: Vec<u8>, tid: u16) -> Vec<u8> {
        frame::build(tid, self.unit, &pdu)
    }

    fn write_answer(&self, (function, echo): Echo, tid: u16, frame: &[u8]) -> Result<(), Failure> {
        let pdu = frame::pdu(frame, tid, self.unit).map_err(Failure::Malformed)?;
        if pdu[0] == function | 0x80 {
            let message = pdu::exception(pdu[1], "the write");
            return Err(Failure::device(u32::from(pdu[1]), message));
        }
        if pdu[0] != function || pdu.get(1..) != Some(&echo[..]) {
            return Err(Failure::Malformed(format!(
                "write response {pdu:02x?} does not echo the request"
            )));
        }
        Ok(())
    }

    fn state(&self) -> &RefCell<RangeState<Table, Echo>> {
        &self.state
    }
}
