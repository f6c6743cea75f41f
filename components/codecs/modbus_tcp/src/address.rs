//! Modbus addresses as users write them.
//!
//! - Modicon 5- or 6-digit form: the first digit picks the table, the rest is the
//!   1-based number: `00001` coil 0, `10001` discrete input 0, `30001` input
//!   register 0, `40001` holding register 0 (`400001`..`465536` for the 6-digit form).
//! - Zero-based form with a table prefix: `co:0`, `di:0`, `ir:0`, `hr:0`.
//! - A register address may end in `.N` (0-15) to read one bit of a 16-bit
//!   register as a BOOL, bit 0 being the least significant (`40001.3`, `hr:0.3`).

use alloc::format;
use alloc::string::String;

/// The four Modbus tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Table {
    Coils,
    DiscreteInputs,
    InputRegisters,
    HoldingRegisters,
}

impl Table {
    /// Function code that reads the table.
    pub fn read_function(self) -> u8 {
        match self {
            Table::Coils => 0x01,
            Table::DiscreteInputs => 0x02,
            Table::HoldingRegisters => 0x03,
            Table::InputRegisters => 0x04,
        }
    }

    pub fn is_bits(self) -> bool {
        matches!(self, Table::Coils | Table::DiscreteInputs)
    }

    pub fn name(self) -> &'static str {
        match self {
            Table::Coils => "coils",
            Table::DiscreteInputs => "discrete inputs",
            Table::InputRegisters => "input registers",
            Table::HoldingRegisters => "holding registers",
        }
    }
}

/// A parsed address: table, zero-based offset and optional bit of a register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Address {
    pub table: Table,
    pub offset: u16,
    pub bit: Option<u8>,
}

/// Parses an address in one of the accepted forms.
///
/// # Errors
/// A message saying which forms are accepted.
pub fn parse(text: &str) -> Result<Address, String> {
    let text = text.trim();
    let (base, bit) = match text.split_once('.') {
        Some((base, bit)) => {
            let bit: u8 = bit
                .parse()
                .ok()
                .filter(|b| *b < 16)
                .ok_or_else(|| format!("bit `{bit}` of `{text}` must be 0 to 15"))?;
            (base, Some(bit))
        }
        None => (text, None),
    };
    let address = match base.split_once(':') {
        Some((prefix, offset)) => {
            let table = match prefix.to_ascii_lowercase().as_str() {
                "co" => Table::Coils,
                "di" => Table::DiscreteInputs,
                "ir" => Table::InputRegisters,
                "hr" => Table::HoldingRegisters,
                _ => {
                    return Err(format!(
                        "unknown table `{prefix}` in `{text}`: use co, di, ir or hr"
                    ));
                }
            };
            let offset = offset
                .parse::<u16>()
                .map_err(|_| format!("offset in `{text}` must be 0 to 65535"))?;
            Address { table, offset, bit }
        }
        None => modicon(base, text, bit)?,
    };
    if address.bit.is_some() && address.table.is_bits() {
        return Err(format!(
            "`{text}`: a bit index applies to registers, not to {}",
            address.table.name()
        ));
    }
    Ok(address)
}

fn modicon(base: &str, text: &str, bit: Option<u8>) -> Result<Address, String> {
    let usage = || {
        format!(
            "`{text}` is not a Modbus address: use 00001-09999 (coils), 10001 (discrete inputs), \
             30001 (input registers), 40001 (holding registers), the 6-digit forms, or co:/di:/ir:/hr: with a 0-based offset"
        )
    };
    if !(5..=6).contains(&base.len()) || !base.bytes().all(|b| b.is_ascii_digit()) {
        return Err(usage());
    }
    let table = match base.as_bytes()[0] {
        b'0' => Table::Coils,
        b'1' => Table::DiscreteInputs,
        b'3' => Table::InputRegisters,
        b'4' => Table::HoldingRegisters,
        _ => return Err(usage()),
    };
    let number: u32 = base[1..].parse().map_err(|_| usage())?;
    if number == 0 || number > 65536 {
        return Err(usage());
    }
    Ok(Address {
        table,
        offset: (number - 1) as u16,
        bit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modicon_and_prefixed_forms() {
        let hr = |offset, bit| Address {
            table: Table::HoldingRegisters,
            offset,
            bit,
        };
        assert_eq!(parse("40001"), Ok(hr(0, None)));
        assert_eq!(parse("400001"), Ok(hr(0, None)));
        assert_eq!(parse("465536"), Ok(hr(65535, None)));
        assert_eq!(parse("40010.15"), Ok(hr(9, Some(15))));
        assert_eq!(parse("hr:7"), Ok(hr(7, None)));
        assert_eq!(parse("00001").map(|a| a.table), Ok(Table::Coils));
        assert_eq!(
            parse("10002").map(|a| (a.table, a.offset)),
            Ok((Table::DiscreteInputs, 1))
        );
        assert_eq!(parse("30001").map(|a| a.table), Ok(Table::InputRegisters));
    }

    #[test]
    fn bad_addresses() {
        for bad in [
            "40000", "20001", "4001", "hr:70000", "xx:1", "40001.16", "00001.1", "D100", "",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
