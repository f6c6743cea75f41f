//! Commands in the engine's redb file. Every change is one write transaction with
//! its history record; claims, receipts and the timers are guarded so that two
//! nodes (or a late receipt) never both move one command (`docs/commands.md`,
//! invariants C1-C5).

use std::collections::HashSet;

use redb::{ReadableTable, TableDefinition};

use super::model::{
    Command, CommandRecord, Delivery, NewCommand, Receipt, ReceiptOutcome, Rejection,
};
use crate::model::Scope;
use crate::model::{CommandAction, CommandStatus, ReceiptResult, Transitions, result_code};
use crate::store::tables::{history, ids_under, next_seq, put_indexed, record};
use crate::store::{Store, StoreError};

/// id -> command (JSON).
const COMMANDS: TableDefinition<u64, &[u8]> = TableDefinition::new("command");
/// (status, id): the commands in each status, for claims and timers.
const BY_STATUS: TableDefinition<(&str, u64), ()> = TableDefinition::new("command_by_status");
/// (tenant, requestId) -> id: a repeated request is the same command.
const REQUESTS: TableDefinition<(u32, &str), u64> = TableDefinition::new("command_request");
/// (id, seq) -> record (JSON): every change.
const HISTORY: TableDefinition<(u64, u32), &[u8]> = TableDefinition::new("command_action");

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
    fn backoff_ms(&self, retries: u32) -> i64 {
        let doublings = retries.saturating_sub(1).min(30);
        self.retry_base_ms
            .saturating_mul(1 << doublings)
            .min(self.retry_max_ms)
    }
}

/// Why a command operation failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    #[error("no command {0}")]
    NotFound(u64),
    #[error("`{action}` is not allowed in status {status}; allowed: {}", list(.allowed))]
    Refused {
        status: CommandStatus,
        action: CommandAction,
        allowed: Vec<CommandAction>,
    },
    #[error("command store: {0}")]
    Store(String),
}

fn list(actions: &[CommandAction]) -> String {
    if actions.is_empty() {
        return "nothing (final status)".to_owned();
    }
    actions
        .iter()
        .map(|a| a.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn db(error: impl std::fmt::Display) -> CommandError {
    CommandError::Store(error.to_string())
}

impl From<StoreError> for CommandError {
    fn from(error: StoreError) -> Self {
        db(error)
    }
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

/// The command tables and the whitelist.
#[derive(Debug)]
pub struct CommandStore {
    store: Store,
    whitelist: Transitions<CommandStatus, CommandAction>,
    timings: Timings,
}

struct Tables<'t> {
    commands: redb::Table<'t, u64, &'static [u8]>,
    by_status: redb::Table<'t, (&'static str, u64), ()>,
    requests: redb::Table<'t, (u32, &'static str), u64>,
    history: redb::Table<'t, (u64, u32), &'static [u8]>,
}

fn decode(bytes: &[u8]) -> Result<Command, CommandError> {
    serde_json::from_slice(bytes).map_err(db)
}

impl<'t> Tables<'t> {
    fn open(write: &'t redb::WriteTransaction) -> Result<Self, CommandError> {
        Ok(Self {
            commands: write.open_table(COMMANDS).map_err(db)?,
            by_status: write.open_table(BY_STATUS).map_err(db)?,
            requests: write.open_table(REQUESTS).map_err(db)?,
            history: write.open_table(HISTORY).map_err(db)?,
        })
    }

    fn command(&self, id: u64) -> Result<Command, CommandError> {
        record(&self.commands, id)?.ok_or(CommandError::NotFound(id))
    }

    fn put(
        &mut self,
        command: &Command,
        before: Option<CommandStatus>,
    ) -> Result<(), CommandError> {
        let statuses = (before.map(CommandStatus::as_str), command.status.as_str());
        Ok(put_indexed(
            &mut self.commands,
            &mut self.by_status,
            command.id,
            statuses,
            command,
        )?)
    }

    fn record(
        &mut self,
        command: &Command,
        action: Option<CommandAction>,
        from: Option<CommandStatus>,
        actor: &str,
        note: Option<String>,
        at: i64,
    ) -> Result<(), CommandError> {
        let record = CommandRecord {
            command_id: command.id,
            seq: next_seq(&self.history, command.id)?,
            action,
            from,
            to: command.status,
            actor: actor.to_owned(),
            at,
            note,
        };
        let bytes = serde_json::to_vec(&record).map_err(db)?;
        self.history
            .insert((command.id, record.seq), bytes.as_slice())
            .map_err(db)?;
        Ok(())
    }

