//! What the alarm store answers: one alarm, its history, the alarms of a state,
//! filtered lists, chains and the day's counts.

use std::collections::HashMap;

use super::model::{ActionRecord, Alarm};
use super::store::{AlarmError, AlarmStore, PREDECESSOR};
use crate::model::{AlarmState, Scope};

/// What `GET /alarms` asks for; every field narrows the list.
#[derive(Debug, Clone, Default)]
pub struct AlarmFilter {
    pub state: Option<AlarmState>,
    pub pending: Option<bool>,
    pub tenant_id: Option<u32>,
    pub device_id: Option<String>,
    pub rule_key: Option<String>,
    /// Created at or after, ms.
    pub since: Option<i64>,
    /// Created before, ms.
    pub until: Option<i64>,
    pub limit: usize,
}

/// Counts for `GET /alarms/stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AlarmStats {
    pub pending: u64,
    /// Alarms created since the start of the day, superseded ones not counted
    /// (their successor is).
    pub raised_today: u64,
    /// Of those, the ones HANDLED or CLOSED.
    pub handled_today: u64,
}

/// A chain as `GET /alarms/{id}/chain` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain {
    /// Oldest first.
    pub alarms: Vec<Alarm>,
    /// For a superseded alarm: the alarm that replaced it.
    pub superseded_by: Option<u64>,
}

impl AlarmStore {
    /// Alarm `id`, if `scope` sees it.
    ///
    /// # Errors
    /// A storage failure.
    pub fn get(&self, id: u64, scope: Scope) -> Result<Option<Alarm>, AlarmError> {
        Ok(self.journal.get(id)?.filter(|a| scope.sees(a.tenant_id)))
    }

    /// The audit trail of alarm `id`, oldest first.
    ///
    /// # Errors
    /// A storage failure.
    pub fn history(&self, id: u64) -> Result<Vec<ActionRecord>, AlarmError> {
        Ok(self.journal.history(id)?)
    }

    /// Alarms in `state`, oldest first, across tenants (for the engine's timers).
    ///
    /// # Errors
    /// A storage failure.
    pub fn in_state(&self, state: AlarmState) -> Result<Vec<Alarm>, AlarmError> {
        let ids = self.journal.ids_in(state.as_str())?;
        Ok(self.journal.load(ids)?)
    }

    /// Alarms `scope` sees that match `filter`, newest first.
    ///
    /// # Errors
    /// A storage failure.
    pub fn list(&self, filter: &AlarmFilter, scope: Scope) -> Result<Vec<Alarm>, AlarmError> {
        let keep = |a: &Alarm| {
            scope.sees(a.tenant_id)
                && filter.state.is_none_or(|s| a.state == s)
                && filter.pending.is_none_or(|p| a.state.is_pending() == p)
                && filter.tenant_id.is_none_or(|t| a.tenant_id == t)
                && filter.device_id.as_ref().is_none_or(|d| &a.device_id == d)
                && filter.rule_key.as_ref().is_none_or(|r| &a.rule_key == r)
                && filter.since.is_none_or(|t| a.created_at >= t)
                && filter.until.is_none_or(|t| a.created_at < t)
        };
        if let Some(state) = filter.state {
            let ids = self.journal.ids_in(state.as_str())?;
            let mut alarms = self.journal.load(ids.into_iter().rev())?;
            alarms.retain(keep);
            alarms.truncate(filter.limit);
            return Ok(alarms);
        }
        let mut alarms = Vec::new();
        self.journal.newest_first(|alarm| {
            if filter.since.is_some_and(|t| alarm.created_at < t) {
                return false;
            }
            if keep(&alarm) {
                alarms.push(alarm);
            }
            alarms.len() < filter.limit
        })?;
        Ok(alarms)
    }

    /// How many alarms still wait for a person (NEW, PUSHED, DELAYED,
    /// CONFIRMED, ESCALATED), by device, of those `scope` sees.
    ///
    /// # Errors
    /// A storage failure.
    pub fn pending_by_device(&self, scope: Scope) -> Result<HashMap<String, u64>, AlarmError> {
        let mut pending: HashMap<String, u64> = HashMap::new();
        for state in AlarmState::ALL.into_iter().filter(|s| s.is_pending()) {
            let ids = self.journal.ids_in(state.as_str())?;
            for alarm in self.journal.load(ids)? {
                if scope.sees(alarm.tenant_id) {
                    *pending.entry(alarm.device_id).or_default() += 1;
                }
            }
        }
        Ok(pending)
    }

    /// The chain of alarm `id`: a superseded alarm alone (with what replaced it);
    /// any other alarm with the unattended alarms it replaced, followed back along
    /// `supersededBy` (ALARM-5: the chain stops at an alarm a person attended).
    ///
    /// # Errors
    /// A storage failure.
    pub fn chain(&self, id: u64, scope: Scope) -> Result<Option<Chain>, AlarmError> {
        let Some(alarm) = self.get(id, scope)? else {
            return Ok(None);
        };
        if alarm.state == AlarmState::Superseded {
            let superseded_by = alarm.superseded_by;
            return Ok(Some(Chain {
                alarms: vec![alarm],
                superseded_by,
            }));
        }
        let mut ids = Vec::new();
        let mut at = id;
        while let Some(previous) = self.journal.find(&PREDECESSOR, at)? {
            ids.push(previous);
            at = previous;
        }
        ids.reverse();
        let mut alarms = self.journal.load(ids)?;
        alarms.push(alarm);
        Ok(Some(Chain {
            alarms,
            superseded_by: None,
        }))
    }

    /// Pending count and today's figures for `scope`; the day starts at `day_start`.
    ///
    /// # Errors
    /// A storage failure.
    pub fn stats(&self, scope: Scope, day_start: i64) -> Result<AlarmStats, AlarmError> {
        let mut stats = AlarmStats::default();
        let filter = AlarmFilter {
            pending: Some(true),
            limit: usize::MAX,
            ..AlarmFilter::default()
        };
        for state in AlarmState::ALL.into_iter().filter(|s| s.is_pending()) {
            let filter = AlarmFilter {
                state: Some(state),
                ..filter.clone()
            };
            stats.pending += self.list(&filter, scope)?.len() as u64;
        }
        let today = AlarmFilter {
            since: Some(day_start),
            limit: usize::MAX,
            ..AlarmFilter::default()
        };
        for alarm in self.list(&today, scope)? {
            if alarm.state == AlarmState::Superseded {
                continue;
            }
            stats.raised_today += 1;
            if alarm.state.counts_as_handled() {
                stats.handled_today += 1;
            }
        }
        Ok(stats)
    }
}
