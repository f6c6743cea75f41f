//! MELSEC device addresses as users write them.
//!
//! A device name followed by the device number, in the device's own radix:
//! `D100`, `M10`, `X1F` (hex), `W1A` (hex), `ZR1000` (decimal). Timer and counter
//! current values may be written `T100`/`TN100` and `C5`/`CN5`. A word device
//! address may end in `.N` to read bit N (0 = least significant) of the word as a
//! BOOL: `D100.3`, `D100.F` (one hex digit, as GX Works writes it) or `D100.15`.
//! Names are case-insensitive. The A-compatible 1E frame knows fewer devices
//! (`X Y M S F B TS TC TN CS CC CN D W R`), each with a two-byte code, the
//! device's name in ASCII padded with a space (`D` is `0x4420`).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// One device family and its binary device code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Device {
    pub name: &'static str,
    /// Binary device code (1 byte for Q/L/QnA; the same value as 2 bytes LE for iQ-R).
    pub code: u8,
    /// Device numbers are hexadecimal (else decimal).
    pub hex: bool,
    /// A bit device (else a word device).
    pub bits: bool,
    /// Its code in the A-compatible 1E frame, when that frame knows it.
    pub code_1e: Option<u16>,
}

const fn bit(name: &'static str, code: u8, hex: bool) -> Device {
    Device {
        name,
        code,
        hex,
        bits: true,
        code_1e: None,
    }
}

const fn word(name: &'static str, code: u8, hex: bool) -> Device {
    Device {
        name,
        code,
        hex,
        bits: false,
        code_1e: None,
    }
}

impl Device {
    /// The device, known to the 1E frame by `code`.
    const fn in_1e(self, code: u16) -> Device {
        Device {
            code_1e: Some(code),
            ..self
        }
    }
}

/// Every device the codec reads and writes.
pub const DEVICES: &[Device] = &[
    bit("X", 0x9C, true).in_1e(0x5820),
    bit("Y", 0x9D, true).in_1e(0x5920),
    bit("M", 0x90, false).in_1e(0x4D20),
    bit("L", 0x92, false),
    bit("S", 0x98, false).in_1e(0x5320),
    bit("F", 0x93, false).in_1e(0x4620),
    bit("V", 0x94, false),
    bit("B", 0xA0, true).in_1e(0x4220),
    bit("SM", 0x91, false),
    bit("SB", 0xA1, true),
    bit("TS", 0xC1, false).in_1e(0x5453),
    bit("TC", 0xC0, false).in_1e(0x5443),
    bit("CS", 0xC4, false).in_1e(0x4353),
    bit("CC", 0xC3, false).in_1e(0x4343),
    word("D", 0xA8, false).in_1e(0x4420),
    word("W", 0xB4, true).in_1e(0x5720),
    word("R", 0xAF, false).in_1e(0x5220),
    word("ZR", 0xB0, false),
    word("TN", 0xC2, false).in_1e(0x544E),
    word("CN", 0xC5, false).in_1e(0x434E),
    word("SD", 0xA9, false),
    word("SW", 0xB5, true),
    word("Z", 0xCC, false),
];

/// Other names of a device: `T` and `C` alone mean the current values.
const ALIASES: &[(&str, &str)] = &[("T", "TN"), ("C", "CN")];

/// The largest device number of the 3-byte field (Q/L/QnA).
pub const MAX_NARROW: u32 = 0xFF_FFFF;

/// A parsed address: device, device number and optional bit of a word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Address {
    pub device: Device,
    pub number: u32,
    pub bit: Option<u8>,
}

fn by_name(name: &str) -> Option<Device> {
    let name = ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, real)| *real);
    DEVICES.iter().copied().find(|d| d.name == name)
}

/// The device whose name starts `text` (the longest name wins) and the rest.
fn split_device(text: &str) -> Option<(Device, &str)> {
    (1..=2).rev().find_map(|len| {
        let name = text.get(..len)?;
        let rest = text.get(len..)?;
        by_name(name).map(|device| (device, rest))
    })
}

fn parse_bit(bit: &str, text: &str) -> Result<u8, String> {
    let value = if bit.len() == 1 {
        u8::from_str_radix(bit, 16).ok()
    } else if bit.len() == 2 && bit.bytes().all(|b| b.is_ascii_digit()) {
        bit.parse::<u8>().ok().filter(|b| *b < 16)
    } else {
        None
    };
    value.ok_or_else(|| format!("bit `{bit}` of `{text}` must be 0 to 15 (or one hex digit 0-F)"))
}

