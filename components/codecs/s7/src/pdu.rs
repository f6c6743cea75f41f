//! S7comm PDUs: the header (protocol id 0x32, message type, PDU reference,
//! parameter and data lengths, and in acknowledgements the error class and code),
//! Setup Communication (0xF0), Read Var (0x04) and Write Var (0x05).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

const PROTOCOL_ID: u8 = 0x32;
/// Message type of a request.
const JOB: u8 = 0x01;
/// Message type of an acknowledgement without data.
const ACK: u8 = 0x02;
/// Message type of an acknowledgement with data.
const ACK_DATA: u8 = 0x03;

pub const SETUP: u8 = 0xF0;
pub const READ: u8 = 0x04;
pub const WRITE: u8 = 0x05;

/// Header of a job.
pub const JOB_HEADER: usize = 10;
/// Header of an acknowledgement (with error class and code).
pub const ACK_HEADER: usize = 12;
/// One item of a Read Var or Write Var request.
pub const ITEM_SPEC: usize = 12;
/// Return code of an item that was read or written.
pub const SUCCESS: u8 = 0xFF;

/// Item transport sizes of a request.
pub const TS_BIT: u8 = 0x01;
pub const TS_BYTE: u8 = 0x02;
/// Data transport sizes: bits, and bytes/words/double words (lengths in bits).
const DATA_BIT: u8 = 0x03;
const DATA_BYTES: u8 = 0x04;

/// A job PDU with `param` and `data`.
pub fn job(pdu_ref: u16, param: &[u8], data: &[u8]) -> Vec<u8> {
    let mut pdu = Vec::with_capacity(JOB_HEADER + param.len() + data.len());
    pdu.extend_from_slice(&[PROTOCOL_ID, JOB, 0, 0]);
    pdu.extend_from_slice(&pdu_ref.to_be_bytes());
    pdu.extend_from_slice(&(param.len() as u16).to_be_bytes());
    pdu.extend_from_slice(&(data.len() as u16).to_be_bytes());
    pdu.extend_from_slice(param);
    pdu.extend_from_slice(data);
    pdu
}

/// Parameters of Setup Communication: one job in flight each way, `pdu_size`.
pub fn setup(pdu_size: u16) -> [u8; 8] {
    let [p0, p1] = pdu_size.to_be_bytes();
    [SETUP, 0, 0, 1, 0, 1, p0, p1]
}

/// Where an item is: S7ANY syntax with transport size, element count, DB number,
/// area code and the bit address (byte * 8 + bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemSpec {
    pub transport: u8,
    pub count: u16,
    pub db: u16,
    pub area: u8,
    pub byte: u32,
    pub bit: u8,
}

impl ItemSpec {
    fn push(&self, out: &mut Vec<u8>) {
        let address = (self.byte << 3 | u32::from(self.bit & 7)) & 0x00FF_FFFF;
        let [_, a0, a1, a2] = address.to_be_bytes();
        let [c0, c1] = self.count.to_be_bytes();
        let [d0, d1] = self.db.to_be_bytes();
        out.extend_from_slice(&[
            0x12,
            0x0A,
            0x10,
            self.transport,
            c0,
            c1,
            d0,
            d1,
            self.area,
            a0,
            a1,
            a2,
        ]);
    }
}

/// Parameters of a Read Var request.
pub fn read(items: &[ItemSpec]) -> Vec<u8> {
    let mut param = Vec::with_capacity(2 + ITEM_SPEC * items.len());
    param.extend_from_slice(&[READ, items.len() as u8]);
    for item in items {
        item.push(&mut param);
    }
    param
}

/// Parameters and data of a Write Var request of one item: a bit when the item's
/// transport size is [`TS_BIT`], bytes otherwise.
pub fn write(item: &ItemSpec, value: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut param = alloc::vec![WRITE, 1];
    item.push(&mut param);
    let (transport, length) = if item.transport == TS_BIT {
        (DATA_BIT, value.len() as u16)
    } else {
        (DATA_BYTES, (value.len() as u16).saturating_mul(8))
    };
    let mut data = alloc::vec![0, transport];
    data.extend_from_slice(&length.to_be_bytes());
    data.extend_from_slice(value);
    (param, data)
}

/// An acknowledgement, split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack<'a> {
    pub pdu_ref: u16,
    /// Error class in the high byte, error code in the low byte.
    pub error: u16,
    pub param: &'a [u8],
    pub data: &'a [u8],
}

