//! The transition whitelists of the alarm and command machines as tables. The
//! rules component owns them; the engine asks it once per load (every state with
//! every action) and the stores look transitions up here, so no component call
//! runs inside a store transaction.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;

use super::alarm::{AlarmAction, AlarmState};
use super::command::{CommandAction, CommandStatus};

/// One machine's whitelist: where each action takes each state, or the actions
/// the state allows instead, exactly as the component answered.
#[derive(Debug, Clone)]
pub struct Transitions<S, A> {
    next: HashMap<(S, A), Result<S, Vec<A>>>,
    allowed: HashMap<S, Vec<A>>,
}

impl<S: Copy + Eq + Hash, A: Copy + Eq + Hash> Transitions<S, A> {
    /// The table from every `(state, action)` answer and every state's allowed actions.
    pub fn new(
        next: impl IntoIterator<Item = ((S, A), Result<S, Vec<A>>)>,
        allowed: impl IntoIterator<Item = (S, Vec<A>)>,
    ) -> Self {
        Self {
            next: next.into_iter().collect(),
            allowed: allowed.into_iter().collect(),
        }
    }

    /// Where `action` takes `from`, or the actions `from` allows instead. A pair
    /// the component was never asked about allows nothing.
    ///
    /// # Errors
    /// The actions `from` allows, when `action` is not one of them.
    pub fn next(&self, from: S, action: A) -> Result<S, Vec<A>> {
        self.next
            .get(&(from, action))
            .cloned()
            .unwrap_or_else(|| Err(self.allowed(from).to_vec()))
    }

    /// The actions `state` allows, in the component's order (none when terminal).
    pub fn allowed(&self, state: S) -> &[A] {
        self.allowed.get(&state).map_or(&[], Vec::as_slice)
    }
}

/// An action the whitelist does not allow in the state a record is in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{action}` is not allowed in state {state}; allowed: {}", list(.allowed))]
pub struct ActionNotAllowed<S: fmt::Display, A: fmt::Display> {
    pub state: S,
    pub action: A,
    /// What the state allows instead (nothing in a final state).
    pub allowed: Vec<A>,
}

fn list<A: fmt::Display>(actions: &[A]) -> String {
    if actions.is_empty() {
        return "nothing (a final state)".to_owned();
    }
    actions
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl<S, A> Transitions<S, A>
where
    S: Copy + Eq + Hash + fmt::Display,
    A: Copy + Eq + Hash + fmt::Display,
{
    /// The state `action` takes `from` to.
    ///
    /// # Errors
    /// [`ActionNotAllowed`], with what `from` allows instead.
    pub fn apply(&self, from: S, action: A) -> Result<S, ActionNotAllowed<S, A>> {
        self.next(from, action).map_err(|allowed| ActionNotAllowed {
            state: from,
            action,
            allowed,
        })
    }
}

/// Both machines' whitelists, as one rules component defines them.
#[derive(Debug, Clone)]
pub struct Whitelist {
    pub alarms: Transitions<AlarmState, AlarmAction>,
    pub commands: Transitions<CommandStatus, CommandAction>,
}
