//! A session that opens as its channel's `mode` says and then reads nothing.

use alloc::vec::Vec;

use crate::sluice::dataflow::types::{Batch, ConfigError, Setting, SettingValue, TagSpec, Value};
use crate::{FrameError, FrameSize, GuestSession, PlannedRead, Session, malformed};

/// A session that reads nothing.
pub struct Calm;

impl GuestSession for Calm {
    fn open(settings: Vec<Setting>, _tags: Vec<TagSpec>) -> Result<Session, Vec<ConfigError>> {
        let mode = settings.iter().find_map(|s| match (&*s.key, &s.value) {
            ("mode", SettingValue::Text(mode)) => Some(mode.as_str()),
            _ => None,
        });
        match mode {
            Some("trap") => sluice_guest::trap(),
            Some("loop") => loop {
                core::hint::spin_loop();
            },
            Some("memory") => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    // Reserved, not filled: the cap must stop it, not the CPU budget.
                    let mut block: Vec<u8> = Vec::with_capacity(1 << 20);
                    block.push(0xA5);
                    hoard.push(core::hint::black_box(block));
                }
            }
            _ => Ok(Session::new(Calm)),
        }
    }

    fn header_len(&self) -> u32 {
        1
    }

    fn frame_length(&self, _head: Vec<u8>) -> Result<FrameSize, FrameError> {
        Err(malformed("nothing was asked".into()))
    }

    fn lease_seconds(&self) -> Option<u32> {
        None
    }

    fn handshake(&self, _step: u32) -> Option<Vec<u8>> {
        None
    }

    fn check_handshake(&self, _step: u32, _frame: Vec<u8>) -> Result<(), FrameError> {
        Err(malformed("no handshake".into()))
    }

    fn plan(&self, _due: Vec<u32>) -> Vec<PlannedRead> {
        Vec::new()
    }

    fn encode_read(&self, _request: u32) -> Result<Vec<u8>, FrameError> {
        Err(malformed("nothing is read".into()))
    }

    fn parse_read(&self, _request: u32, _frame: Vec<u8>, _ts_ms: i64) -> Result<Batch, FrameError> {
        Err(malformed("nothing is read".into()))
    }

    fn encode_write(&self, _tag: u32, _value: Value) -> Result<Vec<u8>, FrameError> {
        Err(malformed("nothing is written".into()))
    }

    fn check_write(&self, _frame: Vec<u8>) -> Result<(), FrameError> {
        Err(malformed("nothing is written".into()))
    }

    fn reset(&self) {}
}
