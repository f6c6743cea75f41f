//! Rules `hostile_rules`: misbehaves on purpose so the engine's containment of
//! rules components can be tested. Never embedded in the engine.
//!
//! Setting `mode` picks the misbehaviour, triggered by `on-event` with kind `BOOM`:
//! - `ok` (default): behaves well;
//! - `loop`: spins forever (the CPU budget must stop it);
//! - `memory`: allocates until the memory cap refuses (the cap must stop it);
//! - `trap`: executes `unreachable`.
//!
//! Any other event kind (and `BOOM` in mode `ok`) answers one raise signal whose
//! rule key is the kind. `on-samples` signals nothing. The transitions allow
//! nothing: every transition is refused with an empty list of allowed actions.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use sluice_guest::settings::unknown_key;

#[cfg(not(test))]
sluice_guest::guest_runtime!();

wit_bindgen::generate!({ world: "rules", path: "../../../wit" });

use exports::sluice::dataflow::alarm_rules::{
    self, AlarmSignal, Evaluator, GuestEvaluator, SignalKind,
};
use exports::sluice::dataflow::transitions::{
    self, AlarmAction, AlarmState, CommandAction, CommandState,
};
use sluice::dataflow::types::{Batch, ConfigError, Setting, SettingValue, TagSpec};

/// The event kind that triggers the misbehaviour.
const TRIGGER: &str = "BOOM";

struct Component;

impl transitions::Guest for Component {
    fn alarm_transition(_: AlarmState, _: AlarmAction) -> Result<AlarmState, Vec<AlarmAction>> {
        Err(Vec::new())
    }

    fn alarm_actions(_: AlarmState) -> Vec<AlarmAction> {
        Vec::new()
    }

    fn command_transition(
        _: CommandState,
        _: CommandAction,
    ) -> Result<CommandState, Vec<CommandAction>> {
        Err(Vec::new())
    }
}

impl alarm_rules::Guest for Component {
    type Evaluator = HostileRules;
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Ok,
    Loop,
    Memory,
    Trap,
}

struct HostileRules {
    mode: Mode,
}

fn error(key: &str, message: &str) -> ConfigError {
    ConfigError {
        tag: None,
        key: key.into(),
        message: message.into(),
    }
}

impl GuestEvaluator for HostileRules {
    fn create(settings: Vec<Setting>, _tags: Vec<TagSpec>) -> Result<Evaluator, Vec<ConfigError>> {
        let mut mode = Mode::Ok;
        let mut errors = Vec::new();
        for setting in &settings {
            match (setting.key.as_str(), &setting.value) {
                ("mode", SettingValue::Text(text)) => match text.as_str() {
                    "ok" => mode = Mode::Ok,
                    "loop" => mode = Mode::Loop,
                    "memory" => mode = Mode::Memory,
                    "trap" => mode = Mode::Trap,
                    _ => errors.push(error("mode", "mode must be ok, loop, memory or trap")),
                },
                ("mode", _) => errors.push(error("mode", "mode must be text")),
                (other, _) => errors.push(error(other, &unknown_key(other, &["mode"]))),
            }
        }
        if errors.is_empty() {
            Ok(Evaluator::new(HostileRules { mode }))
        } else {
            Err(errors)
        }
    }

    fn watched_tags(&self) -> Option<Vec<u32>> {
        None
    }

    fn on_samples(&self, _input: Batch) -> Vec<AlarmSignal> {
        Vec::new()
    }

    fn on_event(&self, kind: String, ts_ms: i64, event_id: Option<String>) -> Vec<AlarmSignal> {
        if kind == TRIGGER {
            misbehave(self.mode);
        }
        alloc::vec![AlarmSignal {
            kind: SignalKind::Raise,
            message: alloc::format!("event {kind}"),
            rule_key: kind,
            ts_ms,
            event_id,
        }]
    }
}

/// Does what `mode` asks; returns only in mode `ok`.
fn misbehave(mode: Mode) {
    match mode {
        Mode::Ok => {}
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
    }
}

export!(Component);
