//! The writes that execute commands, in the command store: an intent committed
//! before the device sees anything (CMD-W1 of `docs/commands.md`), and the
//! outcome stored with the command's receipt in one transaction (CMD-W3).

use super::claims::Finality;
use super::model::{Receipt, ReceiptOutcome};
use super::outcome::{WriteIntent, WriteRecord, WriteStatus};
use super::store::{CommandError, CommandStore};
use crate::store::StoreError;

impl CommandStore {
    /// The outcome an earlier write of this request got, if any.
    ///
    /// # Errors
    /// A storage failure.
    pub fn recorded(
        &self,
        tenant_id: u32,
        request_id: &str,
    ) -> Result<Option<WriteRecord>, StoreError> {
        self.records.get((tenant_id, request_id))
    }

    /// The intent of a write of this request that has no outcome yet: one is in
    /// doubt unless that write is running now.
    ///
    /// # Errors
    /// A storage failure.
    pub fn intent(
        &self,
        tenant_id: u32,
        request_id: &str,
    ) -> Result<Option<WriteIntent>, StoreError> {
        self.intents.get((tenant_id, request_id))
    }

    /// Commits `intent` before its write goes to the device (CMD-W1).
    ///
    /// # Errors
    /// A storage failure: then the write must not be made.
    pub fn intend(&self, intent: &WriteIntent) -> Result<(), StoreError> {
        let request = &intent.request;
        self.intents
            .put((request.tenant_id, request.request_id.as_str()), intent)
    }

    /// Stores the outcome of command `id`'s write, removes its intent and applies
    /// the receipt for it, in one transaction (CMD-W3): the record is kept even when
    /// the receipt is stale (the device was written all the same), so another
    /// claim gets this outcome instead of writing again. An outcome that must not
    /// be tried again ([`WriteRecord::is_settled_failure`]) ends the command.
    ///
    /// # Errors
    /// [`CommandError::NotFound`], or a storage failure: nothing is kept, and the
    /// intent stays in doubt.
    pub fn finish_write(
        &self,
        id: u64,
        receipt: &Receipt,
        record: &WriteRecord,
        now: i64,
    ) -> Result<ReceiptOutcome, CommandError> {
        self.write(|tables| {
            if record.status != WriteStatus::InFlight {
                let key = (record.tenant_id, record.request_id.as_str());
                self.records.put_in(tables, key, record)?;
                self.intents.remove_in(tables, key)?;
            }
            let finality = if record.is_settled_failure() {
                Finality::Settled
            } else {
                Finality::AsReported
            };
            self.apply_receipt(tables, id, receipt, finality, now)
        })
    }
}
