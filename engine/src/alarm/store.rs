//! Alarms in the engine's redb file. Every change is one write transaction that
//! also writes its audit record; when that record cannot be written the whole
//! change is rolled back (see `docs/alarms.md`, invariants A1-A5).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use redb::{ReadableTable, TableDefinition};

use super::model::{ActionRecord, Alarm, Change, Source};
use crate::model::{AlarmAction, AlarmState, Scope, Transitions};
use crate::store::tables::{history, ids_under, next_seq, put_indexed, record};
use crate::store::{Store, StoreError};

/// id -> alarm (JSON).
const ALARMS: TableDefinition<u64, &[u8]> = TableDefinition::new("alarm");
/// `deviceId:ruleKey` -> the open alarm of that key (A1: at most one).
const ACTIVE: TableDefinition<&str, u64> = TableDefinition::new("alarm_active");
/// (state, id): the alarms in each state, for the engine's timers and the counts.
const BY_STATE: TableDefinition<(&str, u64), ()> = TableDefinition::new("alarm_by_state");
/// (alarm id, seq) -> action record (JSON): the audit trail.
const ACTIONS: TableDefinition<(u64, u32), &[u8]> = TableDefinition::new("alarm_action");
/// (deviceId, eventId) -> the alarm that event raised: a repeated post is no new alarm.
const EVENTS: TableDefinition<(&str, &str), u64> = TableDefinition::new("alarm_event");
/// New alarm id -> the alarm it superseded: the chain, walked backwards.
const PREDECESSOR: TableDefinition<u64, u64> = TableDefinition::new("alarm_predecessor");

/// Why an alarm operation failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum AlarmError {
    #[error("no alarm {0}")]
    NotFound(u64),
    #[error("`{action}` is not allowed in state {state}; allowed: {}", list(.allowed))]
    Refused {
        state: AlarmState,
        action: AlarmAction,
        allowed: Vec<AlarmAction>,
    },
    #[error("the audit record could not be written, so the change was rolled back: {0}")]
    Audit(String),
    #[error("alarm store: {0}")]
    Store(String),
}

