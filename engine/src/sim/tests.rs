//! End-to-end tests over real sockets, with hand-written MBAP frames.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;

/// A small deterministic generator for fuzzing (xorshift64).
pub(super) struct XorShift(pub(super) u64);

impl XorShift {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

const LOCAL: &str = "127.0.0.1:0";

async fn start(registers: u16) -> (Simulator, SimHandle) {
    let sim = Simulator::new(SimConfig {
        registers,
        ..SimConfig::default()
    });
    let addr: SocketAddr = LOCAL.parse().expect("address");
    let handle = sim.serve(addr).await.expect("serve");
    (sim, handle)
}

/// An MBAP frame for `pdu` with transaction id `tid` and unit 1.
fn frame(tid: u16, pdu: &[u8]) -> Vec<u8> {
    let mut f = tid.to_be_bytes().to_vec();
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&(pdu.len() as u16 + 1).to_be_bytes());
    f.push(1);
    f.extend_from_slice(pdu);
    f
}

/// Reads one response frame; returns its transaction id and PDU.
async fn read_frame(stream: &mut TcpStream) -> (u16, Vec<u8>) {
    let mut head = [0u8; 7];
    stream.read_exact(&mut head).await.expect("header");
    assert_eq!(&head[2..4], &[0, 0], "protocol id");
    assert_eq!(head[6], 1, "unit id echoed");
    let len = usize::from(u16::from_be_bytes([head[4], head[5]]));
    let mut pdu = vec![0u8; len - 1];
    stream.read_exact(&mut pdu).await.expect("pdu");
    (u16::from_be_bytes([head[0], head[1]]), pdu)
}

async fn call(stream: &mut TcpStream, pdu: &[u8]) -> Vec<u8> {
    stream.write_all(&frame(0x1234, pdu)).await.expect("write");
    let (tid, response) = read_frame(stream).await;
    assert_eq!(tid, 0x1234);
    response
}

/// True when the server closed the connection (end of stream or reset).
async fn closed(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut byte)).await;
    matches!(read, Ok(Ok(0) | Err(_)))
}

