//! Parent names and the numbers rows hold for them (the `entity_parent` table).

use std::collections::HashMap;

use redb::{ReadableTable, TableDefinition};

use crate::store::database::Store;
use crate::store::error::StoreError;

/// Parent number -> parent name.
pub(super) const PARENTS: TableDefinition<u32, &str> = TableDefinition::new("entity_parent");

/// Parent names and their numbers, as the parent table holds them.
#[derive(Debug, Default)]
pub(super) struct Parents {
    names: Vec<String>,
    numbers: HashMap<String, u32>,
}

impl Parents {
    /// The committed parent table.
    ///
    /// # Errors
    /// A storage failure, or numbers out of sequence.
    pub fn load(store: &Store) -> Result<Self, StoreError> {
        let mut parents = Self::default();
        if let Some(table) = store.read_table(PARENTS)? {
            for entry in table.iter()? {
                let (number, name) = entry?;
                let (number, name) = (number.value(), name.value().to_owned());
                if number as usize != parents.names.len() {
                    return Err(StoreError::Malformed {
                        what: "parent table",
                        reason: format!("parent number {number} out of sequence"),
                    });
                }
                parents.push(name);
            }
        }
        Ok(parents)
    }

    pub fn name(&self, number: u32) -> &str {
        self.names.get(number as usize).map_or("", String::as_str)
    }

    pub fn number(&self, name: &str) -> Option<u32> {
        self.numbers.get(name).copied()
    }

    /// Keeps the names a committed transaction numbered.
    pub fn extend(&mut self, added: Vec<String>) {
        for name in added {
            self.push(name);
        }
    }

    fn push(&mut self, name: String) {
        self.numbers.insert(name.clone(), self.names.len() as u32);
        self.names.push(name);
    }
}

/// The parent numbers one write transaction sees: those committed, and those
/// it gives (kept only if it commits).
pub(super) struct Staged<'p> {
    known: &'p Parents,
    pub added: Vec<String>,
}

impl<'p> Staged<'p> {
    pub fn new(known: &'p Parents) -> Self {
        Self {
            known,
            added: Vec::new(),
        }
    }

    pub fn name(&self, number: u32) -> &str {
        match (number as usize).checked_sub(self.known.names.len()) {
            Some(i) => self.added.get(i).map_or("", String::as_str),
            None => self.known.name(number),
        }
    }

    /// The number of `name`, given one (and written) if it has none yet.
    pub fn number(
        &mut self,
        name: &str,
        table: &mut redb::Table<'_, u32, &'static str>,
    ) -> Result<u32, StoreError> {
        if let Some(number) = self.known.number(name) {
            return Ok(number);
        }
        let at = self.known.names.len();
        if let Some(i) = self.added.iter().position(|n| n == name) {
            return Ok((at + i) as u32);
        }
        let number = u32::try_from(at + self.added.len()).map_err(|_| StoreError::Malformed {
            what: "parent table",
            reason: "more than 2^32 parents".into(),
        })?;
        table.insert(number, name)?;
        self.added.push(name.to_owned());
        Ok(number)
    }
}
