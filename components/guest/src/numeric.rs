//! Numbers as devices store them: byte order, type decoding and encoding.
//!
//! Decoding and encoding work on big-endian bytes (`A B C D` for a 32-bit value);
//! [`reorder`] turns a device's wire order into that and back.

use alloc::string::String;
use alloc::vec::Vec;

/// The order in which the bytes of the big-endian value `A B C D` arrive on the wire.
///
/// For 64-bit values (`A..H`) the rule applies per 32-bit half, as seed 003's
/// decoder does: `CDAB` swaps the two halves (`EF GH AB CD`), `BADC` swaps the
/// bytes in each register; `DCBA` reverses every byte (`HG FE DC BA`, a
/// little-endian value). `GHEFCDAB` reverses the register order (`GH EF CD AB`;
/// for 32-bit values the same as `CDAB`). For 16-bit values and strings only the
/// byte swap applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    Abcd,
    Badc,
    Cdab,
    Dcba,
    Ghefcdab,
}

impl ByteOrder {
    fn swaps_bytes(self) -> bool {
        matches!(self, ByteOrder::Badc | ByteOrder::Dcba)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataType {
    Bool,
    Int16,
    Uint16,
    Int32,
    Uint32,
    Int64,
    Uint64,
    Float32,
    Float64,
    Bcd16,
    Bcd32,
    /// Characters (one byte each).
    String(u32),
}

impl DataType {
    /// The type as a tag's `dataType` names it.
    pub fn name(self) -> &'static str {
        match self {
            DataType::Bool => "BOOL",
            DataType::Int16 => "INT16",
            DataType::Uint16 => "UINT16",
            DataType::Int32 => "INT32",
            DataType::Uint32 => "UINT32",
            DataType::Int64 => "INT64",
            DataType::Uint64 => "UINT64",
            DataType::Float32 => "FLOAT32",
            DataType::Float64 => "FLOAT64",
            DataType::Bcd16 => "BCD16",
            DataType::Bcd32 => "BCD32",
            DataType::String(_) => "STRING",
        }
    }

    /// Bytes the value occupies in registers (a BOOL occupies one register when it
    /// is stored in one; bit-addressed BOOLs have no bytes).
    pub fn byte_len(self) -> usize {
        match self {
            DataType::Bool | DataType::Int16 | DataType::Uint16 | DataType::Bcd16 => 2,
            DataType::Int32 | DataType::Uint32 | DataType::Float32 | DataType::Bcd32 => 4,
            DataType::Int64 | DataType::Uint64 | DataType::Float64 => 8,
            DataType::String(chars) => (chars as usize).div_ceil(2) * 2,
        }
    }
}

/// The elements of an array tag: its `length` when that is 2 or more and the
/// type is not a string (whose `length` counts characters); `None` for a tag
/// of one value (`length` 0 or 1, the seed's default).
pub fn array_len(data_type: DataType, length: u32) -> Option<u32> {
    (!matches!(data_type, DataType::String(_)) && length >= 2).then_some(length)
}

/// A decoded value.
#[derive(Debug, Clone, PartialEq)]
pub enum Number {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Text(String),
}

/// Rearranges `bytes` between wire order and big-endian, in place. Every order is
/// its own inverse, so the same call serves reading and writing.
pub fn reorder(bytes: &mut [u8], order: ByteOrder) {
    let words = bytes.len() / 2;
    let multi_word = bytes.len() >= 4 && bytes.len().is_multiple_of(2);
    match order {
        // A 64-bit value: its 32-bit halves change places, each kept whole.
        ByteOrder::Cdab if bytes.len() == 8 => bytes.rotate_left(4),
        ByteOrder::Cdab | ByteOrder::Dcba | ByteOrder::Ghefcdab if multi_word => {
            for i in 0..words / 2 {
                let j = words - 1 - i;
                bytes.swap(2 * i, 2 * j);
                bytes.swap(2 * i + 1, 2 * j + 1);
            }
        }
        _ => {}
    }
    if order.swaps_bytes() {
        for word in bytes.chunks_exact_mut(2) {
            word.swap(0, 1);
        }
    }
}

/// Like [`reorder`] for a value of `data_type`: strings and 16-bit values only
/// take the byte swap.
pub fn reorder_for(bytes: &mut [u8], data_type: DataType, order: ByteOrder) {
    let effective = match data_type {
        DataType::String(_)
        | DataType::Bool
        | DataType::Int16
        | DataType::Uint16
        | DataType::Bcd16 => {
            if order.swaps_bytes() {
                ByteOrder::Badc
            } else {
                ByteOrder::Abcd
            }
        }
        _ => order,
    };
    reorder(bytes, effective);
}

/// Like [`reorder_for`] for each of the consecutive values of `data_type` in
/// `bytes` (an array tag's): every element is laid out as a single value is.
pub fn reorder_each(bytes: &mut [u8], data_type: DataType, order: ByteOrder) {
    for element in bytes.chunks_exact_mut(data_type.byte_len()) {
        reorder_for(element, data_type, order);
    }
}

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than the type needs.
    Short { needed: usize, got: usize },
    /// A BCD nibble above 9.
    InvalidBcd,
    /// A float that is NaN or infinite.
    NotFinite,
}

