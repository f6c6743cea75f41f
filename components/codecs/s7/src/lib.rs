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
//! spans, as the PLC stores them; BOOL tags arrive as booleans.
//!
//! Limits: byte offsets up to 2097151 (the 3-byte bit address), DB 1-65535, PDU
//! sizes from 64 up to the requested 960, frames up to 8192 bytes.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

mod address;
mod frame;
mod pdu;
mod plan;
mod plc;
mod read;
#[cfg(test)]
mod tests;

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use address::{BYTE_LIMIT, type_name};
use pdu::{ItemSpec, JOB_HEADER, SUCCESS, TS_BIT, TS_BYTE};
use plan::{Request, TagRange};
use plc::PlcType;
use sluice_guest::numeric::{DataType, encode, reorder_for};
use sluice_guest::settings::{SettingValue, unknown_key, wrong_type};

#[cfg(not(test))]
sluice_guest::guest_runtime!();

wit_bindgen::generate!({
    world: "codec",
    path: "../../../wit",
    additional_derives: [PartialEq],
});

use exports::sluice::dataflow::protocol::{
    DeviceError, FrameError, Guest, GuestSession, PlannedRead, Session,
};
use sluice::dataflow::types::{Batch, ConfigError, Setting, TagSpec, Value};

struct Component;

impl Guest for Component {
    type Session = S7Session;
}

/// Requests kept before old ones are dropped at the start of a plan.
const MAX_REQUESTS: usize = 1024;
/// PDU size asked for in Setup Communication.
const REQUESTED_PDU: u16 = 960;
/// PDU size assumed until one is negotiated: what every S7 CPU supports.
const DEFAULT_PDU: u16 = 240;
/// The smallest PDU size accepted from a PLC.
const MIN_PDU: u16 = 64;
/// The longest STRING tag, in bytes.
const MAX_STRING: u32 = 4096;

const SETTINGS: &[&str] = &["plcType", "rack", "slot", "byteOrder"];

struct Tag {
    range: TagRange,
    data_type: DataType,
    spec: TagSpec,
}

struct State {
    /// Negotiated PDU size.
    pdu_size: u16,
    /// The PDU size the cached plans were made for.
    plans_pdu: u16,
    next_ref: u16,
    requests: Vec<Request>,
    /// Plans by due set, valid until a split or a new PDU size changes them.
    plans: Vec<(Vec<u32>, Vec<PlannedRead>)>,
    boundaries: BTreeSet<u32>,
    /// Bytes collected so far of tags read in slices.
    partial: BTreeMap<u32, Vec<u8>>,
    /// PDU reference of the Setup Communication in flight.
    pending_setup: Option<u16>,
    /// Request and PDU reference of the read in flight.
    pending_read: Option<(u32, u16)>,
    /// PDU reference of the write in flight.
    pending_write: Option<u16>,
}

impl State {
    fn next_ref(&mut self) -> u16 {
        self.next_ref = self.next_ref.wrapping_add(1);
        self.next_ref
    }
}

struct S7Session {
    local_tsap: u16,
    remote_tsap: u16,
    tags: Vec<Tag>,
    ranges: Vec<TagRange>,
    state: RefCell<State>,
}

fn malformed(message: String) -> FrameError {
    FrameError::Malformed(message)
}

