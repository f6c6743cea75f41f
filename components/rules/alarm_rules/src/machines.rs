//! The alarm and command state machines as data: one table per machine, read by
//! both the transition and the allowed-actions functions.
//!
//! A row lists, in a fixed order, the actions a state allows and where each one
//! leads; a terminal state has an empty row. The order of a row is the order in
//! which refused transitions report the allowed actions.

use alloc::vec::Vec;

use crate::exports::sluice::dataflow::transitions::{
    AlarmAction, AlarmState, CommandAction, CommandState,
};

/// A state with the actions it allows, each with the state it leads to.
pub type Row<S, A> = (S, &'static [(A, S)]);

/// The alarm whitelist.
pub const ALARM: &[Row<AlarmState, AlarmAction>] = {
    use AlarmAction::*;
    use AlarmState::*;
    &[
        (
            New,
            &[
                (Push, Pushed),
                (Delay, Delayed),
                (Confirm, Confirmed),
                (Handle, Handled),
                (MarkFalse, False),
                (Supersede, Superseded),
            ],
        ),
        (
            Pushed,
            &[
                (Confirm, Confirmed),
                (Handle, Handled),
                (MarkFalse, False),
                (Supersede, Superseded),
            ],
        ),
        (
            Delayed,
            &[
                (Wake, New),
                (Confirm, Confirmed),
                (Handle, Handled),
                (Supersede, Superseded),
            ],
        ),
        (
            Confirmed,
            &[(Handle, Handled), (Escalate, Escalated), (MarkFalse, False)],
        ),
        (
            Escalated,
            &[(Confirm, Confirmed), (Handle, Handled), (MarkFalse, False)],
        ),
        (Handled, &[(Close, Closed)]),
        (Closed, &[]),
        (False, &[]),
        (Superseded, &[]),
    ]
};

/// The command whitelist.
pub const COMMAND: &[Row<CommandState, CommandAction>] = {
    use CommandAction::*;
    use CommandState::*;
    &[
        (
            Pending,
            &[
                (Claim, Claimed),
                (Cancel, Cancelled),
                (Expire, Timeout),
                (Fail, Failed),
            ],
        ),
        (
            Claimed,
            &[
                (ReportSent, Sent),
                (Ack, Acked),
                (Fail, Failed),
                (Requeue, Pending),
                (Expire, Timeout),
                (Cancel, Cancelled),
            ],
        ),
        (
            Sent,
            &[
                (Ack, Acked),
                (Fail, Failed),
                (Requeue, Pending),
                (Expire, Timeout),
                (Cancel, Cancelled),
            ],
        ),
        (Acked, &[]),
        (Failed, &[]),
        (Timeout, &[]),
        (Cancelled, &[]),
    ]
};

/// The row of `state`; a state missing from the table allows nothing.
fn row<S: PartialEq, A>(table: &'static [Row<S, A>], state: S) -> &'static [(A, S)] {
    table
        .iter()
        .find(|(s, _)| *s == state)
        .map_or(&[], |(_, row)| row)
}

/// The actions `state` allows, in table order (empty for a terminal state).
pub fn actions<S: PartialEq, A: Copy>(table: &'static [Row<S, A>], state: S) -> Vec<A> {
    row(table, state)
        .iter()
        .map(|&(action, _)| action)
        .collect()
}

/// The state `action` leads to from `from`, or the actions `from` allows.
pub fn transition<S: PartialEq + Copy, A: PartialEq + Copy>(
    table: &'static [Row<S, A>],
    from: S,
    action: A,
) -> Result<S, Vec<A>> {
    let row = row(table, from);
    row.iter()
        .find(|(a, _)| *a == action)
        .map(|&(_, next)| next)
        .ok_or_else(|| row.iter().map(|&(a, _)| a).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALARM_STATES: [AlarmState; 9] = [
        AlarmState::New,
        AlarmState::Pushed,
        AlarmState::Delayed,
        AlarmState::Confirmed,
        AlarmState::Escalated,
        AlarmState::Handled,
        AlarmState::Closed,
        AlarmState::False,
        AlarmState::Superseded,
    ];
    const ALARM_ACTIONS: [AlarmAction; 9] = [
        AlarmAction::Push,
        AlarmAction::Delay,
        AlarmAction::Wake,
        AlarmAction::Confirm,
        AlarmAction::Escalate,
        AlarmAction::Handle,
        AlarmAction::Close,
        AlarmAction::MarkFalse,
        AlarmAction::Supersede,
    ];
    const COMMAND_STATES: [CommandState; 7] = [
        CommandState::Pending,
        CommandState::Claimed,
        CommandState::Sent,
        CommandState::Acked,
        CommandState::Failed,
        CommandState::Timeout,
        CommandState::Cancelled,
    ];
    const COMMAND_ACTIONS: [CommandAction; 7] = [
        CommandAction::Claim,
        CommandAction::ReportSent,
        CommandAction::Ack,
        CommandAction::Fail,
        CommandAction::Requeue,
        CommandAction::Expire,
        CommandAction::Cancel,
    ];

    fn alarm_state(name: &str) -> AlarmState {
        let names = [
            "new",
            "pushed",
            "delayed",
            "confirmed",
            "escalated",
            "handled",
            "closed",
            "false",
            "superseded",
        ];
        ALARM_STATES[names.iter().position(|n| *n == name).expect(name)]
    }

    fn alarm_action(name: &str) -> AlarmAction {
        let names = [
            "push",
            "delay",
            "wake",
            "confirm",
            "escalate",
            "handle",
            "close",
            "mark-false",
            "supersede",
        ];
        ALARM_ACTIONS[names.iter().position(|n| *n == name).expect(name)]
    }

    fn command_state(name: &str) -> CommandState {
        let names = [
            "pending",
            "claimed",
            "sent",
            "acked",
            "failed",
            "timeout",
            "cancelled",
        ];
        COMMAND_STATES[names.iter().position(|n| *n == name).expect(name)]
    }

    fn command_action(name: &str) -> CommandAction {
        let names = [
            "claim",
            "report-sent",
            "ack",
            "fail",
            "requeue",
            "expire",
            "cancel",
        ];
        COMMAND_ACTIONS[names.iter().position(|n| *n == name).expect(name)]
    }

    /// The whitelists as written in the specification, in WIT names, as an oracle
    /// independent of the tables: `state: action>next action>next ...`.
    const ALARM_SPEC: &str = "
        new: push>pushed delay>delayed confirm>confirmed handle>handled mark-false>false supersede>superseded
        pushed: confirm>confirmed handle>handled mark-false>false supersede>superseded
        delayed: wake>new confirm>confirmed handle>handled supersede>superseded
        confirmed: handle>handled escalate>escalated mark-false>false
        escalated: confirm>confirmed handle>handled mark-false>false
        handled: close>closed
        closed:
        false:
        superseded:
    ";
    const COMMAND_SPEC: &str = "
        pending: claim>claimed cancel>cancelled expire>timeout fail>failed
        claimed: report-sent>sent ack>acked fail>failed requeue>pending expire>timeout cancel>cancelled
        sent: ack>acked fail>failed requeue>pending expire>timeout cancel>cancelled
        acked:
        failed:
        timeout:
        cancelled:
    ";

    /// `(state, [(action, next)])` per line of a spec.
    fn parse<S, A>(
        spec: &str,
        state: fn(&str) -> S,
        action: fn(&str) -> A,
    ) -> Vec<(S, Vec<(A, S)>)> {
        spec.lines()
            .map(str::trim)
            .filter(|line| !line.is_empty())
            .map(|line| {
                let (from, moves) = line.split_once(':').unwrap();
                let moves = moves
                    .split_whitespace()
                    .map(|m| {
                        let (a, next) = m.split_once('>').unwrap();
                        (action(a), state(next))
                    })
                    .collect();
                (state(from), moves)
            })
            .collect()
    }

    /// Checks every (state, action) cell of a machine against its spec.
    fn check_every_cell<S, A>(
        table: &'static [Row<S, A>],
        spec: &[(S, Vec<(A, S)>)],
        states: &[S],
        all_actions: &[A],
    ) -> usize
    where
        S: PartialEq + Copy + core::fmt::Debug,
        A: PartialEq + Copy + core::fmt::Debug,
    {
        assert_eq!(spec.len(), states.len(), "the spec names every state");
        assert_eq!(table.len(), states.len(), "the table has one row per state");
        let mut cells = 0;
        for &state in states {
            let (_, moves) = spec.iter().find(|(s, _)| *s == state).unwrap();
            let allowed: Vec<A> = moves.iter().map(|&(a, _)| a).collect();
            assert_eq!(actions(table, state), allowed, "actions of {state:?}");
            for &action in all_actions {
                let expected = match moves.iter().find(|(a, _)| *a == action) {
                    Some(&(_, next)) => Ok(next),
                    None => Err(allowed.clone()),
                };
                assert_eq!(
                    transition(table, state, action),
                    expected,
                    "{state:?} --{action:?}-->"
                );
                cells += 1;
            }
        }
        cells
    }

    #[test]
    fn every_alarm_cell_follows_the_whitelist() {
        let spec = parse(ALARM_SPEC, alarm_state, alarm_action);
        let cells = check_every_cell(ALARM, &spec, &ALARM_STATES, &ALARM_ACTIONS);
        assert_eq!(cells, 81);
    }

    #[test]
    fn every_command_cell_follows_the_whitelist() {
        let spec = parse(COMMAND_SPEC, command_state, command_action);
        let cells = check_every_cell(COMMAND, &spec, &COMMAND_STATES, &COMMAND_ACTIONS);
        assert_eq!(cells, 49);
    }

    #[test]
    fn refusals_list_the_allowed_actions_in_order() {
        use AlarmAction as A;
        assert_eq!(
            transition(ALARM, AlarmState::Delayed, A::Push),
            Err(alloc::vec![A::Wake, A::Confirm, A::Handle, A::Supersede])
        );
        assert_eq!(
            transition(ALARM, AlarmState::Handled, A::Handle),
            Err(alloc::vec![A::Close])
        );
        assert_eq!(
            transition(ALARM, AlarmState::Closed, A::Close),
            Err(alloc::vec![])
        );
        assert_eq!(
            transition(COMMAND, CommandState::Sent, CommandAction::ReportSent),
            Err(alloc::vec![
                CommandAction::Ack,
                CommandAction::Fail,
                CommandAction::Requeue,
                CommandAction::Expire,
                CommandAction::Cancel,
            ])
        );
    }

    #[test]
    fn terminal_states_allow_nothing() {
        for state in [
            AlarmState::Closed,
            AlarmState::False,
            AlarmState::Superseded,
        ] {
            assert!(actions(ALARM, state).is_empty(), "{state:?}");
        }
        for state in [
            CommandState::Acked,
            CommandState::Failed,
            CommandState::Timeout,
            CommandState::Cancelled,
        ] {
            assert!(actions(COMMAND, state).is_empty(), "{state:?}");
        }
    }
}