fn be<const N: usize>(bytes: &[u8]) -> Result<[u8; N], DecodeError> {
    bytes
        .get(..N)
        .and_then(|b| b.try_into().ok())
        .ok_or(DecodeError::Short {
            needed: N,
            got: bytes.len(),
        })
}

fn bcd(mut value: u64, digits: u32) -> Result<u64, DecodeError> {
    let mut out = 0u64;
    let mut scale = 1u64;
    for _ in 0..digits {
        let nibble = value & 0xF;
        if nibble > 9 {
            return Err(DecodeError::InvalidBcd);
        }
        out += nibble * scale;
        scale *= 10;
        value >>= 4;
    }
    Ok(out)
}

fn finite(value: f64) -> Result<Number, DecodeError> {
    if value.is_finite() {
        Ok(Number::Float(value))
    } else {
        Err(DecodeError::NotFinite)
    }
}

/// Decodes `bytes` as they came from the device: put in big-endian order by
/// `order` (as the `swap_bytes` stage does), then decoded as `data_type` (as
/// the `decode` stage does).
///
/// # Errors
/// As [`decode`].
pub fn decode_wire(
    data_type: DataType,
    order: ByteOrder,
    bytes: &[u8],
) -> Result<Number, DecodeError> {
    let mut bytes = bytes.to_vec();
    reorder_for(&mut bytes, data_type, order);
    decode(data_type, &bytes)
}

/// Decodes the `count` elements of an array tag from its big-endian `bytes`,
/// each as [`decode`] does one value.
///
/// # Errors
/// Fewer bytes than `count` elements take, or an element that does not decode:
/// an array is whole or BAD.
pub fn decode_each(
    data_type: DataType,
    bytes: &[u8],
    count: u32,
) -> Result<Vec<Number>, DecodeError> {
    let width = data_type.byte_len();
    let needed = width.saturating_mul(count as usize);
    let bytes = bytes.get(..needed).ok_or(DecodeError::Short {
        needed,
        got: bytes.len(),
    })?;
    bytes
        .chunks_exact(width)
        .map(|element| decode(data_type, element))
        .collect()
}

/// [`decode_each`] of bytes as they came from the device (see [`decode_wire`]).
///
/// # Errors
/// As [`decode_each`].
pub fn decode_wire_each(
    data_type: DataType,
    order: ByteOrder,
    bytes: &[u8],
    count: u32,
) -> Result<Vec<Number>, DecodeError> {
    let mut bytes = bytes.to_vec();
    reorder_each(&mut bytes, data_type, order);
    decode_each(data_type, &bytes, count)
}