fn list(actions: &[AlarmAction]) -> String {
    if actions.is_empty() {
        return "nothing (terminal state)".to_owned();
    }
    actions
        .iter()
        .map(|a| a.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn db(error: impl std::fmt::Display) -> AlarmError {
    AlarmError::Store(error.to_string())
}

impl From<StoreError> for AlarmError {
    fn from(error: StoreError) -> Self {
        db(error)
    }
}

/// An audit record could not be written.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct AuditError(pub String);

/// The audit table inside one write transaction.
pub struct AuditTable<'a, 't>(&'a mut redb::Table<'t, (u64, u32), &'static [u8]>);

impl AuditTable<'_, '_> {
    /// Writes `record` in the transaction of the change it describes.
    ///
    /// # Errors
    /// When the record cannot be encoded or stored.
    pub fn insert(&mut self, record: &ActionRecord) -> Result<(), AuditError> {
        let bytes = serde_json::to_vec(record).map_err(|e| AuditError(e.to_string()))?;
        self.0
            .insert((record.alarm_id, record.seq), bytes.as_slice())
            .map(drop)
            .map_err(|e| AuditError(e.to_string()))
    }
}

/// Writes audit records; the store's own writer puts them in the audit table. A
/// writer that fails makes the change it belongs to roll back (A2).
pub trait AuditWriter: Send + Sync + std::fmt::Debug {
    /// # Errors
    /// The record could not be written.
    fn write(
        &self,
        table: &mut AuditTable<'_, '_>,
        record: &ActionRecord,
    ) -> Result<(), AuditError>;
}

/// The audit writer of a running engine: the record goes into the audit table.
#[derive(Debug, Default)]
pub struct TableAudit;

impl AuditWriter for TableAudit {
    fn write(
        &self,
        table: &mut AuditTable<'_, '_>,
        record: &ActionRecord,
    ) -> Result<(), AuditError> {
        table.insert(record)
    }
}

/// A rule's decision to open an alarm.
#[derive(Debug, Clone)]
pub struct Raise {
    pub tenant_id: u32,
    pub device_id: String,
    pub rule_key: String,
    pub source: Source,
    pub message: String,
    pub ts_ms: i64,
    pub event_id: Option<String>,
}

/// What a raise did.
#[derive(Debug, Clone, PartialEq)]
pub enum Raised {
    /// A new alarm; the alarm that held the key before, if any, as it is now.
    Opened {
        alarm: Box<Alarm>,
        previous: Option<Box<Alarm>>,
    },
    /// The event id was seen before: the alarm it raised then.
    Duplicate(u64),
    /// A lasting condition that is still open and not cleared: its alarm.
    Ongoing(u64),
}

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

/// The alarm tables, the whitelist and the audit writer.
#[derive(Debug)]
pub struct AlarmStore {
    store: Store,
    whitelist: Transitions<AlarmState, AlarmAction>,
    audit: Arc<dyn AuditWriter>,
    audit_failures: AtomicU64,
}

struct Tables<'t> {
    alarms: redb::Table<'t, u64, &'static [u8]>,
    active: redb::Table<'t, &'static str, u64>,
    by_state: redb::Table<'t, (&'static str, u64), ()>,
    actions: redb::Table<'t, (u64, u32), &'static [u8]>,
    events: redb::Table<'t, (&'static str, &'static str), u64>,
    predecessor: redb::Table<'t, u64, u64>,
}

fn decode(bytes: &[u8]) -> Result<Alarm, AlarmError> {
    serde_json::from_slice(bytes).map_err(db)
}

impl<'t> Tables<'t> {
    fn open(write: &'t redb::WriteTransaction) -> Result<Self, AlarmError> {
        Ok(Self {
            alarms: write.open_table(ALARMS).map_err(db)?,
            active: write.open_table(ACTIVE).map_err(db)?,
            by_state: write.open_table(BY_STATE).map_err(db)?,
            actions: write.open_table(ACTIONS).map_err(db)?,
            events: write.open_table(EVENTS).map_err(db)?,
            predecessor: write.open_table(PREDECESSOR).map_err(db)?,
        })
    }

    fn alarm(&self, id: u64) -> Result<Alarm, AlarmError> {
        record(&self.alarms, id)?.ok_or(AlarmError::NotFound(id))
    }

    /// Stores `alarm`, moving it in the state index from `before`.
    fn put(&mut self, alarm: &Alarm, before: Option<AlarmState>) -> Result<(), AlarmError> {
        let states = (before.map(AlarmState::as_str), alarm.state.as_str());
        Ok(put_indexed(
            &mut self.alarms,
            &mut self.by_state,
            alarm.id,
            states,
            alarm,
        )?)
    }
}

/// The parts of an audit record that differ between changes.
struct Entry<'a> {
    change: Change,
    action: Option<AlarmAction>,
    from: Option<AlarmState>,
    actor: &'a str,
    note: Option<&'a str>,
}

impl AlarmStore {
    /// The alarm tables in `store`; transitions follow `whitelist`.
    pub fn new(
        store: &Store,
        whitelist: Transitions<AlarmState, AlarmAction>,
        audit: Arc<dyn AuditWriter>,
    ) -> Self {
        Self {
            store: store.clone(),
            whitelist,
            audit,
            audit_failures: AtomicU64::new(0),
        }
    }

    /// Changes rolled back because their audit record could not be written.
    pub fn audit_failures(&self) -> u64 {
        self.audit_failures.load(Ordering::Relaxed)
    }

    /// The actions the whitelist allows in `state`.
    pub fn allowed(&self, state: AlarmState) -> &[AlarmAction] {
        self.whitelist.allowed(state)
    }

