//! Decoder `binary`: a message is packed bytes, and each tag's `address` is
//! where its value starts: a byte offset (`0`, `12`, `0x0c`), or for a BOOL a
//! byte and a bit (`3.0` to `3.7`, bit 0 the least significant). A value takes
//! the bytes a Modbus register of its `dataType` takes (2 for 16-bit types, 4
//! for 32-bit, 8 for 64-bit, a STRING its `length` rounded up to even; an array
//! tag `length` times as many, a BOOL array consecutive bits), in the tag's
//! `byteOrder`: the device's pipeline decodes them exactly as it decodes
//! registers. A message too short for a tag refuses that tag.
//!
//! A write publishes the value's bytes alone, in the tag's type and byte order
//! (as a register write carries them; a BOOL as one byte, 0 or 1), on the
//! channel's `commandTopic`. Settings: `commandTopic` (the engine fills it in).
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use sluice_guest::columns::Columns;
use sluice_guest::decoder::{CommandTopic, Decoder, Field, Outgoing, Refusal, Written, typed};
use sluice_guest::numeric::{ByteOrder, DataType, Number, encode, encode_each, reorder_for};
use sluice_guest::settings::unknown_key;
use sluice_guest::stages::{Issue, Settings};

sluice_guest::builtin_decoder_component!(BinaryDecoder);

/// The `binary` decoder of one device.
pub struct BinaryDecoder {
    fields: Vec<BinaryField>,
    command_topic: CommandTopic,
}

/// Where a tag's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// `count` bits from bit `bit` of byte `byte` on (BOOL).
    Bits { byte: usize, bit: u8, count: usize },
    /// `len` bytes from `start`.
    Bytes { start: usize, len: usize },
}

struct BinaryField {
    key: String,
    place: Place,
    data_type: DataType,
    byte_order: ByteOrder,
    array_len: Option<u32>,
    readable: bool,
    writable: bool,
}

