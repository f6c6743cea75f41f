//! Captures the fuzz targets' seed corpora (`cargo xtask fuzz --seed`).
//!
//! The codec targets' seeds are real answers: each target's session (the same
//! settings and tags as the target's) sends its handshakes, reads and writes to
//! a real peer (pymodbus, libmodbus, snap7, virtual-plc) and every answer is
//! stored as a fuzz input that replays it; each must be accepted, or refused as
//! the device error it is. The other targets' seeds are the shipped
//! configuration and pipelines and messages built with the engine's own types.
//! Run on purpose only: it rewrites `corpus/`.

#[path = "../../engine/tests/it/support/peers.rs"]
#[allow(dead_code)]
mod peers;

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use peers::{LibModbus, Peer, PyModbus, Snap7, VirtualPlc, project_root};
use prost::Message as _;
use serde_json::json;
use sluice::mqtt::sparkplug::{Metric, MetricValue, Payload};
use sluice::wal::{Message, encode};
use sluice_fuzz::{CodecSetup, SETUPS};
use sluice_guest::fuzz::{Call, Codec, Input, Outcome, Size, one_input};
use sluice_guest::numeric::Number;

/// Where each target's corpus is written, emptied first.
fn corpus(target: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("corpus directory");
    dir
}

fn save(dir: &Path, name: &str, bytes: &[u8]) {
    fs::write(dir.join(name), bytes).expect("seed written");
}

/// One connection to a peer, exchanging whole frames as the session frames them.
struct Line(TcpStream);

impl Line {
    fn open(peer: &Peer) -> Self {
        let stream = TcpStream::connect(peer.addr()).expect("connects");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        Line(stream)
    }

    fn exchange(&mut self, codec: &impl Codec, sent: &[u8]) -> Vec<u8> {
        self.0.write_all(sent).expect("sent");
        let mut answer = vec![0; codec.header_len() as usize];
        self.0.read_exact(&mut answer).expect("an answer's header");
        let Ok(Size::Length(len)) = codec.frame_length(answer.clone()) else {
            panic!("the built-in codecs size an answer from its header");
        };
        let len = len as usize;
        answer.resize(len, 0);
        let header = codec.header_len() as usize;
        self.0
            .read_exact(&mut answer[header..])
            .expect("the answer");
        answer
    }
}

/// Captures a codec target's seeds from `peer`: handshakes (sent by a session
/// of their own, which then stays unused), then every planned read and a write
/// of each tag, from a fresh session as the target opens it.
fn capture<C: Codec>(setup: &CodecSetup, peer: &Peer, open: impl Fn() -> C, values: &[Number]) {
    let dir = corpus(setup.target);
    let tags = setup.tag_count();
    let mut line = Line::open(peer);
    let keep = |name: String, input: Input<'_>, accepted_only: bool| {
        let bytes = input.to_bytes();
        let outcome = one_input(&open(), tags, setup.echo.clone(), &bytes);
        if accepted_only {
            assert_eq!(
                outcome,
                Outcome::Accepted,
                "{}: {name} is refused",
                setup.target
            );
        }
        save(&dir, &name, &bytes);
    };
    let handshaken = open();
    for step in 0..4 {
        let Some(sent) = handshaken.handshake(step) else {
            break;
        };
        let answer = line.exchange(&handshaken, &sent);
        let input = captured(Call::Handshake, step, Number::Int(0), &answer);
        keep(format!("handshake-{step}"), input, true);
    }
    let session = open();
    let plan = session.plan((0..tags).collect());
    for (index, read) in plan.iter().enumerate() {
        let sent = session.encode_read(read.id).expect("a read request");
        let answer = line.exchange(&session, &sent);
        let head = captured(Call::Head, 0, Number::Int(0), &answer);
        keep(format!("head-{index}"), head, true);
        let input = captured(Call::Read, index as u32, Number::Int(0), &answer);
        // A device error (an address the peer lacks) is a seed too.
        keep(format!("read-{index}"), input, false);
    }
    for tag in 0..tags {
        for (v, value) in values.iter().enumerate() {
            let Ok(sent) = session.encode_write(tag, value.clone()) else {
                continue;
            };
            let answer = line.exchange(&session, &sent);
            let input = captured(Call::Write, tag, value.clone(), &answer);
            keep(format!("write-{tag}-{v}"), input, false);
        }
    }
    let saved = fs::read_dir(&dir).map(Iterator::count).unwrap_or(0);
    assert!(
        saved >= plan.len() * 2,
        "{}: only {saved} seeds",
        setup.target
    );
}

