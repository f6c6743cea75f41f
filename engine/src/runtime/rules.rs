//! Rules components: the alarm and command whitelists, asked per transition, and evaluators
//! (one per device) that turn samples and events into alarm signals.

use std::sync::Arc;

use wasmtime::component::ResourceAny;

use super::CallError;
use super::bindings::rules::Rules;
use super::bindings::rules::exports::sluice::dataflow::alarm_rules as wit_rules;
use super::bindings::rules::exports::sluice::dataflow::transitions as wit_transitions;
use super::bindings::wit;
use super::convert::{Recipe, samples_to_wit};
use super::pool::{Binding, Live, Pool};
use crate::model::{
    AlarmAction, AlarmState, CommandAction, CommandStatus, Signal, SignalKind, Transitions,
    Whitelist,
};
use crate::model::{Sample, Setting, TagSpec};

/// One tenant's instances of one rules component.
pub type RulesPool = Pool<Rules>;

/// The next state, or the actions the state allows instead.
pub type Transition = Result<AlarmState, Vec<AlarmAction>>;

impl Pool<Rules> {
    /// Where `action` takes an alarm in state `from`, by the component's whitelist.
    ///
    /// # Errors
    /// A failed call (trap, limit).
    pub fn alarm_transition(
        &self,
        from: AlarmState,
        action: AlarmAction,
    ) -> Result<Transition, CallError> {
        self.call_instance("alarm-transition", |live| {
            live.bindings
                .sluice_dataflow_transitions()
                .call_alarm_transition(&mut live.store, state_to_wit(from), action_to_wit(action))
        })
        .map(|next| {
            next.map(state_from_wit)
                .map_err(|allowed| allowed.into_iter().map(action_from_wit).collect())
        })
    }

    /// The actions the whitelist allows in `state` (none for a terminal state).
    ///
    /// # Errors
    /// A failed call.
    pub fn alarm_actions(&self, state: AlarmState) -> Result<Vec<AlarmAction>, CallError> {
        self.call_instance("alarm-actions", |live| {
            live.bindings
                .sluice_dataflow_transitions()
                .call_alarm_actions(&mut live.store, state_to_wit(state))
        })
        .map(|actions| actions.into_iter().map(action_from_wit).collect())
    }

    /// Where `action` takes a command in `from`, by the component's whitelist.
    ///
    /// # Errors
    /// A failed call (trap, limit).
    pub fn command_transition(
        &self,
        from: CommandStatus,
        action: CommandAction,
    ) -> Result<Result<CommandStatus, Vec<CommandAction>>, CallError> {
        self.call_instance("command-transition", |live| {
            live.bindings
                .sluice_dataflow_transitions()
                .call_command_transition(
                    &mut live.store,
                    status_to_wit(from),
                    command_action_to_wit(action),
                )
        })
        .map(|next| {
            next.map(status_from_wit)
                .map_err(|allowed| allowed.into_iter().map(command_action_from_wit).collect())
        })
    }

    /// Both whitelists as tables: every state asked with every action, and every
    /// alarm state for its allowed actions. Read once per load, so no store
    /// transaction has to call the component.
    ///
    /// # Errors
    /// A failed call.
    pub fn whitelist(&self) -> Result<Whitelist, CallError> {
        let mut alarm_next = Vec::new();
        let mut allowed = Vec::new();
        for state in AlarmState::ALL {
            allowed.push((state, self.alarm_actions(state)?));
            for action in AlarmAction::ALL {
                alarm_next.push(((state, action), self.alarm_transition(state, action)?));
            }
        }
        let mut command_next = Vec::new();
        for status in CommandStatus::ALL {
            for action in CommandAction::ALL {
                command_next.push(((status, action), self.command_transition(status, action)?));
            }
        }
        // A command status allows what its refusals name (none for a final status).
        let command_allowed = CommandStatus::ALL.map(|status| {
            let actions = CommandAction::ALL
                .into_iter()
                .filter(|action| {
                    command_next
                        .iter()
                        .any(|((s, a), next)| *s == status && a == action && next.is_ok())
                })
                .collect();
            (status, actions)
        });
        Ok(Whitelist {
            alarms: Transitions::new(alarm_next, allowed),
            commands: Transitions::new(command_next, command_allowed),
        })
    }