    /// Runs `change` in one write transaction, committed only if it succeeds.
    fn write<R>(
        &self,
        change: impl FnOnce(&mut Tables<'_>) -> Result<R, AlarmError>,
    ) -> Result<R, AlarmError> {
        let result = self
            .store
            .transaction(|write| change(&mut Tables::open(write)?));
        if let Err(AlarmError::Audit(detail)) = &result {
            self.audit_failures.fetch_add(1, Ordering::Relaxed);
            tracing::error!(%detail, "alarm change rolled back: its audit record failed");
        }
        result
    }

    fn audit(
        &self,
        tables: &mut Tables<'_>,
        alarm: &Alarm,
        entry: Entry<'_>,
        at: i64,
    ) -> Result<(), AlarmError> {
        let record = ActionRecord {
            alarm_id: alarm.id,
            seq: next_seq(&tables.actions, alarm.id)?,
            change: entry.change,
            action: entry.action,
            from: entry.from,
            to: alarm.state,
            actor: entry.actor.to_owned(),
            at,
            note: entry.note.map(str::to_owned),
        };
        self.audit
            .write(&mut AuditTable(&mut tables.actions), &record)
            .map_err(|e| AlarmError::Audit(e.0))
    }

    /// Applies `action` to `alarm` by the whitelist, releasing its active key when
    /// the new state is terminal, and audits it.
    fn transition(
        &self,
        tables: &mut Tables<'_>,
        alarm: &mut Alarm,
        action: AlarmAction,
        actor: &str,
        note: Option<&str>,
        now: i64,
    ) -> Result<(), AlarmError> {
        let from = alarm.state;
        let to = self
            .whitelist
            .next(from, action)
            .map_err(|allowed| AlarmError::Refused {
                state: from,
                action,
                allowed,
            })?;
        alarm.state = to;
        alarm.stamp(action, actor, now);
        if self.allowed(to).is_empty() {
            release(tables, alarm)?;
        }
        tables.put(alarm, Some(from))?;
        let entry = Entry {
            change: Change::Transition,
            action: Some(action),
            from: Some(from),
            actor,
            note,
        };
        self.audit(tables, alarm, entry, now)
    }

    /// Opens an alarm for `raise`. The alarm holding the key before is handled in
    /// this order (A3): its key is released, the new alarm inserted and given the
    /// key, then the old one back-filled: unattended -> SUPERSEDED with
    /// `supersededBy`; attended -> state kept; terminal -> untouched.
    ///
    /// # Errors
    /// A storage, audit or rules failure; nothing is changed then.
    pub fn raise(&self, raise: &Raise, now: i64) -> Result<Raised, AlarmError> {
        let key = Alarm::active_key_of(&raise.device_id, &raise.rule_key);
        self.write(|tables| {
            if let Some(event_id) = &raise.event_id
                && let Some(id) = tables
                    .events
                    .get((raise.device_id.as_str(), event_id.as_str()))
                    .map_err(db)?
            {
                return Ok(Raised::Duplicate(id.value()));
            }
            let holder = tables
                .active
                .get(key.as_str())
                .map_err(db)?
                .map(|v| v.value());
            let previous = holder.map(|id| tables.alarm(id)).transpose()?;
            if let Some(old) = &previous
                && raise.source.is_level()
                && old.source == raise.source
                && old.cleared_at.is_none()
            {
                return Ok(Raised::Ongoing(old.id));
            }
            // 1. Release the key.
            tables.active.remove(key.as_str()).map_err(db)?;
            // 2. Insert the new alarm with the key.
            let id = tables
                .alarms
                .last()
                .map_err(db)?
                .map_or(1, |(k, _)| k.value() + 1);
            let alarm = Alarm {
                id,
                tenant_id: raise.tenant_id,
                device_id: raise.device_id.clone(),
                rule_key: raise.rule_key.clone(),
                state: AlarmState::New,
                source: raise.source,
                message: raise.message.clone(),
                active_key: Some(key.clone()),
                superseded_by: None,
                event_id: raise.event_id.clone(),
                raised_at: raise.ts_ms,
                created_at: now,
                updated_at: now,
                cleared_at: None,
                clear_event_id: None,
                pushed_at: None,
                confirmed_at: None,
                confirmed_by: None,
                escalated_at: None,
                handled_at: None,
                handled_by: None,
                closed_at: None,
                closed_by: None,
            };
            if tables
                .active
                .insert(key.as_str(), id)
                .map_err(db)?
                .is_some()
            {
                return Err(AlarmError::Store(format!("active key {key} is still held")));
            }
            tables.put(&alarm, None)?;
            if let Some(event_id) = &raise.event_id {
                tables
                    .events
                    .insert((raise.device_id.as_str(), event_id.as_str()), id)
                    .map_err(db)?;
            }
            let entry = Entry {
                change: Change::Raise,
                action: None,
                from: None,
                actor: "engine",
                note: Some(raise.message.as_str()),
            };
            self.audit(tables, &alarm, entry, now)?;
            // 3. Back-fill the old one.
            let previous = match previous {
                Some(old) => Some(Box::new(self.back_fill(tables, old, id, now)?)),
                None => None,
            };
            Ok(Raised::Opened {
                alarm: Box::new(alarm),
                previous,
            })
        })
    }

    fn back_fill(
        &self,
        tables: &mut Tables<'_>,
        mut old: Alarm,
        new_id: u64,
        now: i64,
    ) -> Result<Alarm, AlarmError> {
        let allowed = self.allowed(old.state);
        if allowed.contains(&AlarmAction::Supersede) {
            old.superseded_by = Some(new_id);
            old.active_key = None;
            tables.predecessor.insert(new_id, old.id).map_err(db)?;
            let note = format!("replaced by alarm {new_id}");
            self.transition(
                tables,
                &mut old,
                AlarmAction::Supersede,
                "engine",
                Some(&note),
                now,
            )?;
        } else if !allowed.is_empty() && old.active_key.take().is_some() {
            old.updated_at = now;
            tables.put(&old, Some(old.state))?;
            let note = format!("alarm {new_id} took the key; state kept");
            let entry = Entry {
                change: Change::Release,
                action: None,
                from: Some(old.state),
                actor: "engine",
                note: Some(&note),
            };
            self.audit(tables, &old, entry, now)?;
        }
        Ok(old)
    }

    /// Marks the open alarm of `deviceId:ruleKey` as cleared (A4: the state never
    /// changes). `None` when no alarm of that key is open; an alarm cleared before
    /// keeps its first clear.
    ///
    /// # Errors
    /// A storage or audit failure.
    pub fn clear(
        &self,
        device_id: &str,
        rule_key: &str,
        ts_ms: i64,
        event_id: Option<&str>,
        now: i64,
    ) -> Result<Option<Alarm>, AlarmError> {
        let key = Alarm::active_key_of(device_id, rule_key);
        self.write(|tables| {
            let Some(id) = tables
                .active
                .get(key.as_str())
                .map_err(db)?
                .map(|v| v.value())
            else {
                return Ok(None);
            };
            let mut alarm = tables.alarm(id)?;
            if alarm.cleared_at.is_some() {
                return Ok(Some(alarm));
            }
            alarm.cleared_at = Some(ts_ms);
            alarm.clear_event_id = event_id.map(str::to_owned);
            alarm.updated_at = now;
            tables.put(&alarm, Some(alarm.state))?;
            let entry = Entry {
                change: Change::Clear,
                action: None,
                from: Some(alarm.state),
                actor: "engine",
                note: event_id,
            };
            self.audit(tables, &alarm, entry, now)?;
            Ok(Some(alarm))
        })
    }

    /// Applies `action` to alarm `id` if `scope` sees it.
    ///
    /// # Errors
    /// [`AlarmError::NotFound`] (also for another tenant's alarm),
    /// [`AlarmError::Refused`] with the allowed actions, or a storage, audit or
    /// rules failure (nothing changed).
    pub fn act(
        &self,
        id: u64,
        action: AlarmAction,
        scope: Scope,
        actor: &str,
        note: Option<&str>,
        now: i64,
    ) -> Result<Alarm, AlarmError> {
        self.write(|tables| {
            let mut alarm = tables.alarm(id)?;
            if !scope.sees(alarm.tenant_id) {
                return Err(AlarmError::NotFound(id));
            }
            self.transition(tables, &mut alarm, action, actor, note, now)?;
            Ok(alarm)
        })
    }

    /// Alarm `id`, if `scope` sees it.
    ///
    /// # Errors
    /// A storage failure.
    pub fn get(&self, id: u64, scope: Scope) -> Result<Option<Alarm>, AlarmError> {
        let Some(table) = self.store.read_table(ALARMS)? else {
            return Ok(None);
        };
        Ok(record::<Alarm>(&table, id)?.filter(|a| scope.sees(a.tenant_id)))
    }

    /// The audit trail of alarm `id`, oldest first.
    ///
    /// # Errors
    /// A storage failure.
    pub fn history(&self, id: u64) -> Result<Vec<ActionRecord>, AlarmError> {
        match self.store.read_table(ACTIONS)? {
            Some(table) => Ok(history(&table, id)?),
            None => Ok(Vec::new()),
        }
    }

    /// Alarms in `state`, oldest first, across tenants (for the engine's timers).
    ///
    /// # Errors
    /// A storage failure.
    pub fn in_state(&self, state: AlarmState) -> Result<Vec<Alarm>, AlarmError> {
        let ids = self.ids_in_state(state)?;
        self.load(ids)
    }

    fn ids_in_state(&self, state: AlarmState) -> Result<Vec<u64>, AlarmError> {
        match self.store.read_table(BY_STATE)? {
            Some(index) => Ok(ids_under(&index, state.as_str())?),
            None => Ok(Vec::new()),
        }
    }

    fn load(&self, ids: Vec<u64>) -> Result<Vec<Alarm>, AlarmError> {
        let Some(table) = self.store.read_table(ALARMS)? else {
            return Ok(Vec::new());
        };
        let mut alarms = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(alarm) = record(&table, id)? {
                alarms.push(alarm);
            }
        }
        Ok(alarms)
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
            let mut ids = self.ids_in_state(state)?;
            ids.reverse();
            let mut alarms = self.load(ids)?;
            alarms.retain(keep);
            alarms.truncate(filter.limit);
            return Ok(alarms);
        }
        let Some(table) = self.store.read_table(ALARMS)? else {
            return Ok(Vec::new());
        };
        let mut alarms = Vec::new();
        for entry in table.iter().map_err(db)?.rev() {
            let alarm = decode(entry.map_err(db)?.1.value())?;
            if filter.since.is_some_and(|t| alarm.created_at < t) {
                break;
            }
            if keep(&alarm) {
                alarms.push(alarm);
                if alarms.len() >= filter.limit {
                    break;
                }
            }
        }
        Ok(alarms)
    }

    /// The chain of alarm `id`: a superseded alarm alone (with what replaced it);
    /// any other alarm with the unattended alarms it replaced, followed back along
    /// `supersededBy` (A5: the chain stops at an alarm a person attended).
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
        let predecessors = self.store.read_table(PREDECESSOR)?;
        let mut ids = Vec::new();
        if let Some(table) = predecessors {
            let mut at = id;
            while let Some(previous) = table.get(at).map_err(db)?.map(|v| v.value()) {
                ids.push(previous);
                at = previous;
            }
        }
        ids.reverse();
        let mut alarms = self.load(ids)?;
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

/// Gives up the alarm's active key (the alarm ended).
fn release(tables: &mut Tables<'_>, alarm: &mut Alarm) -> Result<(), AlarmError> {
    if let Some(key) = alarm.active_key.take() {
        let holder = tables
            .active
            .get(key.as_str())
            .map_err(db)?
            .map(|v| v.value());
        if holder == Some(alarm.id) {
            tables.active.remove(key.as_str()).map_err(db)?;
        }
    }
    Ok(())
}