fn known_devices() -> String {
    let names: Vec<&str> = DEVICES.iter().map(|d| d.name).collect();
    format!("{}, T (= TN), C (= CN)", names.join(", "))
}

/// How a frame names devices: the 1E frame's codes (and 3-byte numbers), the
/// 3-byte numbers of Q/L/QnA, or the 4-byte numbers of iQ-R.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    Frame1E,
    Narrow,
    Wide,
}

/// Parses an address as `naming` names devices; numbers stop at 0xFFFFFF
/// unless they are wide.
///
/// # Errors
/// A message naming what is wrong and what is accepted.
pub fn parse(text: &str, naming: Naming) -> Result<Address, String> {
    let text = text.trim();
    let (base, bit) = match text.split_once('.') {
        Some((base, bit)) => (base, Some(parse_bit(bit, text)?)),
        None => (text, None),
    };
    let upper = base.to_ascii_uppercase();
    let (device, digits) = split_device(&upper).ok_or_else(|| {
        format!(
            "`{text}` is not a MELSEC device address: it must start with one of {}",
            known_devices()
        )
    })?;
    let radix = if device.hex { 16 } else { 10 };
    let kind = if device.hex { "hexadecimal" } else { "decimal" };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(format!(
            "`{text}`: the number of device {} must be {kind}",
            device.name
        ));
    }
    if naming == Naming::Frame1E && device.code_1e.is_none() {
        let known: Vec<&str> = DEVICES
            .iter()
            .filter(|d| d.code_1e.is_some())
            .map(|d| d.name)
            .collect();
        return Err(format!(
            "`{text}`: the 1E frame has no device {}; it has {}",
            device.name,
            known.join(", ")
        ));
    }
    let number = u32::from_str_radix(digits, radix)
        .map_err(|_| format!("`{text}`: the device number is too large"))?;
    match naming {
        Naming::Narrow if number > MAX_NARROW => {
            return Err(format!(
                "`{text}`: device numbers above {MAX_NARROW} need series IQ_R (4-byte device \
                 numbers)"
            ));
        }
        Naming::Frame1E if number > MAX_NARROW => {
            return Err(format!(
                "`{text}`: the 1E frame's device numbers stop at {MAX_NARROW}"
            ));
        }
        _ => {}
    }
    if bit.is_some() && device.bits {
        return Err(format!(
            "`{text}`: a bit index applies to word devices, not to bit device {}",
            device.name
        ));
    }
    Ok(Address {
        device,
        number,
        bit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code_and_number(text: &str) -> (&'static str, u8, u32) {
        let a = parse(text, Naming::Narrow).expect(text);
        (a.device.name, a.device.code, a.number)
    }

    #[test]
    fn every_device_and_its_radix() {
        assert_eq!(code_and_number("X1F"), ("X", 0x9C, 0x1F));
        assert_eq!(code_and_number("Y20"), ("Y", 0x9D, 0x20));
        assert_eq!(code_and_number("M10"), ("M", 0x90, 10));
        assert_eq!(code_and_number("L5"), ("L", 0x92, 5));
        assert_eq!(code_and_number("F3"), ("F", 0x93, 3));
        assert_eq!(code_and_number("V7"), ("V", 0x94, 7));
        assert_eq!(code_and_number("B0F"), ("B", 0xA0, 0x0F));
        assert_eq!(code_and_number("BA0"), ("B", 0xA0, 0xA0));
        assert_eq!(code_and_number("SM400"), ("SM", 0x91, 400));
        assert_eq!(code_and_number("SB1F"), ("SB", 0xA1, 0x1F));
        assert_eq!(code_and_number("TS1"), ("TS", 0xC1, 1));
        assert_eq!(code_and_number("TC2"), ("TC", 0xC0, 2));
        assert_eq!(code_and_number("CS3"), ("CS", 0xC4, 3));
        assert_eq!(code_and_number("CC4"), ("CC", 0xC3, 4));
        assert_eq!(code_and_number("D100"), ("D", 0xA8, 100));
        assert_eq!(code_and_number("W1A"), ("W", 0xB4, 0x1A));
        assert_eq!(code_and_number("R200"), ("R", 0xAF, 200));
        assert_eq!(code_and_number("ZR1000"), ("ZR", 0xB0, 1000));
        assert_eq!(code_and_number("TN100"), ("TN", 0xC2, 100));
        assert_eq!(code_and_number("T100"), ("TN", 0xC2, 100));
        assert_eq!(code_and_number("CN5"), ("CN", 0xC5, 5));
        assert_eq!(code_and_number("C5"), ("CN", 0xC5, 5));
        assert_eq!(code_and_number("SD203"), ("SD", 0xA9, 203));
        assert_eq!(code_and_number("SW10"), ("SW", 0xB5, 0x10));
        assert_eq!(code_and_number("Z2"), ("Z", 0xCC, 2));
        assert_eq!(code_and_number(" d100 "), ("D", 0xA8, 100));
        assert_eq!(code_and_number("x1f"), ("X", 0x9C, 0x1F));
        assert!(parse("M10", Naming::Narrow).expect("M10").device.bits);
        assert!(!parse("D10", Naming::Narrow).expect("D10").device.bits);
    }

    #[test]
    fn bits_of_words() {
        let bit = |text| parse(text, Naming::Narrow).map(|a| a.bit);
        assert_eq!(bit("D100.3"), Ok(Some(3)));
        assert_eq!(bit("D100.F"), Ok(Some(15)));
        assert_eq!(bit("D100.a"), Ok(Some(10)));
        assert_eq!(bit("D100.15"), Ok(Some(15)));
        assert_eq!(bit("W1A.0"), Ok(Some(0)));
        assert_eq!(bit("D100"), Ok(None));
        for bad in [
            "D100.16", "D100.", "D100.G", "D100.-1", "M10.1", "X1.0", "D100.1.2",
        ] {
            assert!(parse(bad, Naming::Narrow).is_err(), "{bad}");
        }
    }

    #[test]
    fn iq_r_widths() {
        assert_eq!(
            parse("D16777215", Naming::Narrow).map(|a| a.number),
            Ok(0xFF_FFFF)
        );
        assert!(parse("D16777216", Naming::Narrow).is_err());
        assert_eq!(
            parse("D16777216", Naming::Wide).map(|a| a.number),
            Ok(16_777_216)
        );
        assert_eq!(
            parse("ZR4294967295", Naming::Wide).map(|a| a.number),
            Ok(u32::MAX)
        );
        assert!(parse("ZR4294967296", Naming::Wide).is_err());
        assert_eq!(
            parse("W1000000", Naming::Wide).map(|a| a.number),
            Ok(0x100_0000)
        );
        assert!(parse("W1000000", Naming::Narrow).is_err());
    }

    #[test]
    fn the_1e_frame_knows_fewer_devices_by_their_ascii_codes() {
        let code = |text| parse(text, Naming::Frame1E).map(|a| a.device.code_1e);
        assert_eq!(code("D100"), Ok(Some(0x4420)));
        assert_eq!(code("X1F"), Ok(Some(0x5820)));
        assert_eq!(code("S5"), Ok(Some(0x5320)));
        assert_eq!(code("T3"), Ok(Some(0x544E)));
        assert_eq!(code("CC4"), Ok(Some(0x4343)));
        for name in ["X", "Y", "M", "S", "F", "B", "D", "W", "R"] {
            let device = by_name(name).expect(name);
            let ascii = u16::from_be_bytes([name.as_bytes()[0], b' ']);
            assert_eq!(device.code_1e, Some(ascii), "{name}");
        }
        let refused = parse("ZR10", Naming::Frame1E).expect_err("no ZR in 1E");
        assert!(refused.contains("1E frame has no device ZR"), "{refused}");
        assert!(parse("SM400", Naming::Frame1E).is_err());
        assert!(parse("D16777216", Naming::Frame1E).is_err());
    }

    #[test]
    fn bad_addresses() {
        for bad in [
            "", "D", "100", "D1A", "X1G", "ZR1F", "Q100", "DX10", "D+1", "D 1", "40001", "M-1",
            "TT1", "é1", "Dé",
        ] {
            assert!(parse(bad, Naming::Wide).is_err(), "{bad}");
        }
    }
}