    /// An evaluator for one device, its settings and tags checked now.
    ///
    /// # Errors
    /// [`CallError::Config`] with every issue the component found, or a failed call.
    pub fn evaluator(
        self: &Arc<Self>,
        settings: &[Setting],
        tags: Arc<[TagSpec]>,
    ) -> Result<Evaluator, CallError> {
        let mut evaluator = Evaluator {
            binding: self.bind(),
            recipe: Recipe::new(settings, tags),
            watched: None,
        };
        // The first call creates the resource, so a bad configuration is refused
        // now rather than at the first signal.
        evaluator.watched = evaluator
            .binding
            .call(
                "watched-tags",
                &|live| evaluator.create(live),
                |live, resource| {
                    live.bindings
                        .sluice_dataflow_alarm_rules()
                        .evaluator()
                        .call_watched_tags(&mut live.store, resource)
                },
            )?
            .map(|mut tags| {
                tags.sort_unstable();
                tags.dedup();
                tags.into_boxed_slice()
            });
        Ok(evaluator)
    }
}

/// One device's alarm rules, with the memory hysteresis needs.
pub struct Evaluator {
    binding: Binding<Rules>,
    recipe: Recipe,
    /// The tags whose samples the rules look at, ascending; `None`: every tag's.
    watched: Option<Box<[u32]>>,
}

impl std::fmt::Debug for Evaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Evaluator")
            .field("component", &self.binding.pool().name())
            .finish_non_exhaustive()
    }
}

impl Evaluator {
    /// How the pool this lives in is doing (failures, quarantine).
    pub fn health(&self) -> super::PoolHealth {
        self.binding.health()
    }

    fn create(
        &self,
        live: &mut Live<Rules>,
    ) -> wasmtime::Result<Result<ResourceAny, Vec<wit::ConfigError>>> {
        let (settings, tags) = self.recipe.to_wit();
        live.bindings
            .sluice_dataflow_alarm_rules()
            .evaluator()
            .call_create(&mut live.store, &settings, &tags)
    }

    /// The name of the component behind it.
    pub fn component(&self) -> &str {
        self.binding.pool().name()
    }

    /// Whether the rules look at any of `samples` (all of them, when the
    /// component did not say which tags it watches).
    pub fn watches_any(&self, samples: &[Sample]) -> bool {
        match &self.watched {
            None => true,
            Some(watched) => samples
                .iter()
                .any(|s| watched.binary_search(&s.tag).is_ok()),
        }
    }

    /// Signals from one round's decoded samples (raw values carry no bytes here).
    /// Only the samples of the tags the rules watch cross; with none of them, the
    /// component is not called.
    ///
    /// # Errors
    /// A trap or an exceeded limit; the instance is rebuilt (and the rules' memory
    /// with it) for the next call.
    pub fn on_samples(&self, samples: &[Sample]) -> Result<Vec<Signal>, CallError> {
        let input = match &self.watched {
            None => samples_to_wit(samples),
            Some(watched) => {
                let mut kept = samples
                    .iter()
                    .filter(|s| watched.binary_search(&s.tag).is_ok())
                    .peekable();
                if kept.peek().is_none() {
                    return Ok(Vec::new());
                }
                samples_to_wit(kept)
            }
        };
        self.binding
            .call("on-samples", &|live| self.create(live), |live, resource| {
                live.bindings
                    .sluice_dataflow_alarm_rules()
                    .evaluator()
                    .call_on_samples(&mut live.store, resource, &input)
            })
            .map(signals_from_wit)
    }

    /// Signals for a device or lease event (`DOOR_OPEN`, `device-offline`, ...).
    ///
    /// # Errors
    /// As for [`Evaluator::on_samples`].
    pub fn on_event(
        &self,
        kind: &str,
        ts_ms: i64,
        event_id: Option<&str>,
    ) -> Result<Vec<Signal>, CallError> {
        self.binding
            .call("on-event", &|live| self.create(live), |live, resource| {
                live.bindings
                    .sluice_dataflow_alarm_rules()
                    .evaluator()
                    .call_on_event(&mut live.store, resource, kind, ts_ms, event_id)
            })
            .map(signals_from_wit)
    }
}

fn signals_from_wit(signals: Vec<wit_rules::AlarmSignal>) -> Vec<Signal> {
    signals
        .into_iter()
        .map(|signal| Signal {
            kind: match signal.kind {
                wit_rules::SignalKind::Raise => SignalKind::Raise,
                wit_rules::SignalKind::Clear => SignalKind::Clear,
            },
            rule_key: signal.rule_key,
            ts_ms: signal.ts_ms,
            message: signal.message,
            event_id: signal.event_id,
        })
        .collect()
}