/// Decodes big-endian `bytes` as `data_type`.
///
/// # Errors
/// Too few bytes, an invalid BCD digit or a non-finite float: the value is BAD.
pub fn decode(data_type: DataType, bytes: &[u8]) -> Result<Number, DecodeError> {
    Ok(match data_type {
        DataType::Bool => Number::Bool(u16::from_be_bytes(be(bytes)?) != 0),
        DataType::Int16 => Number::Int(i16::from_be_bytes(be(bytes)?).into()),
        DataType::Uint16 => Number::Int(u16::from_be_bytes(be(bytes)?).into()),
        DataType::Int32 => Number::Int(i32::from_be_bytes(be(bytes)?).into()),
        DataType::Uint32 => Number::Int(u32::from_be_bytes(be(bytes)?).into()),
        DataType::Int64 => Number::Int(i64::from_be_bytes(be(bytes)?)),
        DataType::Uint64 => Number::Uint(u64::from_be_bytes(be(bytes)?)),
        DataType::Float32 => return finite(f32::from_be_bytes(be(bytes)?).into()),
        DataType::Float64 => return finite(f64::from_be_bytes(be(bytes)?)),
        DataType::Bcd16 => Number::Int(bcd(u16::from_be_bytes(be(bytes)?).into(), 4)? as i64),
        DataType::Bcd32 => Number::Int(bcd(u32::from_be_bytes(be(bytes)?).into(), 8)? as i64),
        DataType::String(chars) => {
            let len = chars as usize;
            let raw = bytes.get(..len).ok_or(DecodeError::Short {
                needed: len,
                got: bytes.len(),
            })?;
            let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
            let text = String::from_utf8_lossy(&raw[..end]);
            Number::Text(String::from(text.trim_end()))
        }
    })
}

/// Why a value could not be encoded for a tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EncodeError {
    /// The value does not fit the type's range (or is not a whole number for an integer type).
    OutOfRange,
    /// The value's kind does not fit the type (text for a number, ...).
    WrongKind,
}

fn integer(value: &Number) -> Result<i128, EncodeError> {
    match value {
        Number::Bool(b) => Ok(i128::from(*b)),
        Number::Int(v) => Ok(i128::from(*v)),
        Number::Uint(v) => Ok(i128::from(*v)),
        Number::Float(f) if f.is_finite() && *f == (*f as i128) as f64 => Ok(*f as i128),
        Number::Float(_) => Err(EncodeError::OutOfRange),
        Number::Text(_) => Err(EncodeError::WrongKind),
    }
}

fn float(value: &Number) -> Result<f64, EncodeError> {
    match value {
        Number::Int(v) => Ok(*v as f64),
        Number::Uint(v) => Ok(*v as f64),
        Number::Float(f) if f.is_finite() => Ok(*f),
        Number::Float(_) => Err(EncodeError::OutOfRange),
        Number::Bool(_) | Number::Text(_) => Err(EncodeError::WrongKind),
    }
}

fn to_bcd(value: i128, digits: u32) -> Result<u64, EncodeError> {
    let max = 10i128.pow(digits);
    if !(0..max).contains(&value) {
        return Err(EncodeError::OutOfRange);
    }
    let mut rest = value as u64;
    let mut out = 0u64;
    for i in 0..digits {
        out |= (rest % 10) << (4 * i);
        rest /= 10;
    }
    Ok(out)
}

fn fit<T: TryFrom<i128>>(value: i128) -> Result<T, EncodeError> {
    T::try_from(value).map_err(|_| EncodeError::OutOfRange)
}