    fn ids_in(&self, status: CommandStatus) -> Result<Vec<u64>, CommandError> {
        Ok(ids_under(&self.by_status, status.as_str())?)
    }
}

impl CommandStore {
    pub fn new(
        store: &Store,
        whitelist: Transitions<CommandStatus, CommandAction>,
        timings: Timings,
    ) -> Self {
        Self {
            store: store.clone(),
            whitelist,
            timings,
        }
    }

    pub fn timings(&self) -> &Timings {
        &self.timings
    }

    fn write<R>(
        &self,
        change: impl FnOnce(&mut Tables<'_>) -> Result<R, CommandError>,
    ) -> Result<R, CommandError> {
        self.store
            .transaction(|write| change(&mut Tables::open(write)?))
    }

    /// Moves `command` by `action` (the whitelist decides) and records it.
    fn transition(
        &self,
        tables: &mut Tables<'_>,
        command: &mut Command,
        action: CommandAction,
        actor: &str,
        note: Option<String>,
        now: i64,
    ) -> Result<(), CommandError> {
        let from = command.status;
        let to = self
            .whitelist
            .next(from, action)
            .map_err(|allowed| CommandError::Refused {
                status: from,
                action,
                allowed,
            })?;
        command.status = to;
        command.updated_at = now;
        if to.is_final() {
            command.finished_at = Some(now);
        }
        if to != CommandStatus::Claimed {
            command.lease_expire_at = None;
        }
        tables.put(command, Some(from))?;
        tables.record(command, Some(action), Some(from), actor, note, now)
    }

    /// Creates a PENDING command, or finds the one created before with the same
    /// request id (of the same tenant).
    ///
    /// # Errors
    /// A storage failure.
    pub fn create(&self, new: &NewCommand, actor: &str, now: i64) -> Result<Created, CommandError> {
        self.write(|tables| {
            if let Some(request) = &new.request_id
                && let Some(id) = tables
                    .requests
                    .get((new.tenant_id, request.as_str()))
                    .map_err(db)?
            {
                return Ok(Created::Existing(Box::new(tables.command(id.value())?)));
            }
            let id = tables
                .commands
                .last()
                .map_err(db)?
                .map_or(1, |(k, _)| k.value() + 1);
            let request_id = new
                .request_id
                .clone()
                .unwrap_or_else(|| format!("cmd-{id}"));
            let command = Command {
                id,
                tenant_id: new.tenant_id,
                device_id: new.device_id.clone(),
                kind: new.kind,
                key: new.key.clone(),
                value: new.value.clone(),
                request_id: request_id.clone(),
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
                expire_at: now.saturating_add(self.timings.expire_ms),
                created_at: now,
                updated_at: now,
                finished_at: None,
                result: None,
                result_code: None,
                raw_result_code: None,
                raw_ack: None,
                message: None,
            };
            tables
                .requests
                .insert((new.tenant_id, request_id.as_str()), id)
                .map_err(db)?;
            tables.put(&command, None)?;
            tables.record(&command, None, None, actor, None, now)?;
            Ok(Created::New(Box::new(command)))
        })
    }

    /// Claims (I-18) up to `max` PENDING commands that are due, oldest first, for
    /// `node_id`: each gets a lease, the next claim generation and the node.
    /// `devices` limits the claim to those devices.
    ///
    /// # Errors
    /// A storage or rules failure; nothing is claimed then.
    pub fn claim(
        &self,
        node_id: &str,
        max: usize,
        devices: Option<&HashSet<String>>,
        now: i64,
    ) -> Result<Vec<Command>, CommandError> {
        self.write(|tables| {
            let mut claimed = Vec::new();
            for id in tables.ids_in(CommandStatus::Pending)? {
                if claimed.len() >= max {
                    break;
                }
                let mut command = tables.command(id)?;
                let wanted = devices.is_none_or(|d| d.contains(&command.device_id));
                if !wanted || command.next_attempt_at > now || command.expire_at <= now {
                    continue;
                }
                command.claim_generation += 1;
                command.claimed_node_id = Some(node_id.to_owned());
                command.claimed_at = Some(now);
                command.lease_expire_at = Some(now.saturating_add(self.timings.lease_ms));
                let actor = format!("node:{node_id}");
                let note = format!("generation {}", command.claim_generation);
                self.transition(
                    tables,
                    &mut command,
                    CommandAction::Claim,
                    &actor,
                    Some(note),
                    now,
                )?;
                claimed.push(command);
            }
            Ok(claimed)
        })
    }

    /// Applies a receipt (I-05) if its four guards hold: the command, the claim
    /// generation, the node, and a status of CLAIMED or SENT. A receipt without a
    /// generation is rejected; one for a claim with no recorded node is rejected
    /// (NODE_UNKNOWN); one of an older generation is a duplicate; one of the
    /// current generation from another node is rejected (NODE_MISMATCH); one for
    /// a command no longer CLAIMED or SENT is a duplicate.
    ///
    /// # Errors
    /// [`CommandError::NotFound`], or a storage or rules failure (nothing changed).
    pub fn receipt(
        &self,
        id: u64,
        receipt: &Receipt,
        now: i64,
    ) -> Result<ReceiptOutcome, CommandError> {
        let Some(generation) = receipt.claim_generation else {
            return Ok(ReceiptOutcome::Rejected(Rejection::ClaimGenerationRequired));
        };
        if receipt.result == ReceiptResult::Acked && receipt.result_code.is_none() {
            return Ok(ReceiptOutcome::Rejected(Rejection::ResultCodeRequired));
        }
        self.write(|tables| {
            let mut command = tables.command(id)?;
            let Some(node) = &command.claimed_node_id else {
                return Ok(ReceiptOutcome::Rejected(Rejection::NodeUnknown));
            };
            // An older generation is a late receipt of an earlier claim, whichever
            // node sends it: nothing to apply, and not an error.
            if generation != command.claim_generation {
                return Ok(ReceiptOutcome::Duplicated);
            }
            if *node != receipt.node_id {
                return Ok(ReceiptOutcome::Rejected(Rejection::NodeMismatch));
            }
            if !matches!(command.status, CommandStatus::Claimed | CommandStatus::Sent) {
                return Ok(ReceiptOutcome::Duplicated);
            }
            command.result = Some(receipt.result);
            command.result_code = receipt.result_code;
            command.raw_result_code.clone_from(&receipt.raw_result_code);
            command.raw_ack.clone_from(&receipt.raw_ack);
            command.message.clone_from(&receipt.message);
            let actor = format!("node:{}", receipt.node_id);
            let (action, note) = self.receipt_action(&mut command, receipt, now);
            self.transition(tables, &mut command, action, &actor, note, now)?;
            Ok(ReceiptOutcome::Accepted(Box::new(command)))
        })
    }

    /// Where a receipt takes the command (the counters and times it sets included).
    fn receipt_action(
        &self,
        command: &mut Command,
        receipt: &Receipt,
        now: i64,
    ) -> (CommandAction, Option<String>) {
        match receipt.result {
            ReceiptResult::Acked if receipt.result_code == Some(result_code::SUCCESS) => {
                (CommandAction::Ack, None)
            }
            // The device answered and said no: that is a failure, not an ACKED.
            ReceiptResult::Acked => (
                CommandAction::Fail,
                Some(format!(
                    "the device answered with result code {}",
                    receipt.result_code.unwrap_or_default()
                )),
            ),
            ReceiptResult::Sent => {
                command.sent_at = Some(now);
                command.timeout_at = Some(now.saturating_add(self.timings.sent_timeout_ms));
                (CommandAction::ReportSent, None)
            }
            ReceiptResult::Timeout | ReceiptResult::DeviceOffline | ReceiptResult::Failed => {
                let what = format!("{:?}", receipt.result).to_uppercase();
                if command.delivery == Delivery::Realtime {
                    return (CommandAction::Fail, Some(format!("{what} (realtime)")));
                }
                // Not supported / invalid parameter: another try gets the same answer.
                let permanent = matches!(
                    receipt.result_code,
                    Some(result_code::UNSUPPORTED | result_code::INVALID_PARAMETER)
                );
                if receipt.result == ReceiptResult::Failed && permanent {
                    return (
                        CommandAction::Fail,
                        Some(format!(
                            "{what} (code {})",
                            receipt.result_code.unwrap_or_default()
                        )),
                    );
                }
                command.retry_count += 1;
                if command.retry_count > self.timings.max_retries {
                    let note = format!("{what}; {} retries", command.retry_count);
                    return (CommandAction::Expire, Some(note));
                }
                let delay = self.timings.backoff_ms(command.retry_count);
                command.next_attempt_at = now.saturating_add(delay);
                let note = format!("{what}; retry {} in {delay} ms", command.retry_count);
                (CommandAction::Requeue, Some(note))
            }
        }
    }

    /// Cancels command `id` (a user's cancel, or its device was removed).
    ///
    /// # Errors
    /// Not found (or another tenant's), refused in a final status, or a storage
    /// or rules failure.
    pub fn cancel(
        &self,
        id: u64,
        scope: Scope,
        actor: &str,
        reason: &str,
        now: i64,
    ) -> Result<Command, CommandError> {
        self.write(|tables| {
            let mut command = tables.command(id)?;
            if !scope.sees(command.tenant_id) {
                return Err(CommandError::NotFound(id));
            }
            self.transition(
                tables,
                &mut command,
                CommandAction::Cancel,
                actor,
                Some(reason.to_owned()),
                now,
            )?;
            Ok(command)
        })
    }

    /// The timers at `now`: leases that ran out go back to the queue (generation
    /// kept, `reclaimCount` + 1); SENT commands past `timeoutAt` fail; anything
    /// not done past `expireAt` times out.
    ///
    /// # Errors
    /// A storage or rules failure; nothing of the pass is applied then.
    pub fn sweep(&self, now: i64) -> Result<Swept, CommandError> {
        self.write(|tables| {
            let mut swept = Swept::default();
            for status in [
                CommandStatus::Pending,
                CommandStatus::Claimed,
                CommandStatus::Sent,
            ] {
                for id in tables.ids_in(status)? {
                    let mut command = tables.command(id)?;
                    if command.expire_at <= now {
                        let note = Some("past its expiry".to_owned());
                        self.transition(
                            tables,
                            &mut command,
                            CommandAction::Expire,
                            "engine",
                            note,
                            now,
                        )?;
                        swept.expired.push(id);
                    } else if status == CommandStatus::Claimed
                        && command.lease_expire_at.is_some_and(|at| at <= now)
                    {
                        command.reclaim_count += 1;
                        command.next_attempt_at = now;
                        let note = format!(
                            "the claim of {} ran out (reclaim {})",
                            command.claimed_node_id.as_deref().unwrap_or("?"),
                            command.reclaim_count
                        );
                        self.transition(
                            tables,
                            &mut command,
                            CommandAction::Requeue,
                            "engine",
                            Some(note),
                            now,
                        )?;
                        swept.reclaimed.push(id);
                        if command.reclaim_count == self.timings.max_reclaims + 1 {
                            swept.too_many_reclaims.push(command);
                        }
                    } else if status == CommandStatus::Sent
                        && command.timeout_at.is_some_and(|at| at <= now)
                    {
                        let note = Some("no receipt in time".to_owned());
                        self.transition(
                            tables,
                            &mut command,
                            CommandAction::Fail,
                            "engine",
                            note,
                            now,
                        )?;
                        swept.unanswered.push(id);
                    }
                }
            }
            Ok(swept)
        })
    }

    /// Command `id`, if `scope` sees it.
    ///
    /// # Errors
    /// A storage failure.
    pub fn get(&self, id: u64, scope: Scope) -> Result<Option<Command>, CommandError> {
        let Some(table) = self.store.read_table(COMMANDS)? else {
            return Ok(None);
        };
        Ok(record::<Command>(&table, id)?.filter(|c| scope.sees(c.tenant_id)))
    }

    /// The history of command `id`, oldest first.
    ///
    /// # Errors
    /// A storage failure.
    pub fn history(&self, id: u64) -> Result<Vec<CommandRecord>, CommandError> {
        match self.store.read_table(HISTORY)? {
            Some(table) => Ok(history(&table, id)?),
            None => Ok(Vec::new()),
        }
    }

    /// Commands not yet final whose device is not in `devices` (it was removed).
    ///
    /// # Errors
    /// A storage failure.
    pub fn orphans(&self, devices: &HashSet<String>) -> Result<Vec<u64>, CommandError> {
        let Some(table) = self.store.read_table(COMMANDS)? else {
            return Ok(Vec::new());
        };
        let mut ids = Vec::new();
        for entry in table.iter().map_err(db)? {
            let command = decode(entry.map_err(db)?.1.value())?;
            if !command.status.is_final() && !devices.contains(&command.device_id) {
                ids.push(command.id);
            }
        }
        Ok(ids)
    }
}
