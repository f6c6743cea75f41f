//! S7 addresses as users write them (case-insensitive, an optional leading `%`).
//!
//! - Data blocks: `DB1.0` (byte 0 of DB 1), `DB1.6.0` (bit 0 of byte 6), and the
//!   Step 7 forms `DB1.DBX6.0` (bit), `DB1.DBB4` (byte), `DB1.DBW4` (word),
//!   `DB1.DBD0` (double word).
//! - Flags `M`, inputs `I` (German `E`), outputs `Q` (German `A`): `M10.1` or
//!   `MX10.1` (bit), `M10` (start byte), `MB10`, `MW20`, `MD30`.
//! - V memory of the S7-200 and S7-200 SMART, which is DB 1: `V10.2`, `V100`,
//!   `VB100`, `VW100`, `VD100`.
//!
//! A bit is 0 to 7. The size letter (`B` 1 byte, `W` 2, `D` 4) must match the
//! tag's data type; `B` may also start a STRING or a 64-bit value, which have no
//! letter of their own.

use alloc::format;
use alloc::string::String;

use sluice_guest::numeric::DataType;

/// Memory areas and their S7 area codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Area {
    Inputs,
    Outputs,
    Flags,
    DataBlock,
}

impl Area {
    pub fn code(self) -> u8 {
        match self {
            Area::Inputs => 0x81,
            Area::Outputs => 0x82,
            Area::Flags => 0x83,
            Area::DataBlock => 0x84,
        }
    }
}

/// The first byte past what the 3-byte bit address of an item can reach.
pub const BYTE_LIMIT: u32 = 1 << 21;

/// A parsed address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Address {
    pub area: Area,
    /// DB number; 0 outside data blocks.
    pub db: u16,
    pub byte: u32,
    pub bit: Option<u8>,
    /// Bytes named by a size letter (`B` 1, `W` 2, `D` 4).
    pub width: Option<u8>,
}

fn usage(text: &str, v_area: bool) -> String {
    let v = if v_area {
        ", V10.2 / VB100 / VW100 / VD100"
    } else {
        ""
    };
    format!(
        "`{text}` is not an S7 address: use DB1.DBX6.0 / DB1.DBB4 / DB1.DBW4 / DB1.DBD0 / DB1.4 / DB1.6.0, \
         M10.1 / MB10 / MW10 / MD10, I0.0 / IB0 / IW0 / ID0 or Q0.0 / QB0 / QW0 / QD0{v}"
    )
}

