//! Tests of the Modbus session both codecs share, each crate running them over
//! its own framing (its tests' `Server`).

use alloc::vec;
use alloc::vec::Vec;

use super::*;

/// The one request of a plan of every tag: its id and frame.
pub(super) fn read_all_tags(s: &ModbusSession) -> (u32, Vec<u8>) {
    let reads = s.plan((0..s.tags.len() as u32).collect());
    assert_eq!(reads.len(), 1, "one request expected");
    (reads[0].id, s.encode_read(reads[0].id).expect("encodes"))
}

/// The answer PDU of a device with random data to the read request PDU
/// `request` (function, address, count), in full.
pub(super) fn full_read_answer(request: &[u8], rng: &mut sluice_guest::fuzz::Rng) -> Vec<u8> {
    let count = usize::from(u16::from_be_bytes([request[3], request[4]]));
    let len = if request[0] <= 2 {
        count.div_ceil(8)
    } else {
        count * 2
    };
    let mut pdu = vec![request[0], len as u8];
    pdu.extend(rng.bytes(len));
    pdu
}

#[test]
fn random_and_mutated_frames_never_panic() {
    let tags = specs(
        "40001 INT16, 40002 FLOAT64, 40008.15 BOOL, hr:20 STRING(5), 00001 BOOL, 00008 BOOL, \
         10001 BOOL, 30001 UINT32",
    );
    for settings in [vec![], vec![setting("writeMultiple", Sv::Boolean(true))]] {
        let s = session(&settings, tags.clone());
        let reached = fuzz::run(&s, &Server, 8, 0x9E37_79B9_7F4A_7C15, 10_000);
        assert!(reached.reads > 500 && reached.writes > 50, "{reached:?}");
    }
}
