//! Codec `modbus_tcp`: Modbus TCP framing for the engine.
//!
//! Plans reads (function code by table: coils FC01, discrete inputs FC02, holding
//! registers FC03, input registers FC04), merging nearby addresses and splitting at
//! 120 registers / 2000 bits; builds MBAP frames with a fresh transaction id and
//! checks the answer's transaction id, unit id, function and byte count. A Modbus
//! exception is a device error, never a malformed frame: a merged request failing
//! with an address exception is split in two and retried, and the split is kept for
//! later rounds, so only the tags at fault end BAD. Writes use FC05/FC06, or
//! FC15/FC16 for multi-register values and when `writeMultiple` is set.
//!
//! An array tag (a `length` on a type other than STRING) takes its elements'
//! registers one after the other, read in one request as one raw span, or its
//! coils/inputs as booleans; it is written whole, with FC16 or FC15. An array
//! cannot start at one bit of a register.
//!
//! Settings: `unitId` (0-255, default 1), `mergeGap` (0-1000, default 16),
//! `maxRegisters` (1-125, default 120), `maxBits` (1-2000, default 2000),
//! `writeMultiple` (default false). `byteOrder` is accepted and ignored here: the
//! engine applies it per tag.
#![cfg_attr(not(any(test, feature = "native")), no_std)]

extern crate alloc;

mod address;
mod config;
mod frame;
mod pdu;
mod plan;
mod session;
#[cfg(test)]
mod tests;

use session::{ModbusSession, Tag};

sluice_guest::codec_component!(ModbusSession);
sluice_guest::range_session!(ModbusSession, "Modbus TCP");

/// Modbus over TCP, on the standard port 502.
fn protocols() -> alloc::vec::Vec<ProtocolDeclaration> {
    alloc::vec![ProtocolDeclaration {
        name: "modbus-tcp".into(),
        transports: alloc::vec![Transport::Tcp],
        default_port: Some(502),
        settings: config::declared(),
        address_help: config::ADDRESS_HELP.into(),
    }]
}