/// Decimal digits only (no sign), at most 7 of them.
fn number(digits: &str) -> Option<u32> {
    if digits.is_empty() || digits.len() > 7 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Byte, bit and size letter of the part after the area: `X6.0`, `B4`, `W4`,
/// `D0`, `6` or `6.0`.
fn offset(spec: &str, text: &str, v_area: bool) -> Result<(u32, Option<u8>, Option<u8>), String> {
    let (letter, rest) = match spec.as_bytes().first() {
        Some(b'X') => (Some(0), &spec[1..]),
        Some(b'B') => (Some(1), &spec[1..]),
        Some(b'W') => (Some(2), &spec[1..]),
        Some(b'D') => (Some(4), &spec[1..]),
        _ => (None, spec),
    };
    let (byte, bit) = match rest.split_once('.') {
        Some((byte, bit)) => (byte, Some(bit)),
        None => (rest, None),
    };
    let byte = number(byte).ok_or_else(|| usage(text, v_area))?;
    if byte >= BYTE_LIMIT {
        return Err(format!(
            "byte {byte} of `{text}` is past the last addressable byte ({})",
            BYTE_LIMIT - 1
        ));
    }
    let bit = match bit {
        Some(bit) => Some(
            number(bit)
                .filter(|b| *b < 8)
                .map(|b| b as u8)
                .ok_or_else(|| format!("bit `{bit}` of `{text}` must be 0 to 7"))?,
        ),
        None => None,
    };
    match (letter, bit) {
        (Some(0), None) => Err(format!(
            "`{text}` names a bit without its number: write it as BYTE.BIT, e.g. `{text}.0`"
        )),
        (Some(0), bit) => Ok((byte, bit, None)),
        (Some(_), Some(_)) => Err(format!(
            "`{text}`: a byte, word or double word address takes no bit; use the X form for a bit"
        )),
        (width, bit) => Ok((byte, bit, width)),
    }
}

/// Parses an address; `v_area` allows the V area of the S7-200 families.
///
/// # Errors
/// A message saying which forms are accepted.
pub fn parse(text: &str, v_area: bool) -> Result<Address, String> {
    let trimmed = text.trim();
    let upper = trimmed
        .strip_prefix('%')
        .unwrap_or(trimmed)
        .to_ascii_uppercase();
    if let Some(rest) = upper.strip_prefix("DB") {
        let (db, spec) = rest.split_once('.').ok_or_else(|| usage(text, v_area))?;
        let db = number(db)
            .filter(|n| (1..=0xFFFF).contains(n))
            .ok_or_else(|| format!("DB number in `{text}` must be 1 to 65535"))?;
        let spec = match spec.strip_prefix("DB") {
            Some(sized) if sized.starts_with(['X', 'B', 'W', 'D']) => sized,
            Some(_) => return Err(usage(text, v_area)),
            None if spec.starts_with(|c: char| c.is_ascii_digit()) => spec,
            None => return Err(usage(text, v_area)),
        };
        let (byte, bit, width) = offset(spec, text, v_area)?;
        return Ok(Address {
            area: Area::DataBlock,
            db: db as u16,
            byte,
            bit,
            width,
        });
    }
    let mut chars = upper.chars();
    let (area, db) = match chars.next() {
        Some('M') => (Area::Flags, 0),
        Some('I' | 'E') => (Area::Inputs, 0),
        Some('Q' | 'A') => (Area::Outputs, 0),
        Some('V') if v_area => (Area::DataBlock, 1),
        Some('V') => {
            return Err(format!(
                "`{text}`: the V area exists only on the S7-200 and S7-200 SMART (plcType S200 or S200_SMART)"
            ));
        }
        _ => return Err(usage(text, v_area)),
    };
    let (byte, bit, width) = offset(chars.as_str(), text, v_area)?;
    Ok(Address {
        area,
        db,
        byte,
        bit,
        width,
    })
}

/// Bytes a value of `data_type` occupies at `address` (1 for a bit).
///
/// # Errors
/// A BOOL without a bit, a bit for another type, or a size letter that does not
/// match the type.
pub fn byte_len(address: &Address, data_type: DataType, text: &str) -> Result<u32, String> {
    let name = data_type.name();
    let size = match data_type {
        DataType::Bool => {
            return if address.bit.is_some() {
                Ok(1)
            } else {
                Err(format!(
                    "`{text}`: a BOOL needs a bit address such as DB1.DBX0.0, M10.1 or I0.0"
                ))
            };
        }
        _ if address.bit.is_some() => {
            return Err(format!(
                "`{text}` addresses a single bit, but a {name} needs a byte address"
            ));
        }
        DataType::Int16 | DataType::Uint16 | DataType::Bcd16 => 2,
        DataType::Int32 | DataType::Uint32 | DataType::Float32 | DataType::Bcd32 => 4,
        DataType::Int64 | DataType::Uint64 | DataType::Float64 => 8,
        DataType::String(chars) => chars,
    };
    let starts_anything = matches!(
        data_type,
        DataType::String(_) | DataType::Int64 | DataType::Uint64 | DataType::Float64
    );
    match address.width {
        Some(width) if u32::from(width) != size && !(width == 1 && starts_anything) => {
            let letter = match width {
                1 => "B (byte)",
                2 => "W (word)",
                _ => "D (double word)",
            };
            let fitting = match size {
                2 => "a W address",
                4 => "a D address",
                _ => "a B address or a plain byte address",
            };
            Err(format!(
                "`{text}`: the size letter {letter} covers {width} byte(s), but a {name} takes {size}; use {fitting}"
            ))
        }
        _ => Ok(size),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(area: Area, db: u16, byte: u32, bit: Option<u8>, width: Option<u8>) -> Address {
        Address {
            area,
            db,
            byte,
            bit,
            width,
        }
    }

    #[test]
    fn data_block_forms() {
        let db = Area::DataBlock;
        assert_eq!(parse("DB1.0", false), Ok(at(db, 1, 0, None, None)));
        assert_eq!(parse("DB1.4", false), Ok(at(db, 1, 4, None, None)));
        assert_eq!(parse("DB1.6.0", false), Ok(at(db, 1, 6, Some(0), None)));
        assert_eq!(parse("DB1.DBX6.7", false), Ok(at(db, 1, 6, Some(7), None)));
        assert_eq!(parse("db2.dbb4", false), Ok(at(db, 2, 4, None, Some(1))));
        assert_eq!(parse("DB10.DBW4", false), Ok(at(db, 10, 4, None, Some(2))));
        assert_eq!(
            parse(" %DB65535.DBD0 ", false),
            Ok(at(db, 65535, 0, None, Some(4)))
        );
    }

    #[test]
    fn area_forms() {
        use Area::{Flags, Inputs, Outputs};
        let cases = [
            ("M10.1", Flags, 10, Some(1), None),
            ("MX10.1", Flags, 10, Some(1), None),
            ("M10", Flags, 10, None, None),
            ("mb10", Flags, 10, None, Some(1)),
            ("MW20", Flags, 20, None, Some(2)),
            ("MD30", Flags, 30, None, Some(4)),
            ("I0.0", Inputs, 0, Some(0), None),
            ("E1.2", Inputs, 1, Some(2), None),
            ("IW0", Inputs, 0, None, Some(2)),
            ("ID4", Inputs, 4, None, Some(4)),
            ("Q0.1", Outputs, 0, Some(1), None),
            ("AB3", Outputs, 3, None, Some(1)),
            ("%QD8", Outputs, 8, None, Some(4)),
        ];
        for (text, area, byte, bit, width) in cases {
            assert_eq!(
                parse(text, false),
                Ok(at(area, 0, byte, bit, width)),
                "{text}"
            );
        }
    }

    #[test]
    fn v_area_is_db1_on_s7_200() {
        let db = Area::DataBlock;
        assert_eq!(parse("V100", true), Ok(at(db, 1, 100, None, None)));
        assert_eq!(parse("VB100", true), Ok(at(db, 1, 100, None, Some(1))));
        assert_eq!(parse("VW100", true), Ok(at(db, 1, 100, None, Some(2))));
        assert_eq!(parse("VD100", true), Ok(at(db, 1, 100, None, Some(4))));
        assert_eq!(parse("V10.2", true), Ok(at(db, 1, 10, Some(2), None)));
        let error = parse("VW100", false).expect_err("no V area on an S7-1200");
        assert!(error.contains("S200"), "{error}");
    }

    #[test]
    fn bad_addresses() {
        for bad in [
            "",
            "DB1",
            "DB0.0",
            "DB65536.0",
            "DB1.DBX6",
            "DB1.DBW4.1",
            "DB1.DB4",
            "DB1.X4",
            "DBX1.0",
            "M10.8",
            "M10.",
            "M",
            "MW",
            "M-1",
            "M+1",
            "T5",
            "C3",
            "Z1",
            "P10",
            "M2097152",
            "DB1.DBD99999999",
            "M1.1.1",
            "DB1.6.0.1",
            "40001",
            "MW10x",
            "VW10",
        ] {
            assert!(parse(bad, false).is_err(), "{bad}");
        }
        assert!(parse("M10.9", false).unwrap_err().contains("0 to 7"));
    }

    #[test]
    fn sizes_follow_the_data_type() {
        let len = |text: &str, data_type| byte_len(&parse(text, false).unwrap(), data_type, text);
        assert_eq!(len("DB1.DBX6.0", DataType::Bool), Ok(1));
        assert_eq!(len("DB1.6.0", DataType::Bool), Ok(1));
        assert_eq!(len("DB1.DBW4", DataType::Int16), Ok(2));
        assert_eq!(len("DB1.DBD0", DataType::Float32), Ok(4));
        assert_eq!(len("DB1.0", DataType::Float32), Ok(4));
        assert_eq!(len("MD30", DataType::Bcd32), Ok(4));
        assert_eq!(len("DB1.DBB0", DataType::Float64), Ok(8));
        assert_eq!(len("DB1.8", DataType::Int64), Ok(8));
        assert_eq!(len("DB1.DBB10", DataType::String(20)), Ok(20));
        assert_eq!(len("M10", DataType::Uint16), Ok(2));
        let error = len("DB1.DBW4", DataType::Float32).unwrap_err();
        assert!(
            error.contains("FLOAT32") && error.contains("D address"),
            "{error}"
        );
        assert!(len("MB10", DataType::Int16).is_err());
        assert!(len("DB1.DBD0", DataType::Float64).is_err());
        assert!(len("DB1.DBW0", DataType::String(3)).is_err());
        assert!(len("DB1.DBB0", DataType::Bool).unwrap_err().contains("bit"));
        assert!(len("M10", DataType::Bool).is_err());
        assert!(len("M10.1", DataType::Int16).is_err());
    }
}
