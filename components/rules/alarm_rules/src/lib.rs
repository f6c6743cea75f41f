//! Rules `alarm_rules`: the transition whitelists of the alarm and command state
//! machines, and the evaluator that turns samples and device events into alarm
//! signals.
//!
//! `transitions` serves both whitelists from one table per machine (see
//! [`machines`]); a refused transition answers with the actions the state allows.
//!
//! The evaluator raises and clears:
//! - threshold alarms on numeric samples (int, uint or float, quality GOOD or
//!   UNCERTAIN), with hysteresis: a threshold raises once when the value goes past
//!   its limit and clears once when the value is back at its clear point;
//! - device-event alarms from a fixed, case-sensitive table (see [`events`]):
//!   `DOOR_OPEN`, `WATER_LEAK`, `SMOKE`, `SOS`, `POWER_OFF` and `POWER_CUT` raise
//!   themselves; `DOOR_CLOSE`, `WATER_LEAK_CLEAR`, `SMOKE_CLEAR` and `SOS_CLEAR`
//!   clear their pair; `POWER_ON` and `POWER_RESTORE` clear both `POWER_OFF` and
//!   `POWER_CUT`; `device-offline` raises `DEVICE_OFFLINE`, `device-fault`
//!   `DEVICE_FAULT`, and `device-online` clears both; `driver-offline`,
//!   `driver-fault` and `driver-online` do the same with `DRIVER_OFFLINE` and
//!   `DRIVER_FAULT`. Other kinds signal nothing.
//!
//! Settings (none at all means no thresholds), for `N` = 0, 1, 2, ...:
//! - `thresholds.N.tag`: the key of the tag to watch (required);
//! - `thresholds.N.above` or `thresholds.N.below`: the limit, a number (exactly one);
//! - `thresholds.N.clearAt`: where the alarm clears, at most `above` / at least
//!   `below` (default: the limit itself);
//! - `thresholds.N.ruleKey`: the alarm's rule key (default: the tag key uppercased,
//!   characters other than ASCII letters and digits turned into `_`, plus `_HIGH`
//!   for `above` or `_LOW` for `below`); rule keys must be distinct;
//! - `thresholds.N.message`: text put before the value in the raise message.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod events;
pub mod machines;
mod thresholds;

use alloc::string::String;
use alloc::vec::Vec;

use thresholds::Thresholds;

#[cfg(not(test))]
sluice_guest::guest_runtime!();

wit_bindgen::generate!({ world: "rules", path: "../../../wit" });

use exports::sluice::dataflow::alarm_rules::{self, AlarmSignal, Evaluator, GuestEvaluator};
use exports::sluice::dataflow::transitions::{
    self, AlarmAction, AlarmState, CommandAction, CommandState,
};
use sluice::dataflow::types::{Batch, ConfigError, Setting, TagSpec};

struct Component;

impl transitions::Guest for Component {
    fn alarm_transition(
        from: AlarmState,
        action: AlarmAction,
    ) -> Result<AlarmState, Vec<AlarmAction>> {
        machines::transition(machines::ALARM, from, action)
    }

    fn alarm_actions(state: AlarmState) -> Vec<AlarmAction> {
        machines::actions(machines::ALARM, state)
    }

    fn command_transition(
        from: CommandState,
        action: CommandAction,
    ) -> Result<CommandState, Vec<CommandAction>> {
        machines::transition(machines::COMMAND, from, action)
    }
}

impl alarm_rules::Guest for Component {
    type Evaluator = AlarmRules;
}

/// The rules of one device.
struct AlarmRules {
    thresholds: Thresholds,
}

impl GuestEvaluator for AlarmRules {
    fn create(settings: Vec<Setting>, tags: Vec<TagSpec>) -> Result<Evaluator, Vec<ConfigError>> {
        let thresholds = Thresholds::parse(&settings, &tags)?;
        Ok(Evaluator::new(AlarmRules { thresholds }))
    }

    fn watched_tags(&self) -> Option<Vec<u32>> {
        Some(self.thresholds.watched_tags())
    }

    fn on_samples(&self, input: Batch) -> Vec<AlarmSignal> {
        self.thresholds.on_samples(&columns_from_batch(input))
    }

    fn on_event(&self, kind: String, ts_ms: i64, event_id: Option<String>) -> Vec<AlarmSignal> {
        events::signals(&kind, ts_ms, event_id)
    }
}

sluice_guest::wit_conversions!();

export!(Component);

#[cfg(test)]
mod tests {
    use super::*;
    use transitions::Guest as _;

    #[test]
    fn the_exports_read_the_tables() {
        assert_eq!(
            Component::alarm_transition(AlarmState::New, AlarmAction::Push),
            Ok(AlarmState::Pushed)
        );
        assert_eq!(
            Component::alarm_transition(AlarmState::Handled, AlarmAction::Confirm),
            Err(alloc::vec![AlarmAction::Close])
        );
        assert_eq!(
            Component::alarm_actions(AlarmState::Escalated),
            [
                AlarmAction::Confirm,
                AlarmAction::Handle,
                AlarmAction::MarkFalse
            ]
        );
        assert_eq!(
            Component::command_transition(CommandState::Claimed, CommandAction::Requeue),
            Ok(CommandState::Pending)
        );
        assert_eq!(
            Component::command_transition(CommandState::Acked, CommandAction::Ack),
            Err(alloc::vec![])
        );
    }
}
