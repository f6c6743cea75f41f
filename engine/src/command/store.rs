//! Commands in the engine's store. Every change is one transaction of the
//! command journal with its history record; claims, receipts and the timers
//! ([`super::claims`]) are guarded so that two nodes (or a late receipt) never
//! both move one command (`docs/commands.md`, CMD-C1 to CMD-C5).

use std::collections::HashSet;

use super::model::{Command, CommandRecord, NewCommand};
use super::outcome::{WriteIntent, WriteRecord};
use crate::io::exponential;
use crate::model::{ActionNotAllowed, CommandAction, CommandStatus, Scope, Transitions};
use crate::store::{Change, Index, Journal, Keyed, StateDatabase, StoreError, Tables};
use crate::telemetry::{Counter, Metrics};

/// The command tables: id -> command, (status, id), and (id, seq) -> record.
const TABLES: Tables = Tables {
    records: "command",
    by_state: "command_by_status",
    history: "command_action",
};
/// (tenant, requestId) -> id: a repeated request is the same command.
const REQUESTS: Index<(u32, &str)> = Index::new("command_request");
/// id -> id: final commands whose reply is not yet safely in the outbox
/// (CMD-S3 of `docs/commands.md`).
const REPLY_DUE: Index<u64> = Index::new("command_reply_due");

/// Durations and limits of the command machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// How long a claim holds before the command goes back to the queue.
    pub lease_ms: i64,
    /// A SENT command without a receipt for this long fails.
    pub sent_timeout_ms: i64,
    /// A command not done this long after its creation times out.
    pub expire_ms: i64,
    /// Requeues after device-side failures; one more times the command out.
    pub max_retries: u32,
    /// Reclaims after which a person is alarmed.
    pub max_reclaims: u32,
    /// Backoff of a requeued command: `retry_base_ms` x 2^(retries-1), at most
    /// `retry_max_ms`.
    pub retry_base_ms: i64,
    pub retry_max_ms: i64,
}

impl Default for Timings {
    fn default() -> Self {
        Self {
            lease_ms: 60_000,
            sent_timeout_ms: 24 * 3_600_000,
            expire_ms: 72 * 3_600_000,
            max_retries: 10,
            max_reclaims: 5,
            retry_base_ms: 1_000,
            retry_max_ms: 300_000,
        }
    }
}

impl Timings {
    /// The backoff of a command requeued after its `retries`-th failure.
    pub(super) fn backoff_ms(&self, retries: u32) -> i64 {
        let base = u64::try_from(self.retry_base_ms).unwrap_or(0);
        let max = u64::try_from(self.retry_max_ms).unwrap_or(0);
        i64::try_from(exponential(base, max, retries)).unwrap_or(i64::MAX)
    }
}

/// Why a command operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    #[error("no command {0}")]
    NotFound(u64),
    #[error(transparent)]
    Refused(#[from] ActionNotAllowed<CommandStatus, CommandAction>),
    /// The change and its history record could not be written: neither was.
    #[error("command store: {0}")]
    Store(#[from] StoreError),
}

/// What creating a command did.
#[derive(Debug, Clone, PartialEq)]
pub enum Created {
    New(Box<Command>),
    /// The request id was seen before: that command, as it is now.
    Existing(Box<Command>),
}

impl Created {
    pub fn command(&self) -> &Command {
        match self {
            Created::New(c) | Created::Existing(c) => c,
        }
    }
}

/// What one pass of the timers did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Swept {
    /// Claims whose lease ran out, back in the queue.
    pub reclaimed: Vec<u64>,
    /// Commands reclaimed more than `max_reclaims` times by this pass: a person
    /// should look at the node.
    pub too_many_reclaims: Vec<Command>,
    /// SENT without a receipt in time: FAILED.
    pub unanswered: Vec<u64>,
    /// Past their expiry: TIMEOUT.
    pub expired: Vec<u64>,
}

/// (tenant, requestId) -> the write's record (JSON): the audit trail, and the
/// outcome repeated executions get.
const WRITES: &str = "write_audit";
/// (tenant, requestId) -> the write's intent (JSON), until its record is stored.
const INTENTS: &str = "write_intent";