fn state_to_wit(state: AlarmState) -> wit_transitions::AlarmState {
    use wit_transitions::AlarmState as W;
    match state {
        AlarmState::New => W::New,
        AlarmState::Pushed => W::Pushed,
        AlarmState::Delayed => W::Delayed,
        AlarmState::Confirmed => W::Confirmed,
        AlarmState::Escalated => W::Escalated,
        AlarmState::Handled => W::Handled,
        AlarmState::Closed => W::Closed,
        AlarmState::False => W::False,
        AlarmState::Superseded => W::Superseded,
    }
}

fn state_from_wit(state: wit_transitions::AlarmState) -> AlarmState {
    use wit_transitions::AlarmState as W;
    match state {
        W::New => AlarmState::New,
        W::Pushed => AlarmState::Pushed,
        W::Delayed => AlarmState::Delayed,
        W::Confirmed => AlarmState::Confirmed,
        W::Escalated => AlarmState::Escalated,
        W::Handled => AlarmState::Handled,
        W::Closed => AlarmState::Closed,
        W::False => AlarmState::False,
        W::Superseded => AlarmState::Superseded,
    }
}

fn action_to_wit(action: AlarmAction) -> wit_transitions::AlarmAction {
    use wit_transitions::AlarmAction as W;
    match action {
        AlarmAction::Push => W::Push,
        AlarmAction::Delay => W::Delay,
        AlarmAction::Wake => W::Wake,
        AlarmAction::Confirm => W::Confirm,
        AlarmAction::Escalate => W::Escalate,
        AlarmAction::Handle => W::Handle,
        AlarmAction::Close => W::Close,
        AlarmAction::False => W::MarkFalse,
        AlarmAction::Supersede => W::Supersede,
    }
}

fn action_from_wit(action: wit_transitions::AlarmAction) -> AlarmAction {
    use wit_transitions::AlarmAction as W;
    match action {
        W::Push => AlarmAction::Push,
        W::Delay => AlarmAction::Delay,
        W::Wake => AlarmAction::Wake,
        W::Confirm => AlarmAction::Confirm,
        W::Escalate => AlarmAction::Escalate,
        W::Handle => AlarmAction::Handle,
        W::Close => AlarmAction::Close,
        W::MarkFalse => AlarmAction::False,
        W::Supersede => AlarmAction::Supersede,
    }
}

fn status_to_wit(status: CommandStatus) -> wit_transitions::CommandState {
    use wit_transitions::CommandState as W;
    match status {
        CommandStatus::Pending => W::Pending,
        CommandStatus::Claimed => W::Claimed,
        CommandStatus::Sent => W::Sent,
        CommandStatus::Acked => W::Acked,
        CommandStatus::Failed => W::Failed,
        CommandStatus::Timeout => W::Timeout,
        CommandStatus::Cancelled => W::Cancelled,
    }
}

fn status_from_wit(status: wit_transitions::CommandState) -> CommandStatus {
    use wit_transitions::CommandState as W;
    match status {
        W::Pending => CommandStatus::Pending,
        W::Claimed => CommandStatus::Claimed,
        W::Sent => CommandStatus::Sent,
        W::Acked => CommandStatus::Acked,
        W::Failed => CommandStatus::Failed,
        W::Timeout => CommandStatus::Timeout,
        W::Cancelled => CommandStatus::Cancelled,
    }
}

fn command_action_to_wit(action: CommandAction) -> wit_transitions::CommandAction {
    use wit_transitions::CommandAction as W;
    match action {
        CommandAction::Claim => W::Claim,
        CommandAction::ReportSent => W::ReportSent,
        CommandAction::Ack => W::Ack,
        CommandAction::Fail => W::Fail,
        CommandAction::Requeue => W::Requeue,
        CommandAction::Expire => W::Expire,
        CommandAction::Cancel => W::Cancel,
    }
}

fn command_action_from_wit(action: wit_transitions::CommandAction) -> CommandAction {
    use wit_transitions::CommandAction as W;
    match action {
        W::Claim => CommandAction::Claim,
        W::ReportSent => CommandAction::ReportSent,
        W::Ack => CommandAction::Ack,
        W::Fail => CommandAction::Fail,
        W::Requeue => CommandAction::Requeue,
        W::Expire => CommandAction::Expire,
        W::Cancel => CommandAction::Cancel,
    }
}
