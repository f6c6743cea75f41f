//! Codec `modbus_rtu`: Modbus RTU framing for the engine, on a serial line or
//! tunnelled through TCP.
//!
//! The session is Modbus TCP's (`../modbus_tcp/src/session.rs`: the same read
//! planning, function codes, types, exceptions, splits and write echoes); only
//! the frame differs: the unit id, the PDU and a CRC-16 (polynomial 0xA001,
//! little-endian), with no length field. An answer's size follows from its
//! first three bytes (unit, function, byte count): 5 for an exception,
//! 5 + count for a read, 8 for a write echo. A bad CRC, a truncated frame or an
//! answer from another unit is malformed; the engine then lets the line fall
//! silent and drops what is left of the answer, keeping the line open.
//!
//! Settings: as Modbus TCP's, with `unitId` 1-247 (0 is a broadcast, which no
//! unit answers).
#![cfg_attr(not(any(test, feature = "native")), no_std)]

extern crate alloc;

#[path = "../../modbus_tcp/src/address.rs"]
mod address;
#[path = "../../modbus_tcp/src/config.rs"]
mod config;
mod frame;
#[path = "../../modbus_tcp/src/pdu.rs"]
mod pdu;
#[path = "../../modbus_tcp/src/plan.rs"]
mod plan;
#[path = "../../modbus_tcp/src/session.rs"]
mod session;
#[cfg(test)]
mod tests;

use session::{ModbusSession, Tag};

sluice_guest::codec_component!(ModbusSession);
sluice_guest::range_session!(ModbusSession, "Modbus RTU");

/// Modbus RTU on a serial line, and tunnelled through TCP by a serial server
/// (which has no standard port).
fn protocols() -> alloc::vec::Vec<ProtocolDeclaration> {
    let protocol = |name: &str, transport| ProtocolDeclaration {
        name: name.into(),
        transports: alloc::vec![transport],
        default_port: None,
        settings: config::declared(),
        address_help: config::ADDRESS_HELP.into(),
    };
    alloc::vec![
        protocol("modbus-rtu", Transport::SerialLine),
        protocol("modbus-rtu-over-tcp", Transport::LineOverTcp),
    ]
}
