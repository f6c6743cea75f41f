//! Codec `s7`: Siemens S7 communication (S7comm) over ISO-on-TCP (RFC 1006).
//!
//! Every frame is a TPKT header (version 3, total length) and a COTP TPDU. The
//! handshake sends a COTP connection request with the calling and called TSAPs
//! (step 0, answered by a connection confirm), then S7 Setup Communication asking
//! for a 960-byte PDU and one job in flight (step 1); the PDU size the PLC grants
//! bounds every later request. Reads are Read Var jobs (function 0x04) with up to
//! 20 items each: nearby tags of one area or DB are merged into one byte item, a
//! lone bit is a BIT item, and items are packed while both the request and its
//! answer fit the PDU. A tag too big for one answer (a long STRING) is read in
//! slices and joined again. Each job carries a fresh PDU reference that the answer
//! must echo. An item the PLC refuses (object does not exist, address out of
//! range, ...) makes only its tags BAD, and a merged item that failed is split in
//! later rounds. Writes are Write Var jobs (0x05) of one item: a BIT for BOOL tags,
//! bytes otherwise.
//!
//! Device error codes: error class << 8 | error code of the S7 header, an item's
//! return code (0x05 address out of range, 0x0A object does not exist, ...), or the
//! COTP disconnect reason of a refused connection.
//!
//! Settings: `plcType` (S200, S200_SMART, S300, S400, S1200, S1500,
//! SINUMERIK_828D; default S1200), `rack` (0-7, default 0), `slot` (0-31, default
//! 1). `byteOrder` is accepted and ignored here: the engine applies it per tag. The
//! TSAPs per family are described in the `plc` module: PG connections
//! (local 0x0100, remote 0x0100 | rack << 5 | slot), and 0x4D57 on both sides for
//! the S7-200's CP 243-1.
//!
//! Addresses (case-insensitive, optional `%`): `DB1.0`, `DB1.6.0`, `DB1.DBX6.0`,
//! `DB1.DBB4`, `DB1.DBW4`, `DB1.DBD0`; `M10.1`, `M10`, `MB10`, `MW10`, `MD10` and
//! the same for inputs `I` (`E`) and outputs `Q` (`A`); `V10.2`, `V100`, `VB100`,
//! `VW100`, `VD100` for the S7-200 families (V memory is DB 1). A BOOL needs a
//! bit address; other types take the start byte, and a size letter must match the
//! type (`W` 16-bit, `D` 32-bit; `B` or a plain byte for 64-bit values and STRING).
//!
//! Data types: BOOL (one bit), INT16/UINT16/BCD16 (2 bytes), INT32/UINT32/FLOAT32/
//! BCD32 (4), INT64/UINT64/FLOAT64 (8), STRING (`length` bytes, 1-4096, read raw
//! from the address: point it at the characters, i.e. two bytes past the start of
//! an S7 STRING with its max/actual length header). Values arrive as raw big-endian
//! spans, as the PLC stores them; BOOL tags arrive as booleans. An array tag (a
//! `length` on a type other than STRING) takes its elements' bytes one after the
//! other from the start byte, read (in slices when it is long) and written whole;
//! a BOOL array takes consecutive bits from a bit address, read as the bytes that
//! hold them, and is read-only (Write Var takes one bit an item).
//!
//! Limits: byte offsets up to 2097151 (the 3-byte bit address), DB 1-65535, PDU
//! sizes from 64 up to the requested 960, frames up to 8192 bytes.
#![cfg_attr(not(any(test, feature = "native")), no_std)]

extern crate alloc;

mod address;
mod config;
mod frame;
mod pdu;
mod plan;
mod plc;
mod read;
#[cfg(test)]
mod tests;

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use pdu::{ItemSpec, JOB_HEADER, SUCCESS, TS_BIT, TS_BYTE};
use plan::{Request, TagRange};
use sluice_guest::numeric::{ByteOrder, DataType, encode, encode_each, reorder_for};
use sluice_guest::session::{Failure, InFlight, Plans, tag_at};
use sluice_guest::settings::read_all;

sluice_guest::codec_component!(S7Session);