fn device(code: u32, message: String) -> FrameError {
    FrameError::Device(DeviceError {
        code,
        message,
        retry: Vec::new(),
    })
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

/// PLC type, rack and slot from the channel settings.
fn read_settings(settings: &[Setting], errors: &mut Vec<ConfigError>) -> (PlcType, u8, u8) {
    let (mut plc, mut rack, mut slot) = (PlcType::S1200, 0u8, 1u8);
    for setting in settings {
        let value = setting_value(setting);
        let key = setting.key.as_str();
        let mut number = |target: &mut u8, max: u32| match value.as_u32() {
            Some(v) if v <= max => *target = v as u8,
            _ => errors.push(config_error(
                None,
                key,
                wrong_type(key, &format!("an integer from 0 to {max}"), &value),
            )),
        };
        match key {
            "rack" => number(&mut rack, 7),
            "slot" => number(&mut slot, 31),
            "plcType" => match value {
                SettingValue::Text(name) if PlcType::from_name(name).is_some() => {
                    plc = PlcType::from_name(name).unwrap_or(plc);
                }
                _ => errors.push(config_error(
                    None,
                    key,
                    wrong_type(key, &format!("one of {}", plc::NAMES.join(", ")), &value),
                )),
            },
            "byteOrder" => {}
            other => errors.push(config_error(None, other, unknown_key(other, SETTINGS))),
        }
    }
    (plc, rack, slot)
}

fn read_tag(index: usize, spec: TagSpec, plc: PlcType) -> Result<Tag, ConfigError> {
    let err = |key: &str, message: String| config_error(Some(index as u32), key, message);
    let data_type = tag_data_type(&spec);
    if let DataType::String(chars) = data_type
        && !(1..=MAX_STRING).contains(&chars)
    {
        return Err(err(
            "length",
            format!("a STRING needs a length from 1 to {MAX_STRING}, got {chars}"),
        ));
    }
    let text = spec.address.trim();
    let address = address::parse(text, plc.has_v_area()).map_err(|m| err("address", m))?;
    let len = address::byte_len(&address, data_type, text).map_err(|m| err("address", m))?;
    if address.byte + len > BYTE_LIMIT {
        return Err(err(
            "address",
            format!(
                "`{text}` runs past the last addressable byte ({})",
                BYTE_LIMIT - 1
            ),
        ));
    }
    Ok(Tag {
        range: TagRange {
            area: address.area,
            db: address.db,
            start: address.byte,
            len,
            bit: address.bit,
        },
        data_type,
        spec,
    })
}

impl S7Session {
    /// Checks the settings and tags; `open` without the resource handle.
    fn build(settings: Vec<Setting>, tags: Vec<TagSpec>) -> Result<Self, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let (plc, rack, slot) = read_settings(&settings, &mut errors);
        let mut parsed = Vec::with_capacity(tags.len());
        for (index, spec) in tags.into_iter().enumerate() {
            match read_tag(index, spec, plc) {
                Ok(tag) => parsed.push(tag),
                Err(error) => errors.push(error),
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let (local_tsap, remote_tsap) = plc.tsaps(rack, slot);
        Ok(S7Session {
            local_tsap,
            remote_tsap,
            ranges: parsed.iter().map(|t| t.range).collect(),
            tags: parsed,
            state: RefCell::new(State {
                pdu_size: DEFAULT_PDU,
                plans_pdu: DEFAULT_PDU,
                next_ref: 0,
                requests: Vec::new(),
                plans: Vec::new(),
                boundaries: BTreeSet::new(),
                partial: BTreeMap::new(),
                pending_setup: None,
                pending_read: None,
                pending_write: None,
            }),
        })
    }

    fn planned(state: &mut State, request: Request) -> PlannedRead {
        let id = state.requests.len() as u32;
        let tags = request.tags.clone();
        state.requests.push(request);
        PlannedRead { id, tags }
    }

    /// Parameters and data of the Write Var job that writes `value` to `tag`.
    fn write_job(
        &self,
        tag: &Tag,
        value: &Value,
        pdu_size: u16,
    ) -> Result<(Vec<u8>, Vec<u8>), String> {
        let number = number_from_value(value).ok_or_else(|| String::from("no value to write"))?;
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
            let encoded = encode(DataType::Bool, &number)
                .map_err(|_| String::from("a BOOL takes true/false or 0/1"))?;
            item.transport = TS_BIT;
            item.count = 1;
            item.bit = bit;
            alloc::vec![u8::from(encoded.last().is_some_and(|b| *b != 0))]
        } else {
            let mut bytes = encode(tag.data_type, &number).map_err(|e| {
                format!(
                    "{e:?}: the value does not fit a {}",
                    type_name(tag.data_type)
                )
            })?;
            bytes.truncate(range.len as usize);
            reorder_for(&mut bytes, tag.data_type, tag_byte_order(&tag.spec));
            bytes
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
        S7Session::build(settings, tags).map(Session::new)
    }

    fn header_len(&self) -> u32 {
        frame::HEAD_LEN as u32
    }

    fn frame_length(&self, head: Vec<u8>) -> Result<u32, FrameError> {
        frame::total_len(&head).map_err(malformed)
    }

    fn handshake(&self, step: u32) -> Option<Vec<u8>> {
        let mut state = self.state.borrow_mut();
        match step {
            0 => {
                // A new connection: nothing negotiated or in flight yet.
                state.pdu_size = DEFAULT_PDU;
                state.pending_setup = None;
                state.pending_read = None;
                state.pending_write = None;
                Some(frame::connection_request(self.local_tsap, self.remote_tsap))
            }
            1 => {
                let pdu_ref = state.next_ref();
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
        if state.plans_pdu != state.pdu_size {
            state.plans.clear();
            state.plans_pdu = state.pdu_size;
        }
        if let Some((_, reads)) = state.plans.iter().find(|(d, _)| *d == due) {
            return reads.clone();
        }
        if state.requests.len() > MAX_REQUESTS {
            // Safe: a plan call starts a round, so no earlier request id is in flight.
            state.requests.clear();
            state.plans.clear();
        }
        let requests = plan::plan(&self.ranges, &due, state.pdu_size, &state.boundaries);
        let reads: Vec<PlannedRead> = requests
            .into_iter()
            .map(|r| Self::planned(&mut state, r))
            .collect();
        state.plans.push((due, reads.clone()));
        reads
    }

    fn encode_read(&self, request: u32) -> Result<Vec<u8>, FrameError> {
        let mut state = self.state.borrow_mut();
        let pdu_size = state.pdu_size;
        let planned = state
            .requests
            .get(request as usize)
            .ok_or_else(|| malformed(format!("unknown request {request}")))?;
        if !plan::fits(&planned.items, pdu_size) {
            return Err(device(
                0,
                format!(
                    "request {request} was planned for a larger PDU than the {pdu_size} bytes negotiated"
                ),
            ));
        }
        let items: Vec<ItemSpec> = planned.items.iter().map(plan::Item::spec).collect();
        let pdu_ref = state.next_ref();
        state.pending_read = Some((request, pdu_ref));
        Ok(frame::data(&pdu::job(pdu_ref, &pdu::read(&items), &[])))
    }

    fn parse_read(&self, request: u32, frame: Vec<u8>, ts_ms: i64) -> Result<Batch, FrameError> {
        let mut state = self.state.borrow_mut();
        let pdu_ref = sluice_guest::exchange::answered_read(state.pending_read.take(), request)
            .map_err(malformed)?;
        let planned = state
            .requests
            .get(request as usize)
            .cloned()
            .ok_or_else(|| malformed(format!("unknown request {request}")))?;
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
        let batch = read::samples(&self.ranges, &planned, &items, &mut state.partial, ts_ms);
        for (item, got) in planned.items.iter().zip(&items) {
            // Codes that blame the addresses: splitting may isolate the tags at fault.
            if matches!(got.code, 0x03 | 0x05 | 0x06 | 0x07 | 0x0A)
                && let Some(boundary) = plan::boundary(item)
                && state.boundaries.insert(boundary)
            {
                state.plans.clear();
            }
        }
        Ok(batch)
    }

    fn encode_write(&self, tag: u32, value: Value) -> Result<Vec<u8>, FrameError> {
        let target = self
            .tags
            .get(tag as usize)
            .ok_or_else(|| malformed(format!("unknown tag {tag}")))?;
        let mut state = self.state.borrow_mut();
        let (param, data) = self
            .write_job(target, &value, state.pdu_size)
            .map_err(|message| device(0, format!("tag `{}`: {message}", target.spec.key)))?;
        let pdu_ref = state.next_ref();
        state.pending_write = Some(pdu_ref);
        Ok(frame::data(&pdu::job(pdu_ref, &param, &data)))
    }

    fn check_write(&self, frame: Vec<u8>) -> Result<(), FrameError> {
        let Some(pdu_ref) = self.state.borrow_mut().pending_write.take() else {
            return Err(malformed(
                "a write response arrived with no write in flight".into(),
            ));
        };
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
        state.pending_read = None;
        state.pending_write = None;
        state.partial.clear();
    }
}

sluice_guest::wit_conversions!();

export!(Component);