/// The input that replays a captured `answer` to call `call` of `index`.
fn captured(call: Call, index: u32, value: Number, answer: &[u8]) -> Input<'_> {
    Input {
        call,
        verbatim: false,
        index: index as u8,
        value,
        answer,
    }
}

fn setup(target: &str) -> &'static CodecSetup {
    SETUPS.iter().find(|s| s.target == target).expect("a setup")
}

/// Registers and bits for the Modbus setup's tags, leaving out holding
/// registers 40-49 and discrete input 19 so that some reads fail.
fn modbus_map() -> serde_json::Value {
    json!({
        "hr": {"0": (0..40).map(|i| i * 7 + 1).collect::<Vec<_>>()},
        "ir": {"0": (0..20).map(|i| 1000 + i).collect::<Vec<_>>()},
        "co": {"0": (0..16).map(|i| i % 2).collect::<Vec<_>>()},
        "di": {"0": (0..19).map(|i| i % 3 % 2).collect::<Vec<_>>()}
    })
}

const VALUES: &[Number] = &[Number::Int(1), Number::Bool(true), Number::Float(2.5)];

#[test]
#[ignore = "rewrites the corpora; run by `cargo xtask fuzz --seed`"]
fn capture_codec_seeds_from_the_real_peers() {
    let s = setup("modbus_tcp");
    let pymodbus = PyModbus::start(&modbus_map());
    capture(
        s,
        &pymodbus,
        || modbus_tcp::native::open(s.settings, s.tags).expect("opens"),
        VALUES,
    );

    let s = setup("modbus_rtu");
    let rtu = PyModbus::rtu_over_tcp(&modbus_map(), &[1]);
    capture(
        s,
        &rtu,
        || modbus_rtu::native::open(s.settings, s.tags).expect("opens"),
        VALUES,
    );

    let s = setup("s7");
    let snap7 = Snap7::start(&json!({
        "db": {"1": (0..64).map(|i| i * 3 % 256).collect::<Vec<_>>(), "2": vec![0; 8]},
        "mk": vec![7; 32], "pe": vec![1; 8], "pa": vec![2; 8]
    }));
    capture(
        s,
        &snap7,
        || s7::native::open(s.settings, s.tags).expect("opens"),
        VALUES,
    );

    let s = setup("mc");
    let plc = VirtualPlc::start(
        "Q",
        &json!({"D": {"100": [1, 2, 3], "200": [8], "300": [4, 5], "400": [0x4142, 0x4344, 0x4546],
                      "500": [0, 0x4040]},
                "M": {"0": vec![1; 16]}, "X": {"0": vec![0; 32]}}),
        None,
        &[],
    );
    capture(
        s,
        &plc,
        || mc::native::open(s.settings, s.tags).expect("opens"),
        VALUES,
    );
}

/// The differential target's inputs: reads of each table, in range and past
/// libmodbus's 200 addresses (exception 2), and writes, with libmodbus's answers.
#[test]
#[ignore = "rewrites the corpora; run by `cargo xtask fuzz --seed`"]
fn capture_differential_seeds_from_libmodbus() {
    let dir = corpus("modbus_tcp_vs_tokio_modbus");
    let server = LibModbus::start();
    let mut stream = TcpStream::connect(server.addr()).expect("connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let asks: &[(u8, u8, u16, u16)] = &[
        (0, 9, 3, 0),
        (1, 23, 0, 0),
        (2, 9, 10, 0),
        (3, 119, 0, 0),
        (2, 0, 199, 0),
        (2, 4, 198, 0),
        (0, 255, 100, 0),
        (8, 0, 5, 1),
        (10, 0, 7, 0xBEEF),
        (10, 0, 250, 1),
    ];
    for (n, &(flags, q, address, value)) in asks.iter().enumerate() {
        let mut input = vec![flags, q];
        input.extend_from_slice(&address.to_be_bytes());
        input.extend_from_slice(&value.to_be_bytes());
        // The request both sides send; the answer is libmodbus's.
        let request = sluice_fuzz::differential_request(&input).expect("a whole header");
        stream.write_all(&request).expect("sent");
        let mut head = [0; 6];
        stream.read_exact(&mut head).expect("a header");
        let len = usize::from(u16::from_be_bytes([head[4], head[5]]));
        let mut rest = vec![0; len];
        stream.read_exact(&mut rest).expect("the answer");
        input.extend_from_slice(&head);
        input.extend_from_slice(&rest);
        save(&dir, &format!("libmodbus-{n}"), &input);
        sluice_fuzz::target("modbus_tcp_vs_tokio_modbus")
            .expect("the target")
            .run(&input);
    }
}

