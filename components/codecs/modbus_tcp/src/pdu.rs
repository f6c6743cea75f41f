//! What a Modbus PDU means whatever frames it: exception codes.

use alloc::format;
use alloc::string::String;

/// The message of exception `code` for `what` was asked.
pub fn exception(code: u8, what: &str) -> String {
    format!("exception {code} ({}) for {what}", exception_name(code))
}

/// What a Modbus exception code means.
fn exception_name(code: u8) -> &'static str {
    match code {
        1 => "illegal function",
        2 => "illegal data address",
        3 => "illegal data value",
        4 => "server device failure",
        5 => "acknowledge",
        6 => "server device busy",
        8 => "memory parity error",
        0x0A => "gateway path unavailable",
        0x0B => "gateway target device failed to respond",
        _ => "unknown exception",
    }
}

/// Whether an exception can be blamed on the addresses asked for, so splitting the
/// request may isolate the tags at fault (busy or gateway errors cannot).
pub fn blames_addresses(code: u8) -> bool {
    matches!(code, 1..=3)
}
