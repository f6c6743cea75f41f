//! The Modbus TCP codec against tokio-modbus, on the same bytes.
//!
//! One input asks the same thing of both: a read of `q` coils, discrete inputs,
//! holding or input registers from address `a`, or a write of one coil or
//! register. Both must encode the same request (all but the transaction id;
//! FUZZ-7),
//! then agree on the answer: accepted with the same registers or bits, refused
//! with the same exception code, or refused.
//!
//! | byte | meaning |
//! |---|---|
//! | 0 | table (bits 0-1: coils, discrete inputs, holding, input); bit 2 keeps the answer's transaction id; bit 3 writes instead (coils and holding registers) |
//! | 1 | `q - 1` (registers: 1-120, bits: 1-256) |
//! | 2, 3 | `a`, big-endian (moved down so that the range fits) |
//! | 4, 5 | the value a write sends |
//! | rest | the answer |
//!
//! tokio-modbus decodes a frame without the request's quantity: it takes as
//! many registers as the byte count gives, and whole bytes of bits, and its
//! client checks the count only with a `debug_assert`; it does not compare a
//! write's echo with the request. A caller that checks these refuses such an
//! answer, and so does this comparison (see `docs/fuzzing.md`).

use sluice_guest::fuzz::{Codec, Decoded, frame_in};
use sluice_guest::numeric::Number;
use sluice_guest::session::Failure;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_modbus::client::Client;
use tokio_modbus::{Request, Response, Slave};

/// The bytes of an input before the answer.
const HEADER: usize = 6;

/// What a side made of an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Registers(Vec<u16>),
    Bits(Vec<bool>),
    Written,
    Exception(u8),
    Refused,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    Coils,
    Discrete,
    Holding,
    Input,
}

/// What an input asks.
#[derive(Debug, Clone, Copy)]
struct Ask {
    table: Table,
    verbatim: bool,
    write: bool,
    quantity: u16,
    address: u16,
    value: u16,
}

impl Ask {
    fn of(head: &[u8; HEADER]) -> Self {
        let table = match head[0] & 3 {
            0 => Table::Coils,
            1 => Table::Discrete,
            2 => Table::Holding,
            _ => Table::Input,
        };
        let bits = matches!(table, Table::Coils | Table::Discrete);
        let write = head[0] & 8 != 0 && matches!(table, Table::Coils | Table::Holding);
        let quantity = match (write, bits) {
            (true, _) => 1,
            (false, true) => u16::from(head[1]) + 1,
            (false, false) => u16::from(head[1]) % 120 + 1,
        };
        let address = u16::from_be_bytes([head[2], head[3]]).min(u16::MAX - quantity + 1);
        Ask {
            table,
            verbatim: head[0] & 4 != 0,
            write,
            quantity,
            address,
            value: u16::from_be_bytes([head[4], head[5]]),
        }
    }