/// Splits an acknowledgement PDU.
///
/// # Errors
/// Not an S7 acknowledgement, or lengths that do not add up.
pub fn ack(pdu: &[u8]) -> Result<Ack<'_>, String> {
    let Some(&[id, rosctr, _, _, r0, r1, p0, p1, d0, d1, class, code]) = pdu
        .get(..ACK_HEADER)
        .and_then(|h| <&[u8; 12]>::try_from(h).ok())
    else {
        return Err(format!("S7 PDU of {} bytes is truncated", pdu.len()));
    };
    if id != PROTOCOL_ID {
        return Err(format!("S7 protocol id {id:#04x}, expected 0x32"));
    }
    if rosctr != ACK && rosctr != ACK_DATA {
        return Err(format!(
            "S7 message type {rosctr}, expected an acknowledgement (2 or 3)"
        ));
    }
    let param_len = usize::from(u16::from_be_bytes([p0, p1]));
    let data_len = usize::from(u16::from_be_bytes([d0, d1]));
    if ACK_HEADER + param_len + data_len != pdu.len() {
        return Err(format!(
            "S7 header announces {param_len} parameter and {data_len} data bytes, the PDU carries {}",
            pdu.len() - ACK_HEADER
        ));
    }
    let (param, data) = pdu
        .get(ACK_HEADER..)
        .unwrap_or_default()
        .split_at_checked(param_len)
        .unwrap_or_default();
    Ok(Ack {
        pdu_ref: u16::from_be_bytes([r0, r1]),
        error: u16::from_be_bytes([class, code]),
        param,
        data,
    })
}

/// Checks that `param` starts with `function` and returns its second byte (the
/// item count of reads and writes).
///
/// # Errors
/// Another function or parameters that are too short.
pub fn function(param: &[u8], function: u8) -> Result<u8, String> {
    match param {
        [f, count, ..] if *f == function => Ok(*count),
        [f, ..] => Err(format!(
            "S7 function {f:#04x} in the answer, expected {function:#04x}"
        )),
        [] => Err(format!(
            "the answer has no parameters, expected function {function:#04x}"
        )),
    }
}

/// The PDU size granted by an answer to Setup Communication.
///
/// # Errors
/// Parameters of another function or too short.
pub fn setup_answer(param: &[u8]) -> Result<u16, String> {
    function(param, SETUP)?;
    match param.get(6..8) {
        Some(&[p0, p1]) if param.len() == 8 => Ok(u16::from_be_bytes([p0, p1])),
        _ => Err(format!(
            "Setup Communication parameters of {} bytes, expected 8",
            param.len()
        )),
    }
}

/// One item of a Read Var answer: its return code and data bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemData<'a> {
    pub code: u8,
    pub data: &'a [u8],
}

/// Bytes of data an item carries, by its data transport size and length.
fn data_bytes(transport: u8, length: u16) -> Option<usize> {
    let length = usize::from(length);
    match transport {
        // NULL (failed items), REAL, OCTET STRING: the length counts bytes.
        0x00 | 0x07 | 0x09 => Some(length),
        // BIT, BYTE/WORD/DWORD, INTEGER, DINTEGER: the length counts bits.
        0x03..=0x06 => Some(length.div_ceil(8)),
        _ => None,
    }
}

/// Splits the data of a Read Var answer into `count` items. Every item but the
/// last is padded to an even length.
///
/// # Errors
/// Truncated items, an unknown transport size or bytes left over.
pub fn read_items(data: &[u8], count: usize) -> Result<Vec<ItemData<'_>>, String> {
    let mut items = Vec::with_capacity(count);
    let mut at = 0usize;
    let mut odd_last = false;
    for index in 0..count {
        let Some(&[code, transport, l0, l1]) = data.get(at..at + 4) else {
            return Err(format!("item {index} of the answer is truncated"));
        };
        // A failed item carries no data, whatever length it announces (snap7
        // echoes the requested length; PLCs send 0).
        let len = if code == SUCCESS {
            data_bytes(transport, u16::from_be_bytes([l0, l1])).ok_or_else(|| {
                format!("item {index} has unknown transport size {transport:#04x}")
            })?
        } else {
            0
        };
        at += 4;
        let bytes = data
            .get(at..at + len)
            .ok_or_else(|| format!("item {index} announces {len} bytes, fewer arrived"))?;
        items.push(ItemData { code, data: bytes });
        at += len;
        odd_last = len % 2 == 1;
        if odd_last && index + 1 < count {
            at += 1;
        }
    }
    let rest = data
        .len()
        .checked_sub(at)
        .ok_or("the last padding byte is missing")?;
    if rest > usize::from(odd_last) {
        return Err(format!("{rest} bytes follow the last item"));
    }
    Ok(items)
}

/// Return codes of a Write Var answer, one per item.
///
/// # Errors
/// A count that does not match the data.
pub fn write_codes(data: &[u8], count: usize) -> Result<&[u8], String> {
    if data.len() != count {
        return Err(format!(
            "{} return codes for {count} written items",
            data.len()
        ));
    }
    Ok(data)
}

/// What an error class of the header means.
pub fn error_class_name(class: u8) -> &'static str {
    match class {
        0x00 => "no error",
        0x81 => "application relationship error",
        0x82 => "object definition error",
        0x83 => "no resources available",
        0x84 => "error on service processing",
        0x85 => "error on supplies",
        0x87 => "access error",
        _ => "unknown error class",
    }
}