/// The key of a write: tenant and request id.
pub(super) type WriteKey = (u32, &'static str);

/// The command journal and the whitelist its transitions follow; the intents and
/// records of the writes that execute commands.
#[derive(Debug)]
pub struct CommandStore {
    journal: Journal<Command, CommandRecord>,
    pub(super) records: Keyed<WriteKey, WriteRecord>,
    pub(super) intents: Keyed<WriteKey, WriteIntent>,
    whitelist: Transitions<CommandStatus, CommandAction>,
    pub(super) timings: Timings,
    /// Changes rolled back with their audit record.
    audit_failures: Counter,
}

/// The command tables of one transaction.
pub(super) type CommandTables<'t> = Change<'t, Command, CommandRecord>;

/// Stores `command` (moved in the status index from `before`) with its record.
fn save(
    tables: &mut CommandTables<'_>,
    command: &Command,
    action: Option<CommandAction>,
    from: Option<CommandStatus>,
    actor: &str,
    note: Option<String>,
    at: i64,
) -> Result<(), CommandError> {
    tables.save(command, from.map(CommandStatus::as_str), |seq| {
        CommandRecord {
            command_id: command.id,
            seq,
            action,
            from,
            to: command.status,
            actor: actor.to_owned(),
            at,
            note,
        }
    })?;
    Ok(())
}

/// Command `id` as the transaction sees it.
pub(super) fn command(tables: &CommandTables<'_>, id: u64) -> Result<Command, CommandError> {
    tables.get(id)?.ok_or(CommandError::NotFound(id))
}

impl CommandStore {
    pub fn new(
        db: impl Into<StateDatabase>,
        whitelist: Transitions<CommandStatus, CommandAction>,
        timings: Timings,
    ) -> Self {
        let db = db.into();
        Self {
            journal: Journal::new(&db, TABLES),
            records: Keyed::new(&db, WRITES, "write record"),
            intents: Keyed::new(&db, INTENTS, "write intent"),
            whitelist,
            timings,
            audit_failures: Counter::default(),
        }
    }

    pub fn timings(&self) -> &Timings {
        &self.timings
    }

    /// Command changes rolled back with their audit record (`/health`
    /// `auditFailures`, with the alarms').
    pub fn audit_failures(&self) -> u64 {
        self.audit_failures.get()
    }

    /// Registers `sluice_command_audit_failures_total`.
    pub fn register_metrics(&self, metrics: &Metrics) {
        metrics.register(
            "sluice_command_audit_failures",
            "Command changes rolled back with their audit record.",
            self.audit_failures.clone(),
        );
    }

    /// Whether any command is in one of `states`. A pass asks first, so one with
    /// nothing to do commits no write transaction: each commit syncs the state
    /// file, and the timers and claims run twice a second.
    ///
    /// # Errors
    /// A storage failure.
    pub(super) fn any_in(&self, states: &[CommandStatus]) -> Result<bool, CommandError> {
        for status in states {
            if !self.journal.ids_in(status.as_str())?.is_empty() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    pub(super) fn write<R>(
        &self,
        change: impl FnOnce(&mut CommandTables<'_>) -> Result<R, CommandError>,
    ) -> Result<R, CommandError> {
        let result = self.journal.change(change);
        if let Err(CommandError::Store(error)) = &result {
            self.audit_failures.inc();
            tracing::error!(%error, "command change rolled back with its audit record");
        }
        result
    }

    /// Moves `command` by `action` (the whitelist decides) and records it.
    pub(super) fn transition(
        &self,
        tables: &mut CommandTables<'_>,
        command: &mut Command,
        action: CommandAction,
        actor: &str,
        note: Option<String>,
        now: i64,
    ) -> Result<(), CommandError> {
        let from = command.status;
        let to = self.whitelist.apply(from, action)?;
        command.status = to;
        command.updated_at = now;
        if to.is_final() {
            command.finished_at = Some(now);
            // CMD-S3: the reply is due from the same transaction on.
            tables.link(&REPLY_DUE, command.id, command.id)?;
        }
        if to != CommandStatus::Claimed {
            command.lease_expire_at = None;
        }
        save(tables, command, Some(action), Some(from), actor, note, now)
    }

    /// Creates a PENDING command, or finds the one created before with the same
    /// request id (of the same tenant).
    ///
    /// # Errors
    /// A storage failure.
    pub fn create(&self, new: &NewCommand, actor: &str, now: i64) -> Result<Created, CommandError> {
        self.write(|tables| {
            if let Some(request) = &new.request_id
                && let Some(id) = tables.find(&REQUESTS, (new.tenant_id, request.as_str()))?
            {
                return Ok(Created::Existing(Box::new(command(tables, id)?)));
            }
            let id = tables.next_id()?;
            let request_id = new
                .request_id
                .clone()
                .unwrap_or_else(|| format!("cmd-{id}"));
            let command = pending(id, new, request_id.clone(), now, self.timings.expire_ms);
            tables.link(&REQUESTS, (new.tenant_id, request_id.as_str()), id)?;
            save(tables, &command, None, None, actor, None, now)?;
            Ok(Created::New(Box::new(command)))
        })
    }

    /// Cancels command `id` (a user's cancel, or its device was removed).
    ///
    /// # Errors
    /// Not found (or another tenant's), refused in a final status, or a storage
    /// failure.
    pub fn cancel(
        &self,
        id: u64,
        scope: Scope,
        actor: &str,
        reason: &str,
        now: i64,
    ) -> Result<Command, CommandError> {
        self.write(|tables| {
            let mut command = command(tables, id)?;
            if !scope.sees(command.tenant_id) {
                return Err(CommandError::NotFound(id));
            }
            let note = Some(reason.to_owned());
            self.transition(
                tables,
                &mut command,
                CommandAction::Cancel,
                actor,
                note,
                now,
            )?;
            Ok(command)
        })
    }

    /// Command `id`, if `scope` sees it.
    ///
    /// # Errors
    /// A storage failure.
    pub fn get(&self, id: u64, scope: Scope) -> Result<Option<Command>, CommandError> {
        Ok(self.journal.get(id)?.filter(|c| scope.sees(c.tenant_id)))
    }

    /// The newest commands `scope` sees that `filter` keeps, at most `limit`.
    ///
    /// # Errors
    /// A storage failure.
    pub fn list(
        &self,
        scope: Scope,
        filter: &CommandFilter,
        limit: usize,
    ) -> Result<Vec<Command>, CommandError> {
        let mut found = Vec::new();
        self.journal.newest_first(|command: Command| {
            if scope.sees(command.tenant_id) && filter.keeps(&command) {
                found.push(command);
            }
            found.len() < limit
        })?;
        Ok(found)
    }

    /// The history of command `id`, oldest first.
    ///
    /// # Errors
    /// A storage failure.
    pub fn history(&self, id: u64) -> Result<Vec<CommandRecord>, CommandError> {
        Ok(self.journal.history(id)?)
    }

    /// The final commands whose reply is not yet safely in the outbox.
    ///
    /// # Errors
    /// A storage failure.
    pub fn replies_due(&self) -> Result<Vec<Command>, CommandError> {
        Ok(self.journal.load(self.journal.linked(&REPLY_DUE)?)?)
    }

    /// Records that the reply of command `id` is safely in the outbox.
    ///
    /// # Errors
    /// A storage failure.
    pub fn replied(&self, id: u64) -> Result<(), CommandError> {
        self.write(|tables| {
            tables.unlink(&REPLY_DUE, id)?;
            Ok(())
        })
    }

    /// Commands not yet final whose device is not in `devices` (it was removed).
    ///
    /// # Errors
    /// A storage failure.
    pub fn orphans(&self, devices: &HashSet<String>) -> Result<Vec<u64>, CommandError> {
        let mut ids = Vec::new();
        self.journal.newest_first(|command| {
            if !command.status.is_final() && !devices.contains(&command.device_id) {
                ids.push(command.id);
            }
            true
        })?;
        ids.reverse();
        Ok(ids)
    }
}

/// Which commands a list keeps.
#[derive(Debug, Default, Clone)]
pub struct CommandFilter {
    pub device_id: Option<String>,
    pub status: Option<CommandStatus>,
}

impl CommandFilter {
    fn keeps(&self, command: &Command) -> bool {
        self.device_id
            .as_ref()
            .is_none_or(|device| *device == command.device_id)
            && self.status.is_none_or(|status| status == command.status)
    }
}

/// A new PENDING command.
fn pending(id: u64, new: &NewCommand, request_id: String, now: i64, expire_ms: i64) -> Command {
    Command {
        id,
        tenant_id: new.tenant_id,
        device_id: new.device_id.clone(),
        kind: new.kind,
        key: new.key.clone(),
        value: new.value.clone(),
        request_id,
        delivery: new.delivery,
        origin: new.origin.clone(),
        status: CommandStatus::Pending,
        retry_count: 0,
        reclaim_count: 0,
        claim_generation: 0,
        claimed_node_id: None,
        claimed_at: None,
        lease_expire_at: None,
        next_attempt_at: now,
        sent_at: None,
        timeout_at: None,
        expire_at: now.saturating_add(expire_ms),
        created_at: now,
        updated_at: now,
        finished_at: None,
        result: None,
        result_code: None,
        raw_result_code: None,
        raw_ack: None,
        message: None,
    }
}