    /// Our session's tags: one a register or bit, in address order.
    fn tags(&self) -> String {
        let (prefix, data_type) = match self.table {
            Table::Coils => ("co", "BOOL"),
            Table::Discrete => ("di", "BOOL"),
            Table::Holding => ("hr", "UINT16"),
            Table::Input => ("ir", "UINT16"),
        };
        (0..self.quantity)
            .map(|i| {
                format!(
                    "{prefix}:{} {data_type}",
                    u32::from(self.address) + u32::from(i)
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn request(&self) -> Request<'static> {
        let (a, q) = (self.address, self.quantity);
        match (self.table, self.write) {
            (Table::Coils, true) => Request::WriteSingleCoil(a, self.value & 1 != 0),
            (Table::Holding, true) => Request::WriteSingleRegister(a, self.value),
            (Table::Coils, _) => Request::ReadCoils(a, q),
            (Table::Discrete, _) => Request::ReadDiscreteInputs(a, q),
            (Table::Holding, _) => Request::ReadHoldingRegisters(a, q),
            (Table::Input, _) => Request::ReadInputRegisters(a, q),
        }
    }

    fn write_value(&self) -> Number {
        match self.table {
            Table::Coils => Number::Bool(self.value & 1 != 0),
            _ => Number::Uint(u64::from(self.value)),
        }
    }

    /// The answer to `sent`: the input's bytes with the request's transaction
    /// id or, when the input keeps its own, with it moved by `shift`: the
    /// sides number their requests from different starts, and an answer must
    /// match (or miss) each side's request alike.
    fn answer(&self, answer: &[u8], sent: &[u8], shift: u16) -> Vec<u8> {
        let mut frame = answer.to_vec();
        if let (Some(tid), Some(own)) = (frame.get_mut(..2), sent.get(..2)) {
            let kept = u16::from_be_bytes([tid[0], tid[1]]).wrapping_add(shift);
            let id = if self.verbatim {
                kept.to_be_bytes()
            } else {
                [own[0], own[1]]
            };
            tid.copy_from_slice(&id);
        }
        frame
    }
}

/// The transaction id of a request.
fn tid(sent: &[u8]) -> u16 {
    u16::from_be_bytes([sent[0], sent[1]])
}

/// The input's request and answer, and our session for it.
fn split(data: &[u8]) -> Option<(Ask, &[u8], impl Codec + use<>)> {
    let head = <[u8; HEADER]>::try_from(data.get(..HEADER)?).ok()?;
    let ask = Ask::of(&head);
    let session = modbus_tcp::native::open(&[("unitId", "1")], &ask.tags())
        .unwrap_or_else(|e| panic!("{ask:?}: the session is refused: {e}"));
    Some((ask, &data[HEADER..], session))
}

/// The request the codec sends for an input (whose answer may be empty), for
/// capturing a device's answer to it.
pub fn request(data: &[u8]) -> Option<Vec<u8>> {
    let (ask, _, session) = split(data)?;
    Some(encode(&session, &ask).1)
}

pub fn run(data: &[u8]) {
    let Some((ask, answer, session)) = split(data) else {
        return;
    };
    let (ours_sent, ours) = ours(&session, &ask, answer);
    let (theirs_sent, theirs) = theirs(&ask, answer, tid(&ours_sent));
    assert_eq!(
        ours_sent.get(2..),
        theirs_sent.get(2..),
        "{ask:?}: the requests differ beyond the transaction id"
    );
    assert_eq!(
        ours, theirs,
        "{ask:?}: the two decoders disagree on {answer:02x?}"
    );
}

/// The request of `ask` and, for a read, its id.
fn encode(session: &impl Codec, ask: &Ask) -> (Option<u32>, Vec<u8>) {
    if ask.write {
        let sent = session.encode_write(0, ask.write_value());
        (None, sent.unwrap_or_else(|e| panic!("{ask:?}: {e:?}")))
    } else {
        let plan = session.plan((0..u32::from(ask.quantity)).collect());
        assert_eq!(plan.len(), 1, "{ask:?}: one request expected");
        let sent = session.encode_read(plan[0].id);
        let sent = sent.unwrap_or_else(|e| panic!("{ask:?}: {e:?}"));
        (Some(plan[0].id), sent)
    }
}

/// The engine's way: `frame-length` on the head, then the whole frame.
fn ours(session: &impl Codec, ask: &Ask, answer: &[u8]) -> (Vec<u8>, Verdict) {
    let (id, sent) = encode(session, ask);
    let frame = ask.answer(answer, &sent, 0);
    // Refused, or fewer bytes than the header announces: the connection ended first.
    let Some(found) = frame_in(session, &frame) else {
        return (sent, Verdict::Refused);
    };
    let frame = &frame[found];
    let verdict = match id {
        None => session
            .check_write(frame.to_vec())
            .map(|()| Verdict::Written),
        Some(id) => session
            .parse_read(id, frame.to_vec(), 0)
            .map(|d| values(ask, &d)),
    };
    let verdict = verdict.unwrap_or_else(|failure| match failure {
        Failure::Device { code, .. } => {
            u8::try_from(code).map_or(Verdict::Refused, Verdict::Exception)
        }
        Failure::Malformed(_) => Verdict::Refused,
    });
    (sent, verdict)
}

fn values(ask: &Ask, decoded: &Decoded) -> Verdict {
    assert_eq!(
        decoded.samples.len(),
        usize::from(ask.quantity),
        "a sample a tag"
    );
    let mut samples = decoded.samples.clone();
    samples.sort_by_key(|s| s.tag);
    match ask.table {
        Table::Coils | Table::Discrete => Verdict::Bits(
            samples
                .iter()
                .map(|s| match s.value {
                    Some(Number::Bool(bit)) => bit,
                    ref other => panic!("{other:?} for a bit"),
                })
                .collect(),
        ),
        Table::Holding | Table::Input => Verdict::Registers(
            samples
                .iter()
                .map(|s| {
                    let (start, len) = s.span.expect("a register's raw bytes");
                    assert_eq!(len, 2, "a register of {len} bytes");
                    let at = start as usize;
                    u16::from_be_bytes([decoded.bytes[at], decoded.bytes[at + 1]])
                })
                .collect(),
        ),
    }
}

thread_local! {
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime");
}

/// tokio-modbus's client over an in-memory stream whose other end answers
/// with the input and then closes.
fn theirs(ask: &Ask, answer: &[u8], ours: u16) -> (Vec<u8>, Verdict) {
    RUNTIME.with(|runtime| {
        runtime.block_on(async {
            let (client_end, mut device_end) = tokio::io::duplex(1 << 17);
            let mut client = tokio_modbus::client::tcp::attach_slave(client_end, Slave(1));
            let device = async move {
                // Every request asked here is 12 bytes: MBAP header and 5 PDU bytes.
                let mut sent = vec![0; 12];
                if device_end.read_exact(&mut sent).await.is_ok() {
                    let shift = tid(&sent).wrapping_sub(ours);
                    let _ = device_end
                        .write_all(&ask.answer(answer, &sent, shift))
                        .await;
                }
                sent
            };
            let (sent, response) = tokio::join!(device, client.call(ask.request()));
            (sent, verdict(ask, response))
        })
    })
}

fn verdict(ask: &Ask, response: tokio_modbus::Result<Response>) -> Verdict {
    let q = usize::from(ask.quantity);
    match response {
        Err(_) => Verdict::Refused,
        Ok(Err(code)) => Verdict::Exception(u8::from(code)),
        Ok(Ok(response)) => match response {
            Response::ReadHoldingRegisters(words) | Response::ReadInputRegisters(words) => {
                if words.len() == q {
                    Verdict::Registers(words)
                } else {
                    Verdict::Refused
                }
            }
            Response::ReadCoils(bits) | Response::ReadDiscreteInputs(bits) => {
                if bits.len() == q.div_ceil(8) * 8 {
                    Verdict::Bits(bits[..q].to_vec())
                } else {
                    Verdict::Refused
                }
            }
            Response::WriteSingleRegister(address, value) => {
                if (address, value) == (ask.address, ask.value) {
                    Verdict::Written
                } else {
                    Verdict::Refused
                }
            }
            Response::WriteSingleCoil(address, on) => {
                if (address, on) == (ask.address, ask.value & 1 != 0) {
                    Verdict::Written
                } else {
                    Verdict::Refused
                }
            }
            other => panic!("{ask:?}: tokio-modbus answered {other:?}"),
        },
    }
}
