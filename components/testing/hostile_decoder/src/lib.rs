//! Decoder `hostile_decoder`: misbehaves on purpose so the engine's containment
//! of decoders can be tested.
//!
//! Setting `mode` picks the misbehaviour, triggered by a message that is
//! exactly `boom`: `loop` spins forever (the CPU budget must stop it),
//! `memory` allocates until the memory cap refuses, `trap` executes
//! `unreachable`. Any other message gives tag 0 its length, as a UINT16.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;

use sluice_guest::columns::Columns;
use sluice_guest::decoder::{Decoder, Field, Outgoing, Refusal, Written};
use sluice_guest::numeric::Number;
use sluice_guest::settings::{SettingValue, unknown_key, wrong_type};
use sluice_guest::stages::{Issue, Settings};

sluice_guest::decoder_component!(Hostile);

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Loop,
    Memory,
    Trap,
}

pub struct Hostile {
    mode: Mode,
}

impl Decoder for Hostile {
    fn create(settings: &Settings<'_>, _fields: &[Field<'_>]) -> Result<Self, Vec<Issue>> {
        let mut mode = Mode::Trap;
        for (key, value) in settings {
            mode = match (*key, value) {
                ("mode", SettingValue::Text("loop")) => Mode::Loop,
                ("mode", SettingValue::Text("memory")) => Mode::Memory,
                ("mode", SettingValue::Text("trap")) => Mode::Trap,
                ("mode", other) => {
                    return Err(alloc::vec![Issue::new(
                        None,
                        key,
                        wrong_type(key, "loop, memory or trap", other)
                    )]);
                }
                ("commandTopic", _) => continue,
                _ => {
                    return Err(alloc::vec![Issue::new(
                        None,
                        key,
                        unknown_key(key, &["mode"])
                    )]);
                }
            };
        }
        Ok(Self { mode })
    }

    fn decode(
        &self,
        _topic: &str,
        payload: &[u8],
        ts_ms: i64,
        out: &mut Columns,
        _refusals: &mut Vec<Refusal>,
    ) {
        if payload == b"boom" {
            match self.mode {
                Mode::Loop => loop {
                    core::hint::black_box(payload);
                },
                Mode::Memory => {
                    let mut hoard: Vec<Vec<u8>> = Vec::new();
                    loop {
                        // Untouched capacity: memory grows without fuel spent on filling it.
                        hoard.push(Vec::with_capacity(1 << 20));
                        core::hint::black_box(&hoard);
                    }
                }
                Mode::Trap => sluice_guest::trap(),
            }
        }
        out.push_number(0, Number::Uint(payload.len() as u64), ts_ms);
    }

    fn encode(&self, _tag: u32, _value: &Written) -> Result<Outgoing, String> {
        Err("this decoder writes nothing".into())
    }
}
