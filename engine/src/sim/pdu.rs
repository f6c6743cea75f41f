//! Modbus PDU handling: one request PDU in, one response PDU out.
//!
//! Pure functions over [`Memory`], with no I/O, so they can be tested (and fuzzed)
//! without sockets. Every length is checked by slice patterns before use: no input
//! can make them panic.

use super::memory::{Memory, Table};

/// Exception 1: the function code is not supported.
const ILLEGAL_FUNCTION: u8 = 1;
/// Exception 2: the address range is outside the table.
const ILLEGAL_DATA_ADDRESS: u8 = 2;
/// Exception 3: a quantity, a value or the PDU length is wrong.
const ILLEGAL_DATA_VALUE: u8 = 3;

/// Largest quantity of a read of bits (FC01, FC02).
const MAX_READ_BITS: u16 = 2000;
/// Largest quantity of a read of registers (FC03, FC04).
const MAX_READ_REGISTERS: u16 = 125;
/// Largest quantity of a write of coils (FC15), per the Modbus specification.
const MAX_WRITE_BITS: u16 = 1968;
/// Largest quantity of a write of registers (FC16), per the Modbus specification.
const MAX_WRITE_REGISTERS: u16 = 123;

/// Appends to `out` the response PDU (function code first) for the request
/// `function` with `data` (the PDU after its function code).
///
/// `scratch` is a buffer reused between calls to avoid allocating on reads.
pub(crate) fn respond(
    function: u8,
    data: &[u8],
    memory: &Memory,
    scratch: &mut Vec<u16>,
    out: &mut Vec<u8>,
) {
    let start = out.len();
    out.push(function);
    if let Err(code) = execute(function, data, memory, scratch, out) {
        out.truncate(start);
        out.push(function | 0x80);
        out.push(code);
    }
}

fn execute(
    function: u8,
    data: &[u8],
    memory: &Memory,
    scratch: &mut Vec<u16>,
    out: &mut Vec<u8>,
) -> Result<(), u8> {
    match function {
        0x01 => read_bits(&memory.coils, data, scratch, out),
        0x02 => read_bits(&memory.discrete, data, scratch, out),
        0x03 => read_registers(&memory.holding, data, scratch, out),
        0x04 => read_registers(&memory.input, data, scratch, out),
        0x05 => write_single_coil(&memory.coils, data, out),
        0x06 => write_single_register(&memory.holding, data, out),
        0x0F => write_multiple_coils(&memory.coils, data, out),
        0x10 => write_multiple_registers(&memory.holding, data, out),
        _ => Err(ILLEGAL_FUNCTION),
    }
}

/// Checks a quantity against `1..=max` (exception 3), then the address range
/// against the table (exception 2), in the order the specification gives.
fn check(table: &Table, start: u16, quantity: u16, max: u16) -> Result<(), u8> {
    if quantity == 0 || quantity > max {
        return Err(ILLEGAL_DATA_VALUE);
    }
    if !table.contains(start, quantity) {
        return Err(ILLEGAL_DATA_ADDRESS);
    }
    Ok(())
}

/// Reads the range a read request (`start`, `quantity`) names into `scratch`.
fn read_range(table: &Table, data: &[u8], max: u16, scratch: &mut Vec<u16>) -> Result<(), u8> {
    let &[s0, s1, q0, q1] = data else {
        return Err(ILLEGAL_DATA_VALUE);
    };
    let (start, quantity) = (u16::from_be_bytes([s0, s1]), u16::from_be_bytes([q0, q1]));
    check(table, start, quantity, max)?;
    table.read_into(start, quantity, scratch);
    Ok(())
}

fn read_bits(
    table: &Table,
    data: &[u8],
    scratch: &mut Vec<u16>,
    out: &mut Vec<u8>,
) -> Result<(), u8> {
    read_range(table, data, MAX_READ_BITS, scratch)?;
    // At most 2000 bits: 250 bytes, which fits the byte count.
    let bytes = scratch.len().div_ceil(8);
    out.push(u8::try_from(bytes).map_err(|_| ILLEGAL_DATA_VALUE)?);
    for chunk in scratch.chunks(8) {
        let byte = chunk
            .iter()
            .enumerate()
            .fold(0u8, |acc, (i, &bit)| acc | (u8::from(bit != 0) << i));
        out.push(byte);
    }
    Ok(())
}

fn read_registers(
    table: &Table,
    data: &[u8],
    scratch: &mut Vec<u16>,
    out: &mut Vec<u8>,
) -> Result<(), u8> {
    read_range(table, data, MAX_READ_REGISTERS, scratch)?;
    // At most 125 registers: 250 bytes.
    out.push(u8::try_from(scratch.len() * 2).map_err(|_| ILLEGAL_DATA_VALUE)?);
    for value in scratch.iter() {
        out.extend_from_slice(&value.to_be_bytes());
    }
    Ok(())
}

fn write_single_coil(table: &Table, data: &[u8], out: &mut Vec<u8>) -> Result<(), u8> {
    let &[a0, a1, v0, v1] = data else {
        return Err(ILLEGAL_DATA_VALUE);
    };
    let on = match u16::from_be_bytes([v0, v1]) {
        0xFF00 => 1,
        0x0000 => 0,
        _ => return Err(ILLEGAL_DATA_VALUE),
    };
    let addr = u16::from_be_bytes([a0, a1]);
    if !table.contains(addr, 1) {
        return Err(ILLEGAL_DATA_ADDRESS);
    }
    table.write(addr, [on]);
    out.extend_from_slice(data);
    Ok(())
}