fn copy_documents(target: &str, sources: &[&str]) {
    let dir = corpus(target);
    let root = project_root();
    for source in sources {
        let path = root.join(source);
        let name = source.replace('/', "-");
        fs::copy(&path, dir.join(name)).unwrap_or_else(|e| panic!("{source}: {e}"));
    }
}

#[test]
#[ignore = "rewrites the corpora; run by `cargo xtask fuzz --seed`"]
fn write_the_document_and_message_seeds() {
    copy_documents(
        "device_config",
        &[
            "config/collector-devices.yaml",
            "engine/src/config/testdata/seed.yaml",
        ],
    );
    copy_documents("pipeline", &["pipelines/default.yaml"]);

    let dir = corpus("wal_record");
    let messages = [
        Message {
            device: "press-1".into(),
            seq: 42,
            topic: "sluice/press-1/property/post".into(),
            payload: br#"{"ts":1,"values":{"temp":21.5}}"#.to_vec().into(),
            retain: false,
        },
        Message {
            device: String::new(),
            seq: 0,
            topic: "sluice/gateway/state".into(),
            payload: b"online".to_vec().into(),
            retain: true,
        },
    ];
    for (n, message) in messages.iter().enumerate() {
        for flags in [0u8, 1] {
            save(
                &dir,
                &format!("record-{n}-{flags}"),
                &[&[flags], &encode(message)[..]].concat(),
            );
        }
    }

    let dir = corpus("downlink");
    let requests = [
        json!({"requestId": "r1", "key": "t1", "value": 12}),
        json!({"requestId": "r2", "key": "t0", "value": true, "realtime": false}),
        json!({"requestId": "r3", "key": "t11", "value": "AB", "function": true}),
        json!({"deviceId": "press-1", "key": "t7", "value": -1.5e3}),
    ];
    for (n, request) in requests.iter().enumerate() {
        save(
            &dir,
            &format!("request-{n}"),
            &[&[0u8], request.to_string().as_bytes()].concat(),
        );
    }
    let metric = |name: &str, value: MetricValue| Metric {
        name: Some(name.into()),
        value: Some(value),
        ..Metric::default()
    };
    let dcmd = Payload {
        timestamp: Some(1_700_000_000_000),
        metrics: vec![
            metric("t1", MetricValue::Int(7)),
            metric("t8", MetricValue::Double(2.5)),
            metric("t0", MetricValue::Boolean(true)),
            metric("missing", MetricValue::Long(1)),
        ],
        seq: Some(0),
    };
    save(&dir, "dcmd", &[&[1u8], &dcmd.encode_to_vec()[..]].concat());
    let ncmd = Payload {
        timestamp: Some(1),
        metrics: vec![metric("Node Control/Rebirth", MetricValue::Boolean(true))],
        seq: None,
    };
    save(&dir, "ncmd", &[&[2u8], &ncmd.encode_to_vec()[..]].concat());
    let push = json!({
        "requestId": "p1", "deviceId": "press-2", "productId": "P1", "deviceNum": "D2",
        "channels": [{
            "channelId": "ch-1", "protocol": "modbus_tcp", "host": "127.0.0.1", "port": 502,
            "unitId": 1,
            "tags": [
                {"key": "temp", "address": "40001", "dataType": "INT16", "factor": 0.1,
                 "periodMs": 1000, "access": "RW"},
                {"key": "run", "address": "00001", "dataType": "BOOL", "periodMs": 500}
            ]
        }]
    });
    save(
        &dir,
        "push",
        &[&[3u8], push.to_string().as_bytes()].concat(),
    );

    let dir = corpus("http_body");
    let bodies = [
        json!({"key": "temp", "value": 21, "requestId": "r1"}),
        json!({"nodeId": "node-1", "max": 10}),
        json!({"nodeId": "node-1", "claimGeneration": 3, "result": "SUCCEEDED", "resultCode": 0}),
        json!({"deviceId": "press-1", "type": "door-open", "ts": 1, "eventId": "e1"}),
        json!({"state": "maintain"}),
    ];
    for (n, body) in bodies.iter().enumerate() {
        save(
            &dir,
            &format!("body-{n}"),
            &[&[n as u8], body.to_string().as_bytes()].concat(),
        );
    }
}
