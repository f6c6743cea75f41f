//! Stage `hostile`: misbehaves on purpose so the engine's containment can be tested.
//!
//! Setting `mode` picks the misbehaviour, triggered by `process`:
//! - `echo` (default): returns its input, behaving well;
//! - `loop`: spins forever (the CPU budget must stop it);
//! - `memory`: allocates until the memory cap refuses (the cap must stop it);
//! - `trap`: executes `unreachable`;
//! - `stray`: reads a byte 3 GiB into its address space, far past its memory;
//! - `ragged`: returns a batch with one tag more than its other columns have.
//!
//! With `trigger` set to an integer, the misbehaviour only happens for a batch that
//! carries that value; other batches are echoed.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::vec::Vec;
use sluice_guest::settings::unknown_key;

#[cfg(not(test))]
sluice_guest::guest_runtime!();

wit_bindgen::generate!({ world: "stage", path: "../../../wit" });

use exports::sluice::dataflow::transform::{Guest, GuestProcessor, Processor};
use sluice::dataflow::types::{Batch, ConfigError, Setting, SettingValue, TagSpec};

struct Component;

impl Guest for Component {
    type Processor = Hostile;
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Echo,
    Loop,
    Memory,
    Trap,
    Stray,
    Ragged,
}

struct Hostile {
    mode: Mode,
    trigger: Option<i64>,
}

fn error(key: &str, message: &str) -> ConfigError {
    ConfigError {
        tag: None,
        key: key.into(),
        message: message.into(),
    }
}

impl Hostile {
    fn triggered(&self, input: &Batch) -> bool {
        match self.trigger {
            None => true,
            Some(t) => {
                input.kinds.iter().zip(&input.bits).any(|(&kind, &bits)| {
                    kind == sluice_guest::columns::kind::INT && bits as i64 == t
                })
            }
        }
    }
}

impl GuestProcessor for Hostile {
    fn create(settings: Vec<Setting>, _tags: Vec<TagSpec>) -> Result<Processor, Vec<ConfigError>> {
        let mut mode = Mode::Echo;
        let mut trigger = None;
        let mut errors = Vec::new();
        for setting in &settings {
            match (setting.key.as_str(), &setting.value) {
                ("mode", SettingValue::Text(text)) => match text.as_str() {
                    "echo" => mode = Mode::Echo,
                    "loop" => mode = Mode::Loop,
                    "memory" => mode = Mode::Memory,
                    "trap" => mode = Mode::Trap,
                    "stray" => mode = Mode::Stray,
                    "ragged" => mode = Mode::Ragged,
                    _ => errors.push(error(
                        "mode",
                        "mode must be echo, loop, memory, trap, stray or ragged",
                    )),
                },
                ("trigger", SettingValue::Int(v)) => trigger = Some(*v),
                ("mode" | "trigger", _) => errors.push(error(&setting.key, "wrong value type")),
                (other, _) => errors.push(error(other, &unknown_key(other, &["mode", "trigger"]))),
            }
        }
        if errors.is_empty() {
            Ok(Processor::new(Hostile { mode, trigger }))
        } else {
            Err(errors)
        }
    }

    fn process(&self, input: Batch) -> Batch {
        if self.mode == Mode::Echo || !self.triggered(&input) {
            return input;
        }
        match self.mode {
            Mode::Echo => input,
            Mode::Loop => {
                let mut counter: u64 = 0;
                loop {
                    counter = core::hint::black_box(counter.wrapping_add(1));
                }
            }
            Mode::Memory => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    // Reserve without touching: the cap must stop it, not the CPU budget.
                    let mut block: Vec<u8> = Vec::with_capacity(1 << 20);
                    block.push(0xA5);
                    hoard.push(core::hint::black_box(block));
                }
            }
            Mode::Trap => sluice_guest::trap(),
            Mode::Stray => {
                let address = core::hint::black_box(0xC000_0000_usize) as *const u8;
                // SAFETY: none: the read is meant to leave the memory, and the
                // host must stop it.
                let byte = unsafe { core::ptr::read_volatile(address) };
                let mut input = input;
                input.tags.push(u32::from(byte));
                input
            }
            Mode::Ragged => {
                let mut input = input;
                input.tags.push(0);
                input
            }
        }
    }

    fn reset(&self) {}
}

export!(Component);
