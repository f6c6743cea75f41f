//! Checks the peer harness of `crate::support::peers` and the behaviour of the peers
//! themselves that the engine's integration tests rely on, using tokio-modbus
//! as an independent client. Needs `scripts/setup-peers.sh` to have run.

use std::time::{Duration, Instant};

use crate::support::peers::{
    LibModbus, Mosquitto, Peer, PyModbus, free_port, local, wait_for_port,
};
use serde_json::json;
use tokio_modbus::client::{Context, tcp};
use tokio_modbus::prelude::*;

const ILLEGAL: Option<ExceptionCode> = Some(ExceptionCode::IllegalDataAddress);

/// Opens a Modbus TCP client to the peer, addressing `unit`.
async fn client(peer: &Peer, unit: u8) -> Context {
    tcp::connect_slave(peer.addr(), Slave(unit))
        .await
        .unwrap_or_else(|e| panic!("connect to {}: {e}\n{}", peer.addr(), peer.log()))
}

/// The payload of a normal answer; an exception or transport error fails the
/// test.
fn ok<T>(answer: tokio_modbus::Result<T>) -> T {
    answer.expect("transport").expect("a normal answer")
}

/// The Modbus exception a request was answered with, `None` for a normal
/// answer; a transport error fails the test.
fn exception<T>(answer: tokio_modbus::Result<T>) -> Option<ExceptionCode> {
    answer.expect("transport").err()
}

/// A map with two holding-register ranges, an input-register range, and coil
/// and discrete-input ranges that do not start on a 16-bit boundary.
fn sample_map() -> serde_json::Value {
    json!({
        "hr": {"0": [1, 2, 3], "100": [7]},
        "ir": {"10": [42, 43]},
        "co": {"0": [1, 0, 1], "40": [1]},
        "di": {"5": [1, 0]}
    })
}

#[tokio::test]
async fn pymodbus_serves_the_listed_ranges_on_any_unit_id() {
    let peer = PyModbus::start(&sample_map());
    for unit in [1, 7] {
        let mut ctx = client(&peer, unit).await;
        assert_eq!(ok(ctx.read_holding_registers(0, 3).await), [1, 2, 3]);
        assert_eq!(ok(ctx.read_holding_registers(100, 1).await), [7]);
        assert_eq!(ok(ctx.read_input_registers(10, 2).await), [42, 43]);
        assert_eq!(ok(ctx.read_coils(0, 3).await), [true, false, true]);
        assert_eq!(ok(ctx.read_coils(40, 1).await), [true]);
        assert_eq!(ok(ctx.read_discrete_inputs(5, 2).await), [true, false]);
    }
}

#[tokio::test]
async fn pymodbus_answers_illegal_data_address_outside_the_ranges() {
    let map = json!({"hr": {"0": [1, 2, 3], "100": [7]}, "co": {"0": [1, 0, 1]}});
    let peer = PyModbus::start(&map);
    let mut ctx = client(&peer, 1).await;

    // Addresses in no range, and reads straddling the edge of a range.
    assert_eq!(exception(ctx.read_holding_registers(50, 1).await), ILLEGAL);
    assert_eq!(exception(ctx.read_holding_registers(3, 1).await), ILLEGAL);
    assert_eq!(exception(ctx.read_holding_registers(2, 2).await), ILLEGAL);
    assert_eq!(exception(ctx.read_holding_registers(99, 2).await), ILLEGAL);
    // pymodbus stores bits in 16-bit words and on its own would answer the
    // unlisted bits of a word with 0; the server's range check refuses them.
    assert_eq!(exception(ctx.read_coils(3, 1).await), ILLEGAL);
    assert_eq!(exception(ctx.read_coils(1, 3).await), ILLEGAL);
    // Tables the map leaves out have no addresses at all.
    assert_eq!(exception(ctx.read_input_registers(0, 1).await), ILLEGAL);
    assert_eq!(exception(ctx.read_discrete_inputs(0, 1).await), ILLEGAL);
    // Writes are held to the same ranges.
    assert_eq!(exception(ctx.write_single_register(3, 9).await), ILLEGAL);
    assert_eq!(exception(ctx.write_single_coil(3, true).await), ILLEGAL);
    // The connection survives exceptions.
    assert_eq!(ok(ctx.read_holding_registers(0, 1).await), [1]);
}

#[tokio::test]
async fn pymodbus_accepts_writes_and_reads_them_back() {
    let peer = PyModbus::start(&sample_map());
    let mut ctx = client(&peer, 1).await;

    // FC06 and FC16 on holding registers.
    ok(ctx.write_single_register(1, 999).await);
    ok(ctx.write_multiple_registers(2, &[0xBEEF]).await);
    assert_eq!(ok(ctx.read_holding_registers(0, 3).await), [1, 999, 0xBEEF]);

    // FC05 and FC15 on coils.
    ok(ctx.write_single_coil(1, true).await);
    assert_eq!(ok(ctx.read_coils(0, 3).await), [true, true, true]);
    ok(ctx.write_multiple_coils(0, &[false, true, false]).await);
    assert_eq!(ok(ctx.read_coils(0, 3).await), [false, true, false]);
}