async fn wait_for_connections(sim: &Simulator, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while sim.open_connections() != n {
        assert!(
            Instant::now() < deadline,
            "{} open, want {n}",
            sim.open_connections()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test]
async fn reads_every_table() {
    let (sim, handle) = start(100).await;
    sim.set_holding(10, &[0x0102, 0xA0B0]);
    sim.set_input(98, &[7, 8]);
    sim.set_coil(3, true);
    sim.set_discrete(0, true);
    sim.set_discrete(9, true);
    let mut c = TcpStream::connect(handle.local_addr())
        .await
        .expect("connect");
    assert_eq!(
        call(&mut c, &[3, 0, 10, 0, 2]).await,
        [3, 4, 1, 2, 0xA0, 0xB0]
    );
    assert_eq!(call(&mut c, &[4, 0, 98, 0, 2]).await, [4, 4, 0, 7, 0, 8]);
    assert_eq!(call(&mut c, &[1, 0, 0, 0, 5]).await, [1, 1, 0b1000]);
    assert_eq!(call(&mut c, &[2, 0, 0, 0, 10]).await, [2, 2, 1, 0b10]);
    assert_eq!(sim.requests(), 4);
}

#[tokio::test]
async fn writes_every_kind() {
    let (sim, handle) = start(100).await;
    let mut c = TcpStream::connect(handle.local_addr())
        .await
        .expect("connect");
    assert_eq!(call(&mut c, &[5, 0, 7, 0xFF, 0]).await, [5, 0, 7, 0xFF, 0]);
    assert!(sim.coil(7));
    assert_eq!(call(&mut c, &[5, 0, 7, 0, 0]).await, [5, 0, 7, 0, 0]);
    assert!(!sim.coil(7));
    assert_eq!(
        call(&mut c, &[6, 0, 1, 0xBE, 0xEF]).await,
        [6, 0, 1, 0xBE, 0xEF]
    );
    assert_eq!(sim.holding(1, 1), [0xBEEF]);
    let fc16 = [0x10, 0, 4, 0, 2, 4, 0, 1, 0, 2];
    assert_eq!(call(&mut c, &fc16).await, [0x10, 0, 4, 0, 2]);
    assert_eq!(sim.holding(3, 4), [0, 1, 2, 0]);
    let fc15 = [0x0F, 0, 20, 0, 3, 1, 0b101];
    assert_eq!(call(&mut c, &fc15).await, [0x0F, 0, 20, 0, 3]);
    assert_eq!(
        [sim.coil(20), sim.coil(21), sim.coil(22)],
        [true, false, true]
    );
}

#[tokio::test]
async fn answers_exceptions() {
    let (_sim, handle) = start(100).await;
    let mut c = TcpStream::connect(handle.local_addr())
        .await
        .expect("connect");
    // 1: unknown function.
    assert_eq!(call(&mut c, &[0x2B, 0x0E, 1, 0]).await, [0xAB, 1]);
    assert_eq!(call(&mut c, &[0x07]).await, [0x87, 1]);
    // 2: past the table (100 addresses).
    assert_eq!(call(&mut c, &[3, 0, 99, 0, 2]).await, [0x83, 2]);
    assert_eq!(call(&mut c, &[1, 0, 100, 0, 1]).await, [0x81, 2]);
    assert_eq!(call(&mut c, &[6, 0, 100, 0, 1]).await, [0x86, 2]);
    assert_eq!(call(&mut c, &[5, 0xFF, 0xFF, 0xFF, 0]).await, [0x85, 2]);
    // 3: quantities and values.
    assert_eq!(call(&mut c, &[3, 0, 0, 0, 0]).await, [0x83, 3]);
    assert_eq!(call(&mut c, &[4, 0, 0, 0, 126]).await, [0x84, 3]);
    assert_eq!(call(&mut c, &[2, 0, 0, 0x07, 0xD1]).await, [0x82, 3]);
    assert_eq!(call(&mut c, &[5, 0, 0, 0x12, 0x34]).await, [0x85, 3]);
    // Quantity is checked before the address, as the specification orders.
    assert_eq!(call(&mut c, &[3, 0xFF, 0, 0, 200]).await, [0x83, 3]);
}

#[tokio::test]
async fn full_size_reads_at_the_limits() {
    let (_sim, handle) = start(u16::MAX).await;
    let mut c = TcpStream::connect(handle.local_addr())
        .await
        .expect("connect");
    let r = call(&mut c, &[3, 0xFF, 0x82, 0, 125]).await;
    assert_eq!((r[0], r[1], r.len()), (3, 250, 252));
    let r = call(&mut c, &[1, 0, 0, 0x07, 0xD0]).await;
    assert_eq!((r[0], r[1], r.len()), (1, 250, 252));
    assert_eq!(call(&mut c, &[3, 0xFF, 0x83, 0, 125]).await, [0x83, 2]);
}

#[tokio::test]
async fn answers_pipelined_requests_in_order() {
    let (sim, handle) = start(10).await;
    sim.set_holding(0, &[11, 22]);
    let mut c = TcpStream::connect(handle.local_addr())
        .await
        .expect("connect");
    let mut both = frame(1, &[3, 0, 1, 0, 1]);
    both.extend(frame(2, &[3, 0, 0, 0, 1]));
    c.write_all(&both).await.expect("write");
    assert_eq!(read_frame(&mut c).await, (1, vec![3, 2, 0, 22]));
    assert_eq!(read_frame(&mut c).await, (2, vec![3, 2, 0, 11]));
    // A frame split across writes is reassembled.
    let third = frame(3, &[3, 0, 0, 0, 2]);
    c.write_all(&third[..4]).await.expect("write");
    c.flush().await.expect("flush");
    tokio::time::sleep(Duration::from_millis(20)).await;
    c.write_all(&third[4..]).await.expect("write");
    assert_eq!(read_frame(&mut c).await, (3, vec![3, 4, 0, 11, 0, 22]));
}

#[tokio::test]
async fn bad_headers_close_the_connection() {
    let (sim, handle) = start(10).await;
    let mut bad_protocol = frame(1, &[3, 0, 0, 0, 1]);
    bad_protocol[3] = 1;
    let mut too_short = frame(1, &[3]);
    too_short[5] = 1;
    let mut too_long = frame(1, &[3, 0, 0, 0, 1]);
    too_long[4..6].copy_from_slice(&255u16.to_be_bytes());
    for bad in [bad_protocol, too_short, too_long] {
        let mut c = TcpStream::connect(handle.local_addr())
            .await
            .expect("connect");
        c.write_all(&bad).await.expect("write");
        assert!(closed(&mut c).await);
    }
    assert_eq!(sim.requests(), 0);
    wait_for_connections(&sim, 0).await;
}

#[tokio::test]
async fn counts_open_connections_and_enforces_the_limit() {
    let sim = Simulator::new(SimConfig {
        registers: 10,
        max_connections: 3,
        ..SimConfig::default()
    });
    let handle = sim
        .serve(LOCAL.parse().expect("addr"))
        .await
        .expect("serve");
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(
            TcpStream::connect(handle.local_addr())
                .await
                .expect("connect"),
        );
    }
    wait_for_connections(&sim, 3).await;
    let mut extra = TcpStream::connect(handle.local_addr())
        .await
        .expect("connect");
    assert!(closed(&mut extra).await);
    assert_eq!(sim.open_connections(), 3);
    for c in &mut clients {
        assert_eq!(call(c, &[3, 0, 0, 0, 1]).await, [3, 2, 0, 0]);
    }
    clients.truncate(1);
    wait_for_connections(&sim, 1).await;
    drop(clients);
    wait_for_connections(&sim, 0).await;
}

#[tokio::test]
async fn shutdown_and_drop_close_everything() {
    let (sim, handle) = start(10).await;
    let addr = handle.local_addr();
    let mut c = TcpStream::connect(addr).await.expect("connect");
    wait_for_connections(&sim, 1).await;
    handle.shutdown().await;
    assert_eq!(sim.open_connections(), 0);
    assert!(closed(&mut c).await);
    assert!(TcpStream::connect(addr).await.is_err());

    let handle = sim
        .serve(LOCAL.parse().expect("addr"))
        .await
        .expect("serve");
    let mut c = TcpStream::connect(handle.local_addr())
        .await
        .expect("connect");
    wait_for_connections(&sim, 1).await;
    drop(handle);
    assert!(closed(&mut c).await);
    wait_for_connections(&sim, 0).await;
}

#[tokio::test]
async fn applies_the_response_delay() {
    let sim = Simulator::new(SimConfig {
        registers: 10,
        response_delay: Duration::from_millis(60),
        ..SimConfig::default()
    });
    let handle = sim
        .serve(LOCAL.parse().expect("addr"))
        .await
        .expect("serve");
    let mut c = TcpStream::connect(handle.local_addr())
        .await
        .expect("connect");
    let t = Instant::now();
    call(&mut c, &[3, 0, 0, 0, 1]).await;
    assert!(
        t.elapsed() >= Duration::from_millis(60),
        "{:?}",
        t.elapsed()
    );
    // Pipelined requests each wait their own delay.
    sim.set_response_delay(Duration::from_millis(30));
    let mut both = frame(1, &[3, 0, 0, 0, 1]);
    both.extend(frame(2, &[3, 0, 0, 0, 1]));
    let t = Instant::now();
    c.write_all(&both).await.expect("write");
    assert_eq!(read_frame(&mut c).await.0, 1);
    assert_eq!(read_frame(&mut c).await.0, 2);
    assert!(
        t.elapsed() >= Duration::from_millis(60),
        "{:?}",
        t.elapsed()
    );
    sim.set_response_delay(Duration::ZERO);
    let t = Instant::now();
    call(&mut c, &[3, 0, 0, 0, 1]).await;
    assert!(t.elapsed() < Duration::from_millis(30), "{:?}", t.elapsed());
}

#[tokio::test]
async fn works_with_tokio_modbus() {
    use tokio_modbus::prelude::*;
    let (sim, handle) = start(100).await;
    let mut ctx = tokio_modbus::client::tcp::connect_slave(handle.local_addr(), Slave(7))
        .await
        .expect("connect");
    sim.set_input(0, &[42]);
    let input = ctx
        .read_input_registers(0, 1)
        .await
        .expect("io")
        .expect("no exception");
    assert_eq!(input, [42]);
    ctx.write_multiple_registers(0, &[1, 2, 3])
        .await
        .expect("io")
        .expect("ok");
    let regs = ctx
        .read_holding_registers(0, 3)
        .await
        .expect("io")
        .expect("ok");
    assert_eq!(regs, [1, 2, 3]);
    ctx.write_single_coil(5, true)
        .await
        .expect("io")
        .expect("ok");
    let coils = ctx.read_coils(4, 3).await.expect("io").expect("ok");
    assert_eq!(coils, [false, true, false]);
    let err = ctx.read_holding_registers(99, 2).await.expect("io");
    assert_eq!(err, Err(ExceptionCode::IllegalDataAddress));
}

#[tokio::test]
async fn survives_random_bytes() {
    let (sim, handle) = start(64).await;
    let mut rng = XorShift(0x0DDB_A11C_0FFE_E001);
    // Pure noise: the server must close, not crash.
    for _ in 0..50 {
        let mut c = TcpStream::connect(handle.local_addr())
            .await
            .expect("connect");
        let noise: Vec<u8> = (0..1 + rng.next() % 600)
            .map(|_| rng.next() as u8)
            .collect();
        // The server may close while we write; that is fine.
        let _ = c.write_all(&noise).await;
        let _ = c.shutdown().await;
        let mut sink = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut sink)).await;
    }
    // Valid headers around random PDUs: every one gets an answer, in order.
    let mut c = TcpStream::connect(handle.local_addr())
        .await
        .expect("connect");
    for round in 0..200u16 {
        let len = (rng.next() % 20) as usize;
        let mut pdu: Vec<u8> = (0..=len).map(|_| rng.next() as u8 % 70).collect();
        pdu[0] = [1, 2, 3, 4, 5, 6, 15, 16, pdu[0]][(rng.next() % 9) as usize];
        c.write_all(&frame(round, &pdu)).await.expect("write");
        let (tid, response) = read_frame(&mut c).await;
        assert_eq!(tid, round);
        assert_eq!(response[0] & 0x7F, pdu[0] & 0x7F);
    }
    let mut fresh = TcpStream::connect(handle.local_addr())
        .await
        .expect("connect");
    assert_eq!(call(&mut fresh, &[3, 0, 0, 0, 1]).await.len(), 4);
    drop((c, fresh));
    wait_for_connections(&sim, 0).await;
}