/// S7 communication over ISO-on-TCP, on the standard port 102.
fn protocols() -> Vec<ProtocolDeclaration> {
    alloc::vec![ProtocolDeclaration {
        name: "s7".into(),
        transports: alloc::vec![Transport::Tcp],
        default_port: Some(102),
        settings: alloc::vec![
            declare(
                "plcType",
                choices(plc::NAMES),
                text("S1200"),
                "the CPU family, which sets how the connection is addressed",
            ),
            declare(
                "rack",
                integers(0, 7),
                int(0),
                "the CPU's rack: 3 bits of the S7 connection address",
            ),
            declare(
                "slot",
                integers(0, 31),
                int(1),
                "the CPU's slot: 5 bits of the S7 connection address",
            ),
            declare(
                "byteOrder",
                choices(&["ABCD", "BADC", "CDAB", "DCBA", "GHEFCDAB"]),
                text("ABCD"),
                "how the channel's multi-byte values are laid out; a tag may say otherwise",
            ),
        ],
        address_help: "`DB1.DBW4`, `DB1.6.0`, `M10.1`, `MW20`, `I0.0`, `Q0.1`, `VW100` and \
                       the other Step 7 forms"
            .into(),
    }]
}

use sluice::dataflow::types::{Batch, ConfigError, Setting, TagSpec, Value};

/// PDU size asked for in Setup Communication.
const REQUESTED_PDU: u16 = 960;
/// PDU size assumed until one is negotiated: what every S7 CPU supports.
const DEFAULT_PDU: u16 = 240;
/// The smallest PDU size accepted from a PLC.
const MIN_PDU: u16 = 64;

struct Tag {
    range: TagRange,
    data_type: DataType,
    /// The elements of an array tag; `None` for one value.
    array_len: Option<u32>,
    /// The first bit of a BOOL array, whose bytes `range` covers.
    first_bit: Option<u8>,
    byte_order: ByteOrder,
}

struct State {
    /// Negotiated PDU size.
    pdu_size: u16,
    /// The PDU size the cached plans were made for.
    plans_pdu: u16,
    /// Plans by due set, valid until a split or a new PDU size changes them.
    plans: Plans<Request>,
    /// Bytes collected so far of tags read in slices.
    partial: BTreeMap<u32, Vec<u8>>,
    /// PDU reference of the Setup Communication in flight.
    pending_setup: Option<u16>,
    /// PDU references and the read and write in flight.
    exchange: InFlight,
}

struct S7Session {
    local_tsap: u16,
    remote_tsap: u16,
    tags: Vec<Tag>,
    ranges: Vec<TagRange>,
    state: RefCell<State>,
}

fn device(code: u32, message: String) -> FrameError {
    frame_error(Failure::device(code, message))
}

/// The acknowledgement carried by `frame`, checked against the PDU reference
/// sent; an error class in its header is a device error.
fn acknowledgement<'a>(
    frame: &'a [u8],
    pdu_ref: u16,
    what: &str,
) -> Result<pdu::Ack<'a>, FrameError> {
    let ack = frame::payload(frame)
        .and_then(pdu::ack)
        .map_err(malformed)?;
    if ack.pdu_ref != pdu_ref {
        return Err(malformed(format!(
            "PDU reference {} in the answer, expected {pdu_ref}",
            ack.pdu_ref
        )));
    }
    if ack.error != 0 {
        let [class, code] = ack.error.to_be_bytes();
        return Err(device(
            u32::from(ack.error),
            format!(
                "{what} failed: error class {class:#04x} ({}), code {code:#04x}",
                pdu::error_class_name(class)
            ),
        ));
    }
    Ok(ack)
}