/// What an item's return code means.
pub fn return_code_name(code: u8) -> &'static str {
    match code {
        0x01 => "hardware fault",
        0x03 => "access to the object not allowed",
        0x05 => "address out of range",
        0x06 => "data type not supported",
        0x07 => "data type inconsistent",
        0x0A => "object does not exist",
        SUCCESS => "success",
        _ => "unknown return code",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_request_items() {
        let item = ItemSpec {
            transport: TS_BYTE,
            count: 4,
            db: 1,
            area: 0x84,
            byte: 6,
            bit: 0,
        };
        let bit = ItemSpec {
            transport: TS_BIT,
            count: 1,
            db: 0,
            area: 0x83,
            byte: 10,
            bit: 1,
        };
        assert_eq!(
            read(&[item, bit]),
            [
                0x04, 0x02, 0x12, 0x0A, 0x10, 0x02, 0x00, 0x04, 0x00, 0x01, 0x84, 0x00, 0x00, 0x30,
                0x12, 0x0A, 0x10, 0x01, 0x00, 0x01, 0x00, 0x00, 0x83, 0x00, 0x00, 0x51
            ]
        );
        assert_eq!(
            job(7, &[0x04, 0x00], &[]),
            [
                0x32, 0x01, 0x00, 0x00, 0x00, 0x07, 0x00, 0x02, 0x00, 0x00, 0x04, 0x00
            ]
        );
    }

    #[test]
    fn acknowledgements() {
        let pdu = [
            0x32, 0x03, 0, 0, 0, 5, 0, 2, 0, 5, 0, 0, 0x04, 0x01, 0xFF, 0x04, 0x00, 0x08, 0x2A,
        ];
        let ack = ack(&pdu).expect("valid");
        assert_eq!((ack.pdu_ref, ack.error), (5, 0));
        assert_eq!(function(ack.param, READ), Ok(1));
        assert_eq!(
            read_items(ack.data, 1),
            Ok(alloc::vec![ItemData {
                code: 0xFF,
                data: &[0x2A]
            }])
        );
        assert!(super::ack(&pdu[..18]).is_err());
        assert!(super::ack(&[0x32, 0x01, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(function(ack.param, WRITE).is_err());
        assert_eq!(setup_answer(&[0xF0, 0, 0, 1, 0, 1, 0x01, 0xE0]), Ok(480));
        assert!(setup_answer(&[0xF0, 0, 0, 1, 0, 1, 0x01]).is_err());
    }

    #[test]
    fn items_are_padded_except_the_last() {
        let data = [
            0xFF, 0x03, 0x00, 0x01, 0x01, 0x00, // bit, padded
            0x0A, 0x00, 0x00, 0x00, // failed item
            0xFF, 0x09, 0x00, 0x03, b'a', b'b', b'c', // octet string, last: no padding
        ];
        let items = read_items(&data, 3).expect("valid");
        assert_eq!(items[0].data, [1]);
        assert_eq!((items[1].code, items[1].data), (0x0A, &[][..]));
        assert_eq!(items[2].data, b"abc");
        let mut padded = data.to_vec();
        padded.push(0);
        assert!(read_items(&padded, 3).is_ok(), "a padded last item");
        padded.push(0);
        assert!(read_items(&padded, 3).is_err());
        assert!(read_items(&data[..5], 1).is_ok());
        assert!(read_items(&data[..5], 2).is_err());
        assert!(read_items(&[0xFF, 0x42, 0, 1, 0], 1).is_err());
        // snap7 echoes the requested length on a failed item, with no data.
        let snap7 = [0xFF, 0x03, 0x00, 0x01, 0x01, 0x49, 0x0A, 0x00, 0x00, 0x04];
        let items = read_items(&snap7, 2).expect("valid");
        assert_eq!((items[1].code, items[1].data), (0x0A, &[][..]));
    }

    #[test]
    fn write_requests() {
        let bit = ItemSpec {
            transport: TS_BIT,
            count: 1,
            db: 1,
            area: 0x84,
            byte: 6,
            bit: 0,
        };
        assert_eq!(write(&bit, &[1]).1, [0x00, 0x03, 0x00, 0x01, 0x01]);
        let word = ItemSpec {
            transport: TS_BYTE,
            count: 2,
            ..bit
        };
        let (param, data) = write(&word, &[0x12, 0x34]);
        assert_eq!(param[..4], [0x05, 0x01, 0x12, 0x0A]);
        assert_eq!(data, [0x00, 0x04, 0x00, 0x10, 0x12, 0x34]);
        assert_eq!(write_codes(&[0xFF], 1), Ok(&[0xFF][..]));
        assert!(write_codes(&[], 1).is_err());
    }
}
