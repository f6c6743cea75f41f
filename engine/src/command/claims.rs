//! The node protocol on commands: claims (CMD-C1), receipts with the four guards
//! (CMD-C2), and the timers that take back expired claims and end stale commands.

use super::model::{Command, Delivery, Receipt, ReceiptOutcome, Rejection};
use super::store::{CommandError, CommandStore, CommandTables, Swept, command};
use crate::model::{CommandAction, CommandStatus, ReceiptResult, result_code};

/// What a receipt's failure does to its command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Finality {
    /// As the receipt's result and the command's delivery say (a deferrable
    /// command may go back to the queue).
    AsReported,
    /// The command is done with: another attempt could execute it twice.
    Settled,
}

/// The states whose commands the timers look at.
const TIMED: [CommandStatus; 3] = [
    CommandStatus::Pending,
    CommandStatus::Claimed,
    CommandStatus::Sent,
];

impl CommandStore {
    /// Claims (CMD-C1) up to `max` PENDING commands that are due, oldest first, for
    /// `node_id`: each gets a lease, the next claim generation and the node.
    /// `devices` limits the claim to the devices it accepts.
    ///
    /// # Errors
    /// A storage failure; nothing is claimed then.
    pub fn claim(
        &self,
        node_id: &str,
        max: usize,
        devices: Option<&dyn Fn(&str) -> bool>,
        now: i64,
    ) -> Result<Vec<Command>, CommandError> {
        if !self.any_in(&[CommandStatus::Pending])? {
            return Ok(Vec::new());
        }
        self.write(|tables| {
            let mut claimed = Vec::new();
            let pending = CommandStatus::Pending.as_str();
            for id in tables.ids_in(pending)? {
                if claimed.len() >= max {
                    break;
                }
                // Taken by another node's claim meanwhile: not this one's.
                let Some(mut command) = tables.take(id, pending)? else {
                    continue;
                };
                let wanted = devices.is_none_or(|accepts| accepts(&command.device_id));
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

    /// Puts the claims `node_id` still holds back in the queue, generation kept
    /// (CMD-W4 of `docs/commands.md`): the node is this engine, started
    /// again, and nothing of it executes them any more. They are claimed anew at
    /// once, and a write they had begun is settled, never made again (CMD-W2).
    ///
    /// # Errors
    /// A storage failure; nothing is released then.
    pub fn release_claims_of(&self, node_id: &str, now: i64) -> Result<Vec<u64>, CommandError> {
        self.write(|tables| {
            let mut released = Vec::new();
            let claimed = CommandStatus::Claimed.as_str();
            for id in tables.ids_in(claimed)? {
                let Some(mut command) = tables.take(id, claimed)? else {
                    continue;
                };
                if command.claimed_node_id.as_deref() != Some(node_id) {
                    continue;
                }
                command.reclaim_count += 1;
                command.next_attempt_at = now;
                let note = Some("the engine started again while it held the claim".to_owned());
                self.transition(
                    tables,
                    &mut command,
                    CommandAction::Requeue,
                    "engine",
                    note,
                    now,
                )?;
                released.push(id);
            }
            Ok(released)
        })
    }

    /// Applies a receipt (CMD-C2) if its four guards hold: the command, the claim
    /// generation, the node, and a status of CLAIMED or SENT. A receipt without a
    /// generation is rejected; one for a claim with no recorded node is rejected
    /// (NODE_UNKNOWN); one of an older generation is a duplicate; one of the
    /// current generation from another node is rejected (NODE_MISMATCH); one for
    /// a command no longer CLAIMED or SENT is a duplicate.
    ///
    /// # Errors
    /// [`CommandError::NotFound`], or a storage failure (nothing changed).
    pub fn receipt(
        &self,
        id: u64,
        receipt: &Receipt,
        now: i64,
    ) -> Result<ReceiptOutcome, CommandError> {
        self.write(|tables| self.apply_receipt(tables, id, receipt, Finality::AsReported, now))
    }

    /// Applies a receipt in the transaction `tables`, if its guards hold (see
    /// [`CommandStore::receipt`]); with [`Finality::Settled`] a failure ends the
    /// command whatever its delivery.
    ///
    /// # Errors
    /// [`CommandError::NotFound`], or a storage failure.
    pub(super) fn apply_receipt(
        &self,
        tables: &mut CommandTables<'_>,
        id: u64,
        receipt: &Receipt,
        finality: Finality,
        now: i64,
    ) -> Result<ReceiptOutcome, CommandError> {
        let Some(generation) = receipt.claim_generation else {
            return Ok(ReceiptOutcome::Rejected(Rejection::ClaimGenerationRequired));
        };
        if receipt.result == ReceiptResult::Acked && receipt.result_code.is_none() {
            return Ok(ReceiptOutcome::Rejected(Rejection::ResultCodeRequired));
        }
        let mut command = command(tables, id)?;
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
        let (action, note) = match finality {
            Finality::Settled if receipt.result != ReceiptResult::Acked => {
                (CommandAction::Fail, receipt.message.clone())
            }
            _ => self.receipt_action(&mut command, receipt, now),
        };
        self.transition(tables, &mut command, action, &actor, note, now)?;
        Ok(ReceiptOutcome::Accepted(Box::new(command)))
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
            // The device answered and said no: that is a failure, not an ACKED (CMD-C4).
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

    /// Where a receipt takes the command (the counters and times it sets included).
    /// The timers at `now`: leases that ran out go back to the queue (generation
    /// kept, CMD-C3; `reclaimCount` + 1); SENT commands past `timeoutAt` fail; anything
    /// not done past `expireAt` times out.
    ///
    /// # Errors
    /// A storage failure; nothing of the pass is applied then.
    pub fn sweep(&self, now: i64) -> Result<Swept, CommandError> {
        if !self.any_in(&TIMED)? {
            return Ok(Swept::default());
        }
        self.write(|tables| {
            let mut swept = Swept::default();
            for status in TIMED {
                for id in tables.ids_in(status.as_str())? {
                    // Moved or held by another engine's transaction: its business.
                    let Some(mut command) = tables.take(id, status.as_str())? else {
                        continue;
                    };
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
}
