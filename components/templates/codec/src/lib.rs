//! A codec: the framing and decoding of a device protocol. The engine owns the
//! connection, every timeout and the buffers; the codec turns the tags due in a
//! round into request frames, tells the engine how long an answer is, and
//! turns answers into raw samples (the pipeline's `decode` stage makes values of
//! them, in each tag's data type and byte order).
//!
//! This one speaks a small register protocol, to be replaced by yours:
//! - a read is `A5 UNIT ADDR_HI ADDR_LO` (one register address a request);
//! - an answer is `A5 UNIT ADDR_HI ADDR_LO STATUS LEN DATA...`, after any number
//!   of `FE` wake-up bytes; a `STATUS` other than 0 is the device's refusal.
//!
//! A channel names it `protocol: registers` (`fn protocols` declares the name,
//! the transports and the settings). Channel setting: `unit` (0-255, default
//! 1). A tag's `address` is the register number, 0-65535. Writes are refused.
//!
//! Build: `cargo build --release --target wasm32-wasip2`; check:
//! `sluice component check target/wasm32-wasip2/release/NAME.wasm` (README.md).
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::format;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;

use sluice::dataflow::types::{Batch, ConfigError, Setting, Span, TagSpec, Value};

/// The first byte of every frame.
const START: u8 = 0xA5;
/// A wake-up byte some devices send before an answer.
const WAKE_UP: u8 = 0xFE;
/// Bytes of an answer before its data: start, unit, address, status, length.
const HEAD_LEN: usize = 6;

/// A session: one device's tags on one channel.
pub struct Registers {
    unit: u8,
    /// Each tag's register address and the bytes its data type takes.
    tags: Vec<(u16, usize)>,
    /// The tag whose read was sent last, for checking its answer.
    sent: Cell<Option<u32>>,
}

impl Registers {
    /// Checks the channel's settings and tags (every problem, each at its key).
    fn create(settings: &[Setting], tags: Vec<TagSpec>) -> Result<Self, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let mut unit = 1;
        each_setting(settings, &mut errors, |key, value| match key {
            "unit" => match value.as_u32().and_then(|v| u8::try_from(v).ok()) {
                Some(v) => {
                    unit = v;
                    Ok(())
                }
                None => Err(format!("`unit` is 0 to 255, not {}", value.kind())),
            },
            other => Err(format!(
                "unknown setting `{other}`: this protocol has `unit`"
            )),
        });
        let mut checked = Vec::new();
        for (index, tag) in tags.iter().enumerate() {
            match tag.address.parse::<u16>() {
                Ok(address) => checked.push((address, tag_data_type(tag).byte_len())),
                Err(_) => errors.push(ConfigError {
                    tag: Some(index as u32),
                    key: "address".into(),
                    message: format!("`{}` is not a register number (0 to 65535)", tag.address),
                }),
            }
        }
        if errors.is_empty() {
            Ok(Registers {
                unit,
                tags: checked,
                sent: Cell::new(None),
            })
        } else {
            Err(errors)
        }
    }
}

impl GuestSession for Registers {
    fn open(settings: Vec<Setting>, tags: Vec<TagSpec>) -> Result<Session, Vec<ConfigError>> {
        Registers::create(&settings, tags).map(Session::new)
    }

    fn header_len(&self) -> u32 {
        HEAD_LEN as u32
    }

    fn frame_length(&self, head: Vec<u8>) -> Result<FrameSize, FrameError> {
        let wake_up = head.iter().take_while(|b| **b == WAKE_UP).count();
        if wake_up > 0 {
            return Ok(FrameSize::Skip(wake_up as u32));
        }
        match head.as_slice() {
            [START, .., len] => Ok(FrameSize::Length((HEAD_LEN + usize::from(*len)) as u32)),
            _ => Err(malformed(format!(
                "an answer starts with {START:02X}, not {head:02X?}"
            ))),
        }
    }

    fn lease_seconds(&self) -> Option<u32> {
        // A protocol that knows how long its device may stay silent says so here.
        None
    }

    fn handshake(&self, _step: u32) -> Option<Vec<u8>> {
        None
    }

    fn check_handshake(&self, step: u32, _frame: Vec<u8>) -> Result<(), FrameError> {
        Err(malformed(format!("no handshake step {step} was sent")))
    }

    /// One request a due tag, its id the tag's index.
    fn plan(&self, due: Vec<u32>) -> Vec<PlannedRead> {
        due.into_iter()
            .filter(|tag| (*tag as usize) < self.tags.len())
            .map(|tag| PlannedRead {
                id: tag,
                tags: vec![tag],
            })
            .collect()
    }

    fn encode_read(&self, request: u32) -> Result<Vec<u8>, FrameError> {
        let &(address, _) = self
            .tags
            .get(request as usize)
            .ok_or_else(|| malformed(format!("no request {request} was planned")))?;
        self.sent.set(Some(request));
        let [high, low] = address.to_be_bytes();
        Ok(vec![START, self.unit, high, low])
    }

    fn parse_read(&self, request: u32, frame: Vec<u8>, ts_ms: i64) -> Result<Batch, FrameError> {
        if self.sent.take() != Some(request) {
            return Err(malformed(format!(
                "an answer to request {request}, which was not sent"
            )));
        }
        let &(address, len) = self
            .tags
            .get(request as usize)
            .ok_or_else(|| malformed(format!("no request {request} was planned")))?;
        let [high, low] = address.to_be_bytes();
        let (head, data) = frame
            .split_at_checked(HEAD_LEN)
            .ok_or_else(|| malformed("a short answer".into()))?;
        if head[..4] != [START, self.unit, high, low] {
            return Err(malformed(format!(
                "an answer to another request: {head:02X?}"
            )));
        }
        if head[4] != 0 {
            return Err(FrameError::Device(DeviceError {
                code: u32::from(head[4]),
                message: format!("register {address} refused with status {}", head[4]),
                retry: Vec::new(),
            }));
        }
        if data.len() != len {
            return Err(malformed(format!(
                "register {address} answered {} bytes, its data type takes {len}",
                data.len()
            )));
        }
        let span = Span {
            start: HEAD_LEN as u32,
            len: len as u32,
        };
        Ok(batch_from_samples(
            vec![sample(request, Some(Value::Raw(span)), ts_ms)],
            frame,
        ))
    }

    fn encode_write(&self, _tag: u32, _value: Value) -> Result<Vec<u8>, FrameError> {
        Err(FrameError::Device(DeviceError {
            code: 0,
            message: "this protocol does not write".into(),
            retry: Vec::new(),
        }))
    }

    fn check_write(&self, _frame: Vec<u8>) -> Result<(), FrameError> {
        Err(malformed("no write was sent".into()))
    }

    fn reset(&self) {
        self.sent.set(None);
    }
}

sluice_guest::codec_component!(Registers);

/// What a channel of this protocol may say: `protocol: registers` (the name
/// channels give), over TCP or a serial line, and its one setting.
fn protocols() -> Vec<ProtocolDeclaration> {
    vec![ProtocolDeclaration {
        name: "registers".into(),
        transports: vec![Transport::Tcp, Transport::SerialLine],
        default_port: None,
        settings: vec![declare(
            "unit",
            integers(0, 255),
            int(1),
            "the unit number the device answers to",
        )],
        address_help: "the register number, 0 to 65535".into(),
    }]
}