impl Decoder for BinaryDecoder {
    fn create(settings: &Settings<'_>, fields: &[Field<'_>]) -> Result<Self, Vec<Issue>> {
        let mut issues = Vec::new();
        let mut command_topic = CommandTopic::default();
        for (key, value) in settings {
            if !command_topic.take(key, value, &mut issues) {
                issues.push(Issue::new(None, key, unknown_key(key, &["commandTopic"])));
            }
        }
        let mut built = Vec::with_capacity(fields.len());
        for (i, field) in fields.iter().enumerate() {
            match place(field) {
                Ok(place) => built.push(BinaryField {
                    key: field.key.to_string(),
                    place,
                    data_type: field.tag.data_type,
                    byte_order: field.tag.byte_order,
                    array_len: field.tag.array_len,
                    readable: field.readable,
                    writable: field.writable,
                }),
                Err(message) => issues.push(Issue::new(Some(i as u32), "address", message)),
            }
        }
        if !issues.is_empty() {
            return Err(issues);
        }
        Ok(Self {
            fields: built,
            command_topic,
        })
    }

    fn decode(
        &self,
        _topic: &str,
        payload: &[u8],
        ts_ms: i64,
        out: &mut Columns,
        refusals: &mut Vec<Refusal>,
    ) {
        for (i, field) in self.fields.iter().enumerate() {
            if !field.readable {
                continue;
            }
            let tag = i as u32;
            let (first, end) = field.place.byte_range();
            if payload.len() < end {
                refusals.push(Refusal {
                    tag: Some(tag),
                    message: format!(
                        "the message has {} bytes; `{}` takes bytes {first} to {}",
                        payload.len(),
                        field.key,
                        end - 1
                    ),
                });
                continue;
            }
            match field.place {
                Place::Bytes { start, len } => {
                    out.push_raw(tag, &payload[start..start + len], ts_ms)
                }
                Place::Bits { byte, bit, count } => {
                    let bits = (0..count).map(|n| {
                        let at = usize::from(bit) + n;
                        Number::Bool(payload[byte + at / 8] >> (at % 8) & 1 == 1)
                    });
                    if field.array_len.is_some() {
                        out.push_array(tag, bits, ts_ms);
                    } else {
                        bits.for_each(|b| out.push_number(tag, b, ts_ms));
                    }
                }
            }
        }
    }

    fn encode(&self, tag: u32, value: &Written) -> Result<Outgoing, String> {
        let field = self
            .fields
            .get(tag as usize)
            .filter(|f| f.writable)
            .ok_or("the tag is not writable")?;
        let topic = self.command_topic.topic()?;
        let shown = |e| format!("{e:?} for {}", field.data_type.name());
        let payload = match (value, field.array_len, field.place) {
            (Written::One(number), None, Place::Bits { .. }) => {
                let Number::Bool(on) = typed(DataType::Bool, number)? else {
                    return Err("not a BOOL".into());
                };
                alloc::vec![u8::from(on)]
            }
            (Written::Array(numbers), Some(len), Place::Bits { .. })
                if numbers.len() == len as usize =>
            {
                let mut bytes = alloc::vec![0u8; numbers.len().div_ceil(8)];
                for (n, number) in numbers.iter().enumerate() {
                    if typed(DataType::Bool, number)? == Number::Bool(true) {
                        bytes[n / 8] |= 1 << (n % 8);
                    }
                }
                bytes
            }
            (Written::One(number), None, Place::Bytes { .. }) => {
                let mut bytes = encode(field.data_type, number).map_err(shown)?;
                reorder_for(&mut bytes, field.data_type, field.byte_order);
                bytes
            }
            (Written::Array(numbers), Some(len), Place::Bytes { .. })
                if numbers.len() == len as usize =>
            {
                encode_each(field.data_type, field.byte_order, numbers).map_err(shown)?
            }
            (Written::Array(_), None, _) => {
                return Err("the tag holds one value, not an array".into());
            }
            (_, Some(len), _) => return Err(format!("the tag is an array of {len} values")),
        };
        Ok(Outgoing { topic, payload })
    }
}

impl Place {
    /// The first byte it reads and the one past its last.
    fn byte_range(self) -> (usize, usize) {
        match self {
            Place::Bits { byte, bit, count } => {
                (byte, byte + (usize::from(bit) + count).div_ceil(8))
            }
            Place::Bytes { start, len } => (start, start + len),
        }
    }
}

/// Where `field`'s value is, from its address.
fn place(field: &Field<'_>) -> Result<Place, String> {
    let address = field.address.trim();
    let count = field.tag.array_len.unwrap_or(1) as usize;
    let (byte, bit) = match address.split_once('.') {
        Some((byte, bit)) => (byte, Some(bit)),
        None => (address, None),
    };
    let byte = offset(byte).ok_or_else(|| {
        format!("`{address}` is not a byte offset (`0`, `12`, `0x0c`; a BOOL `3.0` to `3.7`)")
    })?;
    match (field.tag.data_type, bit) {
        (DataType::Bool, Some(bit)) => match bit.parse::<u8>() {
            Ok(bit) if bit < 8 => Ok(Place::Bits { byte, bit, count }),
            _ => Err(format!("`{address}`: a bit is 0 to 7")),
        },
        (DataType::Bool, None) => Err(format!(
            "`{address}`: a BOOL is one bit: give its byte and bit (`{address}.0`)"
        )),
        (other, Some(_)) => Err(format!(
            "`{address}`: only a BOOL takes a bit; a {} starts at a byte",
            other.name()
        )),
        (data_type, None) => Ok(Place::Bytes {
            start: byte,
            len: data_type.byte_len() * count,
        }),
    }
}

fn offset(text: &str) -> Option<usize> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => usize::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    };
    // A message is at most a few MiB: an offset past 16 MiB is a mistake.
    parsed.filter(|o| *o < 1 << 24)
}

#[cfg(test)]
mod tests;
