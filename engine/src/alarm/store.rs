//! Alarms in the engine's store. Every change is one transaction of the alarm
//! journal, with its audit record: both or neither (see `docs/alarms.md`,
//! ALARM-1 to ALARM-5). Transitions follow the whitelist read from the rules
//! component at load, so no component runs inside a transaction.

use std::collections::HashMap;

use super::model::{ActionRecord, Alarm, Change as Audited, Source};
use crate::model::{ActionNotAllowed, AlarmAction, AlarmState, Scope, Transitions};
use crate::store::{Change, Index, Journal, StateDatabase, StoreError, Tables};
use crate::sync::lock;
use crate::telemetry::{Counter, Metrics};

/// The alarm tables: id -> alarm, (state, id), and (id, seq) -> audit record.
const TABLES: Tables = Tables {
    records: "alarm",
    by_state: "alarm_by_state",
    history: "alarm_action",
};
/// `deviceId:ruleKey` -> the open alarm of that key (ALARM-1: at most one).
pub(super) const ACTIVE: Index<&str> = Index::new("alarm_active");
/// (deviceId, eventId) -> the alarm that event raised: a repeated post is no new alarm.
const EVENTS: Index<(&str, &str)> = Index::new("alarm_event");
/// New alarm id -> the alarm it superseded: the chain, walked backwards.
pub(super) const PREDECESSOR: Index<u64> = Index::new("alarm_predecessor");