#[tokio::test]
async fn pymodbus_comes_back_on_the_same_port_after_a_kill() {
    let map = sample_map();
    let mut peer = PyModbus::start(&map);
    let port = peer.port();
    peer.kill();
    assert!(
        !wait_for_port(port, Duration::from_millis(50)),
        "port still open after kill"
    );
    drop(peer);

    let peer = PyModbus::restart_on(port, &map);
    assert_eq!(peer.port(), port);
    let mut ctx = client(&peer, 1).await;
    assert_eq!(ok(ctx.read_holding_registers(0, 3).await), [1, 2, 3]);
}

#[tokio::test]
async fn libmodbus_serves_its_known_values() {
    let peer = LibModbus::start();
    let n = LibModbus::SIZE;
    let mut ctx = client(&peer, 1).await;

    // Registers in two reads (at most 125 per request), bits in one.
    let mut hr = ok(ctx.read_holding_registers(0, 100).await);
    hr.extend(ok(ctx.read_holding_registers(100, 100).await));
    assert_eq!(hr, (0..n).map(LibModbus::holding).collect::<Vec<_>>());
    let mut ir = ok(ctx.read_input_registers(0, 100).await);
    ir.extend(ok(ctx.read_input_registers(100, 100).await));
    assert_eq!(ir, (0..n).map(LibModbus::input).collect::<Vec<_>>());
    let co = ok(ctx.read_coils(0, n).await);
    assert_eq!(co, (0..n).map(LibModbus::coil).collect::<Vec<_>>());
    let di = ok(ctx.read_discrete_inputs(0, n).await);
    assert_eq!(di, (0..n).map(LibModbus::discrete).collect::<Vec<_>>());

    // Spot checks against the formulas written out.
    assert_eq!(ok(ctx.read_holding_registers(199, 1).await), [598]);
    assert_eq!(ok(ctx.read_input_registers(7, 1).await), [1007]);
    assert_eq!(ok(ctx.read_coils(0, 2).await), [false, true]);
    assert_eq!(
        ok(ctx.read_discrete_inputs(0, 4).await),
        [true, false, false, true]
    );
}

#[tokio::test]
async fn libmodbus_answers_illegal_data_address_beyond_199() {
    let peer = LibModbus::start();
    let mut ctx = client(&peer, 1).await;
    assert_eq!(exception(ctx.read_holding_registers(200, 1).await), ILLEGAL);
    assert_eq!(exception(ctx.read_holding_registers(199, 2).await), ILLEGAL);
    assert_eq!(exception(ctx.read_input_registers(200, 1).await), ILLEGAL);
    assert_eq!(exception(ctx.read_coils(150, 51).await), ILLEGAL);
    assert_eq!(exception(ctx.read_discrete_inputs(200, 1).await), ILLEGAL);
    assert_eq!(ok(ctx.read_holding_registers(199, 1).await), [598]);
    ctx.disconnect().await.expect("disconnect");
    drop(ctx);

    // One client at a time, but a new one is served once the last has gone.
    let mut ctx = client(&peer, 1).await;
    assert_eq!(ok(ctx.read_holding_registers(0, 1).await), [1]);
}

#[tokio::test]
async fn mosquitto_listens_and_restarts_on_the_same_port() {
    let mut peer = Mosquitto::start();
    let port = peer.port();
    let first_pid = peer.pid();
    assert!(
        wait_for_port(port, Duration::from_secs(1)),
        "{}",
        peer.log()
    );

    // A graceful restart saves the persistence file and comes back in place.
    peer.restart();
    assert_eq!(peer.port(), port);
    assert_ne!(peer.pid(), first_pid);
    assert!(peer.is_running());
    assert!(
        wait_for_port(port, Duration::from_secs(1)),
        "{}",
        peer.log()
    );
    assert!(
        peer.dir().join("data/mosquitto.db").exists(),
        "no persistence file after a graceful stop\n{}",
        peer.log()
    );

    // A crash (kill) and a start again work too.
    peer.kill();
    assert!(!peer.is_running());
    peer.restart();
    assert!(
        wait_for_port(port, Duration::from_secs(1)),
        "{}",
        peer.log()
    );
}

#[test]
fn a_peer_that_dies_at_startup_fails_fast_with_its_log() {
    let started = Instant::now();
    let outcome = std::panic::catch_unwind(|| PyModbus::start(&json!({"nonsense": {}})));
    let payload = outcome.err().expect("a bad map must fail the start");
    let message = payload
        .downcast_ref::<String>()
        .expect("formatted panic message");
    assert!(message.contains("exited"), "{message}");
    // The server's own complaint, read from its log.
    assert!(message.contains("unknown tables"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(5), "{message}");

    // A panicking start keeps the peer's files for inspection; this failure
    // was intended, so remove them (the log path is in the message).
    let log = message
        .lines()
        .find_map(|line| line.strip_prefix("--- ")?.strip_suffix(" (last lines) ---"))
        .expect("log path in the message");
    let dir = std::path::Path::new(log).parent().expect("scratch dir");
    std::fs::remove_dir_all(dir).expect("remove kept scratch dir");
}

#[test]
fn wait_for_port_gives_up_within_its_bound() {
    let port = free_port();
    let started = Instant::now();
    assert!(!wait_for_port(port, Duration::from_millis(100)));
    assert!(started.elapsed() < Duration::from_secs(2));
    // `local` is the address every peer binds.
    assert!(local(port).ip().is_loopback());
}