fn write_single_register(table: &Table, data: &[u8], out: &mut Vec<u8>) -> Result<(), u8> {
    let &[a0, a1, v0, v1] = data else {
        return Err(ILLEGAL_DATA_VALUE);
    };
    let addr = u16::from_be_bytes([a0, a1]);
    if !table.contains(addr, 1) {
        return Err(ILLEGAL_DATA_ADDRESS);
    }
    table.write(addr, [u16::from_be_bytes([v0, v1])]);
    out.extend_from_slice(data);
    Ok(())
}

fn write_multiple_coils(table: &Table, data: &[u8], out: &mut Vec<u8>) -> Result<(), u8> {
    let [s0, s1, q0, q1, count, values @ ..] = data else {
        return Err(ILLEGAL_DATA_VALUE);
    };
    let (start, quantity) = (
        u16::from_be_bytes([*s0, *s1]),
        u16::from_be_bytes([*q0, *q1]),
    );
    let expected = usize::from(quantity).div_ceil(8);
    if usize::from(*count) != expected || values.len() != expected {
        return Err(ILLEGAL_DATA_VALUE);
    }
    check(table, start, quantity, MAX_WRITE_BITS)?;
    let bits = (0..usize::from(quantity)).map(|i| {
        let byte = values.get(i / 8).copied().unwrap_or(0);
        u16::from((byte >> (i % 8)) & 1)
    });
    table.write(start, bits);
    out.extend_from_slice(&[*s0, *s1, *q0, *q1]);
    Ok(())
}

fn write_multiple_registers(table: &Table, data: &[u8], out: &mut Vec<u8>) -> Result<(), u8> {
    let [s0, s1, q0, q1, count, values @ ..] = data else {
        return Err(ILLEGAL_DATA_VALUE);
    };
    let (start, quantity) = (
        u16::from_be_bytes([*s0, *s1]),
        u16::from_be_bytes([*q0, *q1]),
    );
    let expected = usize::from(quantity) * 2;
    if usize::from(*count) != expected || values.len() != expected {
        return Err(ILLEGAL_DATA_VALUE);
    }
    check(table, start, quantity, MAX_WRITE_REGISTERS)?;
    let registers = values
        .chunks_exact(2)
        .map(|pair| u16::from_be_bytes([pair[0], pair[1]]));
    table.write(start, registers);
    out.extend_from_slice(&[*s0, *s1, *q0, *q1]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(memory: &Memory, pdu: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        respond(pdu[0], &pdu[1..], memory, &mut Vec::new(), &mut out);
        out
    }

    #[test]
    fn packs_bits_lsb_first() {
        let memory = Memory::new(16);
        memory.coils.write(0, [1, 0, 1, 1, 0, 0, 0, 0, 1]);
        assert_eq!(call(&memory, &[1, 0, 0, 0, 9]), [1, 2, 0b0000_1101, 1]);
    }

    #[test]
    fn writes_multiple_coils_from_packed_bytes() {
        let memory = Memory::new(16);
        assert_eq!(
            call(&memory, &[0x0F, 0, 2, 0, 10, 2, 0b1000_0101, 0b10]),
            [0x0F, 0, 2, 0, 10]
        );
        let mut bits = Vec::new();
        memory.coils.read_into(0, 16, &mut bits);
        assert_eq!(bits, [0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0]);
    }

    #[test]
    fn rejects_wrong_lengths_and_counts() {
        let memory = Memory::new(16);
        assert_eq!(call(&memory, &[3, 0, 0, 0]), [0x83, 3]);
        assert_eq!(call(&memory, &[3, 0, 0, 0, 1, 9]), [0x83, 3]);
        assert_eq!(call(&memory, &[0x10, 0, 0, 0, 1, 3, 0, 0, 0]), [0x90, 3]);
        assert_eq!(call(&memory, &[0x10, 0, 0, 0, 1, 2, 0]), [0x90, 3]);
        assert_eq!(call(&memory, &[0x0F, 0, 0, 0, 9, 1, 0]), [0x8F, 3]);
        assert_eq!(call(&memory, &[0x0F, 0, 0, 0, 0, 0]), [0x8F, 3]);
        assert_eq!(call(&memory, &[0xFF]), [0xFF, 1]);
    }

    #[test]
    fn random_pdus_never_panic() {
        let memory = Memory::new(100);
        let mut rng = super::super::tests::XorShift(0x5EED_1234_ABCD_0001);
        let mut scratch = Vec::new();
        let mut out = Vec::new();
        let mut data = Vec::new();
        let mut answered = 0;
        for _ in 0..200_000 {
            let function = match rng.next() % 10 {
                0 => rng.next() as u8,
                n => [1, 2, 3, 4, 5, 6, 15, 16, 3][n as usize - 1],
            };
            data.clear();
            // Mostly the lengths real requests have, sometimes anything.
            let len = match rng.next() % 4 {
                0 | 1 => 4,
                2 => 5 + (rng.next() % 5) as usize,
                _ => (rng.next() % 12) as usize,
            };
            // Mostly small bytes, so that addresses and quantities are sometimes valid.
            data.extend((0..len).map(|_| match rng.next() % 4 {
                0..=2 => (rng.next() % 4) as u8,
                _ => rng.next() as u8,
            }));
            out.clear();
            respond(function, &data, &memory, &mut scratch, &mut out);
            assert!(!out.is_empty() && out.len() <= 253);
            answered += usize::from(out[0] < 0x80);
        }
        assert!(answered > 1_000, "only {answered} normal responses");
    }
}