impl S7Session {
    /// Checks the settings and tags; `open` without the resource handle.
    fn create(settings: &[Setting], tags: Vec<TagSpec>) -> Result<Self, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let (plc, rack, slot) = config::read_settings(settings, &mut errors);
        let tags = read_all(tags, errors, |index, spec| {
            config::read_tag(index, spec, plc)
        })?;
        let (local_tsap, remote_tsap) = plc.tsaps(rack, slot);
        Ok(S7Session {
            local_tsap,
            remote_tsap,
            ranges: tags.iter().map(|t| t.range).collect(),
            tags,
            state: RefCell::new(State {
                pdu_size: DEFAULT_PDU,
                plans_pdu: DEFAULT_PDU,
                plans: Plans::default(),
                partial: BTreeMap::new(),
                pending_setup: None,
                exchange: InFlight::default(),
            }),
        })
    }

    /// Parameters and data of the Write Var job that writes `value` to `tag`.
    fn write_job(
        &self,
        tag: &Tag,
        value: &Value,
        pdu_size: u16,
    ) -> Result<(Vec<u8>, Vec<u8>), String> {
        if tag.first_bit.is_some() {
            return Err("a BOOL array can only be read: write its bits as BOOL tags".into());
        }
        let numbers = numbers_to_write(value, tag.array_len)?;
        let range = tag.range;
        let mut item = ItemSpec {
            transport: TS_BYTE,
            count: range.len as u16,
            db: range.db,
            area: range.area.code(),
            byte: range.start,
            bit: 0,
        };
        let bytes = if let Some(bit) = range.bit {
            let encoded = encode(DataType::Bool, &numbers[0])
                .map_err(|_| String::from("a BOOL takes true/false or 0/1"))?;
            item.transport = TS_BIT;
            item.count = 1;
            item.bit = bit;
            alloc::vec![u8::from(encoded.last().is_some_and(|b| *b != 0))]
        } else {
            let unfit = |e| format!("{e:?}: the value does not fit a {}", tag.data_type.name());
            if let DataType::String(_) = tag.data_type {
                // Cut to its characters before the swap, which pairs what is left.
                let mut bytes = encode(tag.data_type, &numbers[0]).map_err(unfit)?;
                bytes.truncate(range.len as usize);
                reorder_for(&mut bytes, tag.data_type, tag.byte_order);
                bytes
            } else {
                encode_each(tag.data_type, tag.byte_order, &numbers).map_err(unfit)?
            }
        };
        let (param, data) = pdu::write(&item, &bytes);
        if JOB_HEADER + param.len() + data.len() > usize::from(pdu_size) {
            return Err(format!(
                "{} bytes do not fit one write at the negotiated PDU size of {pdu_size}",
                bytes.len()
            ));
        }
        Ok((param, data))
    }
}

impl GuestSession for S7Session {
    fn open(settings: Vec<Setting>, tags: Vec<TagSpec>) -> Result<Session, Vec<ConfigError>> {
        S7Session::create(&settings, tags).map(Session::new)
    }

    fn header_len(&self) -> u32 {
        frame::HEAD_LEN as u32
    }

    fn frame_length(&self, head: Vec<u8>) -> Result<FrameSize, FrameError> {
        frame::total_len(&head)
            .map(FrameSize::Length)
            .map_err(malformed)
    }

    fn lease_seconds(&self) -> Option<u32> {
        None
    }

    fn handshake(&self, step: u32) -> Option<Vec<u8>> {
        let mut state = self.state.borrow_mut();
        match step {
            0 => {
                // A new connection: nothing negotiated or in flight yet.
                state.pdu_size = DEFAULT_PDU;
                state.pending_setup = None;
                state.exchange.reset();
                Some(frame::connection_request(self.local_tsap, self.remote_tsap))
            }
            1 => {
                let pdu_ref = state.exchange.next_id();
                state.pending_setup = Some(pdu_ref);
                let param = pdu::setup(REQUESTED_PDU);
                Some(frame::data(&pdu::job(pdu_ref, &param, &[])))
            }
            _ => None,
        }
    }

    fn check_handshake(&self, step: u32, frame: Vec<u8>) -> Result<(), FrameError> {
        match step {
            0 => frame::connection_confirm(&frame).map_err(|refusal| match refusal {
                frame::Refusal::Malformed(message) => malformed(message),
                frame::Refusal::Refused(code, what) => device(
                    u32::from(code),
                    format!(
                        "the PLC refused the connection ({what}, code {code:#04x}): check plcType, \
                         rack and slot (called TSAP {:#06x})",
                        self.remote_tsap
                    ),
                ),
            }),
            1 => {
                let mut state = self.state.borrow_mut();
                let pdu_ref = state
                    .pending_setup
                    .take()
                    .ok_or_else(|| malformed("no Setup Communication in flight".into()))?;
                let ack = acknowledgement(&frame, pdu_ref, "Setup Communication")?;
                let granted = pdu::setup_answer(ack.param).map_err(malformed)?;
                if granted < MIN_PDU {
                    return Err(malformed(format!(
                        "the PLC granted a PDU of {granted} bytes, less than {MIN_PDU}"
                    )));
                }
                state.pdu_size = granted.min(REQUESTED_PDU);
                Ok(())
            }
            _ => Err(malformed(format!("S7 has no handshake step {step}"))),
        }
    }