/// Encodes `value` as big-endian bytes of `data_type`.
///
/// # Errors
/// A value out of the type's range or of the wrong kind.
pub fn encode(data_type: DataType, value: &Number) -> Result<Vec<u8>, EncodeError> {
    Ok(match data_type {
        DataType::Bool => {
            let on = integer(value)?;
            if !(0..=1).contains(&on) {
                return Err(EncodeError::OutOfRange);
            }
            (on as u16).to_be_bytes().to_vec()
        }
        DataType::Int16 => fit::<i16>(integer(value)?)?.to_be_bytes().to_vec(),
        DataType::Uint16 => fit::<u16>(integer(value)?)?.to_be_bytes().to_vec(),
        DataType::Int32 => fit::<i32>(integer(value)?)?.to_be_bytes().to_vec(),
        DataType::Uint32 => fit::<u32>(integer(value)?)?.to_be_bytes().to_vec(),
        DataType::Int64 => fit::<i64>(integer(value)?)?.to_be_bytes().to_vec(),
        DataType::Uint64 => fit::<u64>(integer(value)?)?.to_be_bytes().to_vec(),
        DataType::Float32 => {
            let v = float(value)?;
            if v.abs() > f32::MAX as f64 {
                return Err(EncodeError::OutOfRange);
            }
            (v as f32).to_be_bytes().to_vec()
        }
        DataType::Float64 => float(value)?.to_be_bytes().to_vec(),
        DataType::Bcd16 => (to_bcd(integer(value)?, 4)? as u16).to_be_bytes().to_vec(),
        DataType::Bcd32 => (to_bcd(integer(value)?, 8)? as u32).to_be_bytes().to_vec(),
        DataType::String(chars) => {
            let Number::Text(text) = value else {
                return Err(EncodeError::WrongKind);
            };
            if text.len() > chars as usize {
                return Err(EncodeError::OutOfRange);
            }
            let mut bytes = Vec::from(text.as_bytes());
            bytes.resize(data_type.byte_len(), 0);
            bytes
        }
    })
}

