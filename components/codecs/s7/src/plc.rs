//! PLC families and the connection addresses (TSAPs) the codec uses for them.
//!
//! A TSAP is two bytes: the connection type in the high byte, the CPU's position in
//! the low byte (rack in bits 5-7, slot in bits 0-4).
//!
//! - S7-300, S7-400, S7-1200, S7-1500 and SINUMERIK 828D: calling (local) TSAP
//!   `0x0100`, called (remote) TSAP `0x0100 | rack << 5 | slot`, a PG connection
//!   (type 1). That is what snap7's `Cli_ConnectTo` sends by default, and every CPU
//!   with a PUT/GET server accepts PG connections on port 102 (OP `0x02` and S7
//!   basic `0x03` connections would work as well; PG is the most widely accepted).
//! - S7-200 SMART: the built-in Ethernet port answers like a small S7-1200: local
//!   `0x0100`, remote `0x0100 | rack << 5 | slot`, which with the usual rack 0,
//!   slot 1 is the `0x0101` other tools send.
//! - S7-200 with a CP 243-1: local and remote `0x4D57` ("MW"), the TSAP pair that
//!   HMI drivers configure for the CP by default; rack and slot are not used.

/// The `plcType` names, as the setting spells them.
pub const NAMES: &[&str] = &[
    "S200",
    "S200_SMART",
    "S300",
    "S400",
    "S1200",
    "S1500",
    "SINUMERIK_828D",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlcType {
    S200,
    S200Smart,
    S300,
    S400,
    S1200,
    S1500,
    Sinumerik828D,
}

/// TSAP pair of the CP 243-1 of an S7-200 ("MW").
const S200_TSAP: u16 = 0x4D57;
/// Local TSAP of a PG connection.
const PG_LOCAL_TSAP: u16 = 0x0100;
/// Connection type PG in the high byte of the remote TSAP.
const PG_CONNECTION: u16 = 0x0100;

impl PlcType {
    /// The type named `name` (one of [`NAMES`], case-insensitive).
    pub fn from_name(name: &str) -> Option<Self> {
        const TYPES: [PlcType; 7] = [
            PlcType::S200,
            PlcType::S200Smart,
            PlcType::S300,
            PlcType::S400,
            PlcType::S1200,
            PlcType::S1500,
            PlcType::Sinumerik828D,
        ];
        NAMES
            .iter()
            .zip(TYPES)
            .find(|(n, _)| n.eq_ignore_ascii_case(name.trim()))
            .map(|(_, t)| t)
    }

    /// Whether the family has a V memory area (mapped to DB 1).
    pub fn has_v_area(self) -> bool {
        matches!(self, PlcType::S200 | PlcType::S200Smart)
    }

    /// Local (calling) and remote (called) TSAP for a CPU in `rack` (0-7) and `slot` (0-31).
    pub fn tsaps(self, rack: u8, slot: u8) -> (u16, u16) {
        match self {
            PlcType::S200 => (S200_TSAP, S200_TSAP),
            _ => (
                PG_LOCAL_TSAP,
                PG_CONNECTION | u16::from(rack & 0x07) << 5 | u16::from(slot & 0x1F),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_tsaps() {
        assert_eq!(PlcType::from_name("S1200"), Some(PlcType::S1200));
        assert_eq!(PlcType::from_name("s200_smart"), Some(PlcType::S200Smart));
        assert_eq!(
            PlcType::from_name("SINUMERIK_828D"),
            Some(PlcType::Sinumerik828D)
        );
        assert_eq!(PlcType::from_name("S7_1200"), None);
        assert_eq!(PlcType::S1200.tsaps(0, 1), (0x0100, 0x0101));
        assert_eq!(PlcType::S300.tsaps(0, 2), (0x0100, 0x0102));
        assert_eq!(PlcType::S400.tsaps(1, 3), (0x0100, 0x0123));
        assert_eq!(PlcType::S1500.tsaps(7, 31), (0x0100, 0x01FF));
        assert_eq!(PlcType::S200Smart.tsaps(0, 1), (0x0100, 0x0101));
        assert_eq!(PlcType::S200.tsaps(0, 1), (0x4D57, 0x4D57));
        assert!(PlcType::S200.has_v_area() && !PlcType::S1500.has_v_area());
    }
}