/// Why an alarm operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AlarmError {
    #[error("no alarm {0}")]
    NotFound(u64),
    #[error(transparent)]
    Refused(#[from] ActionNotAllowed<AlarmState, AlarmAction>),
    #[error("the active key {key} is still held by alarm {holder}")]
    KeyHeld { key: String, holder: u64 },
    /// The change and its audit record could not be written: neither was.
    #[error("the change was rolled back with its audit record: {0}")]
    Store(#[from] StoreError),
    /// The blocking task running the store call ended without an answer.
    #[error("the alarm store call did not finish: {0}")]
    Interrupted(#[from] tokio::task::JoinError),
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
    /// A lasting condition that is still open and not cleared: its alarm (ALARM-7).
    Ongoing(u64),
}

/// The alarm journal and the whitelist its transitions follow.
#[derive(Debug)]
pub struct AlarmStore {
    pub(super) journal: Journal<Alarm, ActionRecord>,
    whitelist: Transitions<AlarmState, AlarmAction>,
    audit_failures: Counter,
    /// Changes this engine committed, by tenant, for watchers (the console).
    changes: std::sync::Mutex<HashMap<u32, u64>>,
}

/// The alarm tables of one transaction.
type AlarmTables<'t> = Change<'t, Alarm, ActionRecord>;

/// The parts of an audit record that differ between changes.
struct Entry<'a> {
    change: Audited,
    action: Option<AlarmAction>,
    from: Option<AlarmState>,
    actor: &'a str,
    note: Option<&'a str>,
}

/// Stores `alarm` (moved in the state index from `before`) with its audit record.
fn save(
    tables: &mut AlarmTables<'_>,
    alarm: &Alarm,
    before: Option<AlarmState>,
    entry: Entry<'_>,
    at: i64,
) -> Result<(), AlarmError> {
    tables.save(alarm, before.map(AlarmState::as_str), |seq| ActionRecord {
        alarm_id: alarm.id,
        seq,
        change: entry.change,
        action: entry.action,
        from: entry.from,
        to: alarm.state,
        actor: entry.actor.to_owned(),
        at,
        note: entry.note.map(str::to_owned),
    })?;
    Ok(())
}

impl AlarmStore {
    /// The alarm tables in `store`; transitions follow `whitelist`.
    pub fn new(
        db: impl Into<StateDatabase>,
        whitelist: Transitions<AlarmState, AlarmAction>,
    ) -> Self {
        let db = db.into();
        Self {
            journal: Journal::new(&db, TABLES),
            whitelist,
            audit_failures: Counter::default(),
            changes: std::sync::Mutex::default(),
        }
    }

    /// Changes rolled back because they could not be written with their audit record.
    pub fn audit_failures(&self) -> u64 {
        self.audit_failures.get()
    }

    /// How many changes this engine committed so far to the alarms `scope`
    /// sees: a watcher that saw another count reads them again (and learns
    /// nothing of other tenants' alarms).
    pub fn changes(&self, scope: Scope) -> u64 {
        let changes = lock(&self.changes);
        match scope {
            Scope::All => changes.values().sum(),
            Scope::Tenant(tenant) => changes.get(&tenant).copied().unwrap_or(0),
        }
    }

    /// Counts a committed change of a `tenant`'s alarm.
    fn changed(&self, tenant: u32) {
        *lock(&self.changes).entry(tenant).or_default() += 1;
    }

    /// Registers `sluice_alarm_audit_failures_total`.
    pub fn register_metrics(&self, metrics: &Metrics) {
        metrics.register(
            "sluice_alarm_audit_failures",
            "Alarm changes rolled back with their audit record.",
            self.audit_failures.clone(),
        );
    }

    /// The actions the whitelist allows in `state`.
    pub fn allowed(&self, state: AlarmState) -> &[AlarmAction] {
        self.whitelist.allowed(state)
    }

    /// Runs `change` in one transaction, kept only if all of it succeeds.
    fn write<R>(
        &self,
        change: impl FnOnce(&mut AlarmTables<'_>) -> Result<R, AlarmError>,
    ) -> Result<R, AlarmError> {
        let result = self.journal.change(change);
        if let Err(AlarmError::Store(error)) = &result {
            self.audit_failures.inc();
            tracing::error!(%error, "alarm change rolled back with its audit record");
        }
        result
    }

    /// Applies `action` to `alarm` by the whitelist, releasing its active key when
    /// the new state is terminal, and audits it.
    fn transition(
        &self,
        tables: &mut AlarmTables<'_>,
        alarm: &mut Alarm,
        action: AlarmAction,
        actor: &str,
        note: Option<&str>,
        now: i64,
    ) -> Result<(), AlarmError> {
        let from = alarm.state;
        let to = self.whitelist.apply(from, action)?;
        alarm.state = to;
        alarm.stamp(action, actor, now);
        if self.allowed(to).is_empty() {
            release(tables, alarm)?;
        }
        let entry = Entry {
            change: Audited::Transition,
            action: Some(action),
            from: Some(from),
            actor,
            note,
        };
        save(tables, alarm, Some(from), entry, now)
    }

    /// Opens an alarm for `raise`. The alarm holding the key before is handled in
    /// this order (ALARM-3): its key is released, the new alarm inserted and given the
    /// key, then the old one back-filled: unattended -> SUPERSEDED with
    /// `supersededBy`; attended -> state kept; terminal -> untouched.
    ///
    /// # Errors
    /// A storage failure; nothing is changed then.
    pub fn raise(&self, raise: &Raise, now: i64) -> Result<Raised, AlarmError> {
        let key = Alarm::active_key_of(&raise.device_id, &raise.rule_key);
        let raised = self.write(|tables| {
            if let Some(event_id) = &raise.event_id
                && let Some(id) =
                    tables.find(&EVENTS, (raise.device_id.as_str(), event_id.as_str()))?
            {
                return Ok(Raised::Duplicate(id));
            }
            let previous = match tables.find(&ACTIVE, key.as_str())? {
                Some(id) => Some(tables.get(id)?.ok_or(AlarmError::NotFound(id))?),
                None => None,
            };
            if let Some(old) = &previous
                && raise.source.is_level()
                && old.source == raise.source
                && old.cleared_at.is_none()
            {
                // ALARM-7: the same level condition, not a new alarm.
                return Ok(Raised::Ongoing(old.id));
            }
            // 1. Release the key.
            tables.unlink(&ACTIVE, key.as_str())?;
            // 2. Insert the new alarm with the key.
            let alarm = opened(tables.next_id()?, raise, &key, now);
            if let Some(holder) = tables.link(&ACTIVE, key.as_str(), alarm.id)? {
                return Err(AlarmError::KeyHeld { key, holder });
            }
            let entry = Entry {
                change: Audited::Raise,
                action: None,
                from: None,
                actor: "engine",
                note: Some(raise.message.as_str()),
            };
            save(tables, &alarm, None, entry, now)?;
            if let Some(event_id) = &raise.event_id {
                tables.link(
                    &EVENTS,
                    (raise.device_id.as_str(), event_id.as_str()),
                    alarm.id,
                )?;
            }
            // 3. Back-fill the old one.
            let previous = match previous {
                Some(old) => Some(Box::new(self.back_fill(tables, old, alarm.id, now)?)),
                None => None,
            };
            Ok(Raised::Opened {
                alarm: Box::new(alarm),
                previous,
            })
        });
        if matches!(raised, Ok(Raised::Opened { .. })) {
            self.changed(raise.tenant_id);
        }
        raised
    }

    fn back_fill(
        &self,
        tables: &mut AlarmTables<'_>,
        mut old: Alarm,
        new_id: u64,
        now: i64,
    ) -> Result<Alarm, AlarmError> {
        let allowed = self.allowed(old.state);
        if allowed.contains(&AlarmAction::Supersede) {
            old.superseded_by = Some(new_id);
            old.active_key = None;
            tables.link(&PREDECESSOR, new_id, old.id)?;
            let note = format!("replaced by alarm {new_id}");
            let note = Some(note.as_str());
            self.transition(
                tables,
                &mut old,
                AlarmAction::Supersede,
                "engine",
                note,
                now,
            )?;
        } else if !allowed.is_empty() && old.active_key.take().is_some() {
            old.updated_at = now;
            let note = format!("alarm {new_id} took the key; state kept");
            let entry = Entry {
                change: Audited::Release,
                action: None,
                from: Some(old.state),
                actor: "engine",
                note: Some(&note),
            };
            save(tables, &old, Some(old.state), entry, now)?;
        }
        Ok(old)
    }

    /// Marks the open alarm of `deviceId:ruleKey` as cleared (ALARM-4: the state never
    /// changes). `None` when no alarm of that key is open; an alarm cleared before
    /// keeps its first clear.
    ///
    /// # Errors
    /// A storage failure.
    pub fn clear(
        &self,
        device_id: &str,
        rule_key: &str,
        ts_ms: i64,
        event_id: Option<&str>,
        now: i64,
    ) -> Result<Option<Alarm>, AlarmError> {
        let key = Alarm::active_key_of(device_id, rule_key);
        // Nothing open: no write transaction (a commit syncs the file), as
        // for every write that succeeds with no write alarm to clear.
        if self.journal.find(&ACTIVE, key.as_str())?.is_none() {
            return Ok(None);
        }
        let cleared = self.write(|tables| {
            let Some(id) = tables.find(&ACTIVE, key.as_str())? else {
                return Ok(None);
            };
            let mut alarm = tables.get(id)?.ok_or(AlarmError::NotFound(id))?;
            if alarm.cleared_at.is_some() {
                return Ok(Some(alarm));
            }
            alarm.cleared_at = Some(ts_ms);
            alarm.clear_event_id = event_id.map(str::to_owned);
            alarm.updated_at = now;
            let entry = Entry {
                change: Audited::Clear,
                action: None,
                from: Some(alarm.state),
                actor: "engine",
                note: event_id,
            };
            save(tables, &alarm, Some(alarm.state), entry, now)?;
            Ok(Some(alarm))
        });
        if let Ok(Some(alarm)) = &cleared {
            self.changed(alarm.tenant_id);
        }
        cleared
    }

    /// Applies `action` to alarm `id` if `scope` sees it.
    ///
    /// # Errors
    /// [`AlarmError::NotFound`] (also for another tenant's alarm),
    /// [`AlarmError::Refused`] with the allowed actions, or a storage failure
    /// (nothing changed).
    pub fn act(
        &self,
        id: u64,
        action: AlarmAction,
        scope: Scope,
        actor: &str,
        note: Option<&str>,
        now: i64,
    ) -> Result<Alarm, AlarmError> {
        let acted = self.write(|tables| {
            let mut alarm = tables
                .get(id)?
                .filter(|a| scope.sees(a.tenant_id))
                .ok_or(AlarmError::NotFound(id))?;
            self.transition(tables, &mut alarm, action, actor, note, now)?;
            Ok(alarm)
        });
        if let Ok(alarm) = &acted {
            self.changed(alarm.tenant_id);
        }
        acted
    }
}

/// A new alarm for `raise`, holding `key`.
fn opened(id: u64, raise: &Raise, key: &str, now: i64) -> Alarm {
    Alarm {
        id,
        tenant_id: raise.tenant_id,
        device_id: raise.device_id.clone(),
        rule_key: raise.rule_key.clone(),
        state: AlarmState::New,
        source: raise.source,
        message: raise.message.clone(),
        active_key: Some(key.to_owned()),
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
    }
}

/// Gives up the alarm's active key (the alarm ended).
fn release(tables: &mut AlarmTables<'_>, alarm: &mut Alarm) -> Result<(), AlarmError> {
    if let Some(key) = alarm.active_key.take()
        && tables.find(&ACTIVE, key.as_str())? == Some(alarm.id)
    {
        tables.unlink(&ACTIVE, key.as_str())?;
    }
    Ok(())
}