/// The wire bytes of an array tag's elements: each encoded as [`encode`] does
/// one value and laid out in `order`, one after the other.
///
/// # Errors
/// An element out of the type's range or of the wrong kind.
pub fn encode_each(
    data_type: DataType,
    order: ByteOrder,
    values: &[Number],
) -> Result<Vec<u8>, EncodeError> {
    let mut bytes = Vec::with_capacity(values.len() * data_type.byte_len());
    for value in values {
        let start = bytes.len();
        bytes.extend(encode(data_type, value)?);
        reorder_for(&mut bytes[start..], data_type, order);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_orders_of_a_float32() {
        // 1.5f32 = 0x3FC00000 -> A=3F B=C0 C=00 D=00
        for (order, wire) in [
            (ByteOrder::Abcd, [0x3F, 0xC0, 0x00, 0x00]),
            (ByteOrder::Badc, [0xC0, 0x3F, 0x00, 0x00]),
            (ByteOrder::Cdab, [0x00, 0x00, 0x3F, 0xC0]),
            (ByteOrder::Dcba, [0x00, 0x00, 0xC0, 0x3F]),
        ] {
            let mut bytes = wire;
            reorder(&mut bytes, order);
            assert_eq!(
                decode(DataType::Float32, &bytes),
                Ok(Number::Float(1.5)),
                "{order:?}"
            );
            reorder(&mut bytes, order);
            assert_eq!(bytes, wire, "reordering is its own inverse");
        }
    }

    #[test]
    fn byte_orders_of_a_64_bit_value() {
        // A..H = 0A 0B 0C 0D 0E 0F 10 11 (big-endian).
        let value = [0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x11];
        for (order, wire) in [
            (
                ByteOrder::Abcd,
                [0x0A, 0x0B, 0x0C, 0x0D, 0x0E, 0x0F, 0x10, 0x11],
            ),
            (
                ByteOrder::Badc,
                [0x0B, 0x0A, 0x0D, 0x0C, 0x0F, 0x0E, 0x11, 0x10],
            ),
            // The seed's rule: the 32-bit halves swapped (EF GH AB CD).
            (
                ByteOrder::Cdab,
                [0x0E, 0x0F, 0x10, 0x11, 0x0A, 0x0B, 0x0C, 0x0D],
            ),
            (
                ByteOrder::Dcba,
                [0x11, 0x10, 0x0F, 0x0E, 0x0D, 0x0C, 0x0B, 0x0A],
            ),
            // The registers reversed (GH EF CD AB).
            (
                ByteOrder::Ghefcdab,
                [0x10, 0x11, 0x0E, 0x0F, 0x0C, 0x0D, 0x0A, 0x0B],
            ),
        ] {
            let mut bytes = wire;
            reorder(&mut bytes, order);
            assert_eq!(bytes, value, "{order:?}");
            reorder(&mut bytes, order);
            assert_eq!(bytes, wire, "{order:?} is its own inverse");
        }
        // 1234.5678 as FLOAT64 with its halves swapped, as seed 003 decodes it.
        let be = 1234.5678f64.to_be_bytes();
        let wire = [be[4], be[5], be[6], be[7], be[0], be[1], be[2], be[3]];
        assert_eq!(
            decode_wire(DataType::Float64, ByteOrder::Cdab, &wire),
            Ok(Number::Float(1234.5678))
        );
        // For 32-bit values GHEFCDAB is CDAB; for 16-bit values it changes nothing.
        let mut word = [1, 2, 3, 4];
        reorder(&mut word, ByteOrder::Ghefcdab);
        assert_eq!(word, [3, 4, 1, 2]);
        let mut short = [1, 2];
        reorder_for(&mut short, DataType::Int16, ByteOrder::Ghefcdab);
        assert_eq!(short, [1, 2]);
    }

    #[test]
    fn arrays_take_the_single_value_rules_per_element() {
        assert_eq!(array_len(DataType::Int16, 4), Some(4));
        assert_eq!(array_len(DataType::Int16, 1), None);
        assert_eq!(array_len(DataType::String(4), 4), None);
        let values = [Number::Float(1.5), Number::Int(-2)];
        let wire = encode_each(DataType::Float32, ByteOrder::Cdab, &values).unwrap();
        // 1.5 is 3F C0 00 00 and -2.0 is C0 00 00 00, each with its words swapped.
        assert_eq!(wire, [0x00, 0x00, 0x3F, 0xC0, 0x00, 0x00, 0xC0, 0x00]);
        assert_eq!(
            decode_wire_each(DataType::Float32, ByteOrder::Cdab, &wire, 2),
            Ok(alloc::vec![Number::Float(1.5), Number::Float(-2.0)])
        );
        assert_eq!(
            decode_each(DataType::Int16, &[0, 1, 0xFF], 2),
            Err(DecodeError::Short { needed: 4, got: 3 })
        );
        assert_eq!(
            decode_each(DataType::Bcd16, &[0x00, 0x12, 0x00, 0x1A], 2),
            Err(DecodeError::InvalidBcd),
            "one bad element makes the array BAD"
        );
        assert_eq!(
            encode_each(
                DataType::Int16,
                ByteOrder::Abcd,
                &[Number::Int(1), Number::Int(70_000)]
            ),
            Err(EncodeError::OutOfRange)
        );
    }

    #[test]
    fn bcd_and_errors() {
        assert_eq!(
            decode(DataType::Bcd16, &[0x12, 0x34]),
            Ok(Number::Int(1234))
        );
        assert_eq!(
            decode(DataType::Bcd32, &[0x00, 0x12, 0x34, 0x56]),
            Ok(Number::Int(123456))
        );
        assert_eq!(
            decode(DataType::Bcd16, &[0x1A, 0x34]),
            Err(DecodeError::InvalidBcd)
        );
        assert_eq!(
            decode(DataType::Float32, &[0x7F, 0xC0, 0, 0]),
            Err(DecodeError::NotFinite)
        );
        assert!(matches!(
            decode(DataType::Int32, &[1, 2]),
            Err(DecodeError::Short { .. })
        ));
        assert_eq!(
            encode(DataType::Bcd16, &Number::Int(1234)),
            Ok(alloc::vec![0x12, 0x34])
        );
        assert_eq!(
            encode(DataType::Int16, &Number::Int(40000)),
            Err(EncodeError::OutOfRange)
        );
    }

    #[test]
    fn strings_stop_at_nul_and_trailing_spaces() {
        assert_eq!(
            decode(DataType::String(6), b"AB C\0\0"),
            Ok(Number::Text("AB C".into()))
        );
        assert_eq!(
            encode(DataType::String(3), &Number::Text("AB".into())),
            Ok(alloc::vec![b'A', b'B', 0, 0])
        );
    }
}