    fn plan(&self, due: Vec<u32>) -> Vec<PlannedRead> {
        let mut state = self.state.borrow_mut();
        let pdu = state.pdu_size;
        if state.plans_pdu != pdu {
            state.plans.forget_plans();
            state.plans_pdu = pdu;
        }
        planned_reads(state.plans.plan(due, |due, boundaries| {
            plan::plan(&self.ranges, due, pdu, boundaries)
        }))
    }

    fn encode_read(&self, request: u32) -> Result<Vec<u8>, FrameError> {
        let mut state = self.state.borrow_mut();
        let pdu_size = state.pdu_size;
        let planned = state.plans.request(request).map_err(malformed)?;
        if !plan::fits(&planned.items, pdu_size) {
            return Err(device(
                0,
                format!(
                    "request {request} was planned for a larger PDU than the {pdu_size} bytes negotiated"
                ),
            ));
        }
        let items: Vec<ItemSpec> = planned.items.iter().map(plan::Item::spec).collect();
        let pdu_ref = state.exchange.send_read(request);
        Ok(frame::data(&pdu::job(pdu_ref, &pdu::read(&items), &[])))
    }

    fn parse_read(&self, request: u32, frame: Vec<u8>, ts_ms: i64) -> Result<Batch, FrameError> {
        let mut state = self.state.borrow_mut();
        let pdu_ref = state.exchange.answered_read(request).map_err(malformed)?;
        let planned = state.plans.request(request).map_err(malformed)?.clone();
        let ack = acknowledgement(&frame, pdu_ref, "reading")?;
        let count = pdu::function(ack.param, pdu::READ).map_err(malformed)?;
        if ack.param.len() != 2 || usize::from(count) != planned.items.len() {
            return Err(malformed(format!(
                "the answer has {count} items in {} parameter bytes, the request {}",
                ack.param.len(),
                planned.items.len()
            )));
        }
        let items = pdu::read_items(ack.data, usize::from(count)).map_err(malformed)?;
        for (index, (item, got)) in planned.items.iter().zip(&items).enumerate() {
            if got.code == SUCCESS && got.data.len() != item.data_len() {
                return Err(malformed(format!(
                    "item {index} carries {} bytes, {} were asked for",
                    got.data.len(),
                    item.data_len()
                )));
            }
        }
        let batch = read::samples(&self.tags, &planned, &items, &mut state.partial, ts_ms);
        for (item, got) in planned.items.iter().zip(&items) {
            // Codes that blame the addresses: splitting may isolate the tags at fault.
            if matches!(got.code, 0x03 | 0x05 | 0x06 | 0x07 | 0x0A) {
                state
                    .plans
                    .split_later(sluice_guest::session::Request::tags(item));
            }
        }
        Ok(batch)
    }

    fn encode_write(&self, tag: u32, value: Value) -> Result<Vec<u8>, FrameError> {
        let target = tag_at(&self.tags, tag).map_err(frame_error)?;
        let mut state = self.state.borrow_mut();
        let (param, data) = self
            .write_job(target, &value, state.pdu_size)
            .map_err(|message| frame_error(Failure::unwritable(message)))?;
        let pdu_ref = state.exchange.send_write(());
        Ok(frame::data(&pdu::job(pdu_ref, &param, &data)))
    }

    fn check_write(&self, frame: Vec<u8>) -> Result<(), FrameError> {
        let written = self.state.borrow_mut().exchange.answered_write();
        let (pdu_ref, ()) = written.map_err(malformed)?;
        let ack = acknowledgement(&frame, pdu_ref, "writing")?;
        let count = pdu::function(ack.param, pdu::WRITE).map_err(malformed)?;
        if ack.param.len() != 2 || count != 1 {
            return Err(malformed(format!(
                "the write answer has {count} items, expected 1"
            )));
        }
        match pdu::write_codes(ack.data, 1).map_err(malformed)? {
            [SUCCESS] => Ok(()),
            [code, ..] => Err(device(
                u32::from(*code),
                format!(
                    "the PLC refused the write: return code {code:#04x} ({})",
                    pdu::return_code_name(*code)
                ),
            )),
            [] => Err(malformed("the write answer has no return code".into())),
        }
    }

    fn reset(&self) {
        // The negotiated PDU size stays: the engine resets a session right after a
        // new connection's handshake, and `handshake(0)` starts every negotiation
        // from the default.
        let mut state = self.state.borrow_mut();
        state.pending_setup = None;
        state.exchange.reset();
        state.partial.clear();
    }
}
