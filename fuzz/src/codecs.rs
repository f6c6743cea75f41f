//! The codec targets: one fresh native session an input, driven by
//! `sluice_guest::fuzz::one_input` under the fuzz kit's invariants.

use std::ops::Range;

use sluice_guest::fuzz::{Codec, one_input};

/// A codec's session in the fuzz targets, which the seed capture
/// (`tests/seeds.rs`) opens the same way against the real peers.
#[derive(Debug, Clone)]
pub struct CodecSetup {
    /// The target's name.
    pub target: &'static str,
    /// Channel settings, as `native::open` takes them.
    pub settings: &'static [(&'static str, &'static str)],
    /// The tags, as `native::open` takes them.
    pub tags: &'static str,
    /// Where an answer echoes an id of its request.
    pub echo: Option<Range<usize>>,
}

impl CodecSetup {
    pub fn tag_count(&self) -> u32 {
        self.tags.split(',').count() as u32
    }
}

/// Tags of every table and of single-register, multi-register, bit and string
/// types, within the first 200 addresses of each table (libmodbus's size).
const MODBUS_TAGS: &str = "40001 INT16, 40002 FLOAT64, 40008.15 BOOL, hr:20 STRING(5), \
                           40030 UINT32, 00001 BOOL, 00008 BOOL, 10001 BOOL, 10020 BOOL, \
                           30001 UINT32, 30010 INT16";

/// The sessions, in the order of [`SETUPS`]' names.
pub const SETUPS: &[CodecSetup] = &[
    CodecSetup {
        target: "modbus_tcp",
        settings: &[("unitId", "1")],
        tags: MODBUS_TAGS,
        // The MBAP transaction id.
        echo: Some(0..2),
    },
    CodecSetup {
        target: "modbus_rtu",
        settings: &[("unitId", "1")],
        tags: MODBUS_TAGS,
        echo: None,
    },
    CodecSetup {
        target: "s7",
        settings: &[("plcType", "S1200"), ("rack", "0"), ("slot", "1")],
        tags: "DB1.0 FLOAT32, DB1.6.0 BOOL, DB1.8 STRING(20), DB1.40 FLOAT64, DB2.DBW4 INT16, \
               M10.1 BOOL, MD20 UINT32, I0.3 BOOL, QW2 INT16",
        // The PDU reference of the S7 header (after TPKT and COTP).
        echo: Some(11..13),
    },
    CodecSetup {
        target: "mc",
        settings: &[
            ("series", "Q_L"),
            ("frameType", "FRAME_3E"),
            ("monitorTimer", "4"),
        ],
        tags: "D100 INT16, D300 INT32, M10 BOOL, X1F BOOL, D200.3 BOOL, D400 STRING(6), \
               D500 FLOAT32",
        echo: None,
    },
];

fn setup(target: &str) -> &'static CodecSetup {
    SETUPS
        .iter()
        .find(|s| s.target == target)
        .unwrap_or_else(|| panic!("no codec setup for {target}"))
}

fn drive<C: Codec>(setup: &CodecSetup, session: Result<C, String>, data: &[u8]) {
    let session = session.unwrap_or_else(|e| panic!("{}: the setup is refused: {e}", setup.target));
    one_input(&session, setup.tag_count(), setup.echo.clone(), data);
}

pub fn modbus_tcp(data: &[u8]) {
    let s = setup("modbus_tcp");
    drive(s, modbus_tcp::native::open(s.settings, s.tags), data);
}

pub fn modbus_rtu(data: &[u8]) {
    let s = setup("modbus_rtu");
    drive(s, modbus_rtu::native::open(s.settings, s.tags), data);
}

pub fn s7(data: &[u8]) {
    let s = setup("s7");
    drive(s, s7::native::open(s.settings, s.tags), data);
}

pub fn mc(data: &[u8]) {
    let s = setup("mc");
    drive(s, mc::native::open(s.settings, s.tags), data);
}
