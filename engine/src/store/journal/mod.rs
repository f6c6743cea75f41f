//! Records with a lifecycle (alarms, commands): each kept by id as JSON, indexed by
//! its state, with a history row (audit record) per change. [`Change::save`] is
//! the only way to store a record, and it writes the record and its history row
//! in the same transaction: both or neither (ALARM-2 of `docs/alarms.md`,
//! CMD-C1 of `docs/commands.md`). Lookups from a key to a record id ([`Index`]: an
//! alarm's active key, a command's request id) change in the same transactions.
//!
//! The tables live in the engine's redb file, or in a PostgreSQL database
//! shared by several engines (docs/state.md, STATE-S4 to STATE-S6); the features see the same
//! interface either way.

mod redb;
mod schema;

use std::borrow::Borrow;
use std::fmt;
use std::marker::PhantomData;

use ::redb::Key;
use serde::Serialize;
use serde::de::DeserializeOwned;

use self::redb::{RedbChange, RedbJournal};
pub(in crate::store) use self::schema::key_bytes;
pub use self::schema::{Entry, Index, Tables};
use super::error::StoreError;
use super::postgres::{Op, OpAnswer, Postgres, Transaction};
use super::state_database::StateDatabase;

fn text_of<T: Serialize>(what: &'static str, value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|source| StoreError::Encode { what, source })
}

fn from_text<T: DeserializeOwned>(what: &'static str, text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|source| StoreError::Decode { what, source })
}

fn unexpected(reply: &OpAnswer) -> StoreError {
    StoreError::Malformed {
        what: "PostgreSQL answer",
        reason: format!("unexpected {reply:?}"),
    }
}

/// One record kind (`R`) and its history rows (`H`) in the store.
pub struct Journal<R, H> {
    place: Place<R, H>,
}

enum Place<R, H> {
    Redb(RedbJournal<R, H>),
    Postgres { db: Postgres, kind: &'static str },
}

impl<R, H> fmt::Debug for Journal<R, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.place {
            Place::Redb(journal) => journal.fmt(f),
            Place::Postgres { kind, .. } => {
                f.debug_struct("PgJournal").field("kind", kind).finish()
            }
        }
    }
}

impl<R: Entry, H: Serialize + DeserializeOwned> Journal<R, H> {
    pub fn new(db: &StateDatabase, tables: Tables) -> Self {
        let place = match db {
            StateDatabase::Redb(store) => Place::Redb(RedbJournal::new(store, tables)),
            StateDatabase::Postgres(postgres) => Place::Postgres {
                db: postgres.clone(),
                kind: tables.records,
            },
        };
        Self { place }
    }

    /// Runs `change` in one transaction: all of it is kept when it returns
    /// `Ok`, none of it otherwise.
    ///
    /// # Errors
    /// The error of `change`, or a database failure (nothing kept).
    pub fn change<T, E: From<StoreError>>(
        &self,
        change: impl FnOnce(&mut Change<'_, R, H>) -> Result<T, E>,
    ) -> Result<T, E> {
        match &self.place {
            Place::Redb(journal) => journal.change(|tables| {
                change(&mut Change {
                    open: Open::Redb(Box::new(tables)),
                })
            }),
            Place::Postgres { db, kind } => {
                let tx = db.begin()?;
                let value = change(&mut Change {
                    open: Open::Postgres {
                        tx: &tx,
                        kind,
                        kinds: PhantomData,
                    },
                })?;
                tx.commit()?;
                Ok(value)
            }
        }
    }

    /// Record `id`.
    ///
    /// # Errors
    /// A database failure, or a record that does not decode.
    pub fn get(&self, id: u64) -> Result<Option<R>, StoreError> {
        match &self.place {
            Place::Redb(journal) => journal.get(id),
            Place::Postgres { db, kind } => db
                .record(kind, id)?
                .map(|text| from_text(R::KIND, &text))
                .transpose(),
        }
    }

    /// The history rows of `id`, oldest first.
    ///
    /// # Errors
    /// A database failure, or a row that does not decode.
    pub fn history(&self, id: u64) -> Result<Vec<H>, StoreError> {
        match &self.place {
            Place::Redb(journal) => journal.history(id),
            Place::Postgres { db, kind } => db
                .history(kind, id)?
                .iter()
                .map(|text| from_text("history row", text))
                .collect(),
        }
    }

    /// The ids of the records in `state`, oldest first.
    ///
    /// # Errors
    /// A database failure.
    pub fn ids_in(&self, state: &str) -> Result<Vec<u64>, StoreError> {
        match &self.place {
            Place::Redb(journal) => journal.ids_in(state),
            Place::Postgres { db, kind } => db.ids_in(kind, state),
        }
    }

    /// The records with these ids, in that order (ids without one are skipped).
    ///
    /// # Errors
    /// A database failure, or a record that does not decode.
    pub fn load(&self, ids: impl IntoIterator<Item = u64>) -> Result<Vec<R>, StoreError> {
        match &self.place {
            Place::Redb(journal) => journal.load(ids),
            Place::Postgres { db, kind } => {
                let ids: Vec<u64> = ids.into_iter().collect();
                let mut found: std::collections::HashMap<u64, String> =
                    db.records(kind, ids.clone())?.into_iter().collect();
                ids.iter()
                    .filter_map(|id| found.remove(id))
                    .map(|text| from_text(R::KIND, &text))
                    .collect()
            }
        }
    }

    /// Hands every record to `visit`, newest first, while it returns `true`.
    ///
    /// # Errors
    /// A database failure, or a record that does not decode.
    pub fn newest_first(&self, mut visit: impl FnMut(R) -> bool) -> Result<(), StoreError> {
        const PAGE: i64 = 500;
        match &self.place {
            Place::Redb(journal) => journal.newest_first(visit),
            Place::Postgres { db, kind } => {
                let mut below = u64::MAX >> 1;
                loop {
                    let page = db.newest(kind, below, PAGE)?;
                    let full = page.len() as i64 == PAGE;
                    for (id, text) in page {
                        below = id;
                        if !visit(from_text(R::KIND, &text)?) {
                            return Ok(());
                        }
                    }
                    if !full {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Every id `index` points to, in key order.
    ///
    /// # Errors
    /// A database failure.
    pub fn linked<K: Key + 'static>(&self, index: &Index<K>) -> Result<Vec<u64>, StoreError> {
        match &self.place {
            Place::Redb(journal) => journal.linked(index),
            Place::Postgres { db, .. } => db.linked(index.name()),
        }
    }

    /// The id `key` points to in `index`.
    ///
    /// # Errors
    /// A database failure.
    pub fn find<'k, K: Key + 'static>(
        &self,
        index: &Index<K>,
        key: impl Borrow<K::SelfType<'k>>,
    ) -> Result<Option<u64>, StoreError> {
        match &self.place {
            Place::Redb(journal) => journal.find(index, key),
            Place::Postgres { db, .. } => db.find(index.name(), key_bytes::<K>(key)),
        }
    }
}

/// The tables of one transaction.
pub struct Change<'t, R, H> {
    open: Open<'t, R, H>,
}

enum Open<'t, R, H> {
    Redb(Box<RedbChange<'t, R, H>>),
    Postgres {
        tx: &'t Transaction,
        kind: &'static str,
        kinds: PhantomData<fn() -> (R, H)>,
    },
}

/// Where a value kept with a change goes ([`super::Keyed`]).
pub(super) enum Target<'c> {
    Redb(&'c ::redb::WriteTransaction),
    Postgres(&'c Transaction),
}

impl<'t, R: Entry, H: Serialize + DeserializeOwned> Change<'t, R, H> {
    pub(super) fn target(&self) -> Target<'_> {
        match &self.open {
            Open::Redb(tables) => Target::Redb(tables.tx()),
            Open::Postgres { tx, .. } => Target::Postgres(tx),
        }
    }

    /// Record `id`, as this transaction sees it.
    ///
    /// # Errors
    /// A database failure, or a record that does not decode.
    pub fn get(&self, id: u64) -> Result<Option<R>, StoreError> {
        match &self.open {
            Open::Redb(tables) => tables.get(id),
            Open::Postgres { tx, kind, .. } => match tx.run(Op::Get { kind, id })? {
                OpAnswer::Body(body) => body.map(|text| from_text(R::KIND, &text)).transpose(),
                other => Err(unexpected(&other)),
            },
        }
    }

    /// The id a new record gets: one past the highest given.
    ///
    /// # Errors
    /// A database failure.
    pub fn next_id(&self) -> Result<u64, StoreError> {
        match &self.open {
            Open::Redb(tables) => tables.next_id(),
            Open::Postgres { tx, kind, .. } => match tx.run(Op::NextId { kind })? {
                OpAnswer::Id(Some(id)) => Ok(id),
                other => Err(unexpected(&other)),
            },
        }
    }

    /// The ids of the records in `state`, oldest first. On PostgreSQL this is
    /// what was committed when it was asked, nothing locked: take each with
    /// [`Change::take`] before changing it.
    ///
    /// # Errors
    /// A database failure.
    pub fn ids_in(&self, state: &str) -> Result<Vec<u64>, StoreError> {
        match &self.open {
            Open::Redb(tables) => tables.ids_in(state),
            Open::Postgres { tx, kind, .. } => {
                let state = state.to_owned();
                match tx.run(Op::IdsIn { kind, state })? {
                    OpAnswer::Ids(ids) => Ok(ids),
                    other => Err(unexpected(&other)),
                }
            }
        }
    }

    /// Record `id` if it is still in `state` and no other transaction holds it
    /// (on PostgreSQL it is then held by this one until it ends, STATE-S5): how
    /// claims and sweeps take what a scan found, so engines scanning at once
    /// each take different records and never wait for each other.
    ///
    /// # Errors
    /// A database failure, or a record that does not decode.
    pub fn take(&self, id: u64, state: &str) -> Result<Option<R>, StoreError> {
        match &self.open {
            Open::Redb(tables) => Ok(tables.get(id)?.filter(|r| r.state() == state)),
            Open::Postgres { tx, kind, .. } => {
                let state = state.to_owned();
                match tx.run(Op::Take { kind, id, state })? {
                    OpAnswer::Body(body) => body.map(|text| from_text(R::KIND, &text)).transpose(),
                    other => Err(unexpected(&other)),
                }
            }
        }
    }

    /// Stores `record` (moving it in the state index from `before`, `None` for a
    /// new record) and appends its history row, which `row` makes from the row's
    /// sequence number. Returns the row.
    ///
    /// # Errors
    /// A database failure, or a value that cannot be encoded.
    pub fn save(
        &mut self,
        record: &R,
        before: Option<&str>,
        row: impl FnOnce(u32) -> H,
    ) -> Result<H, StoreError> {
        match &mut self.open {
            Open::Redb(tables) => tables.save(record, before, row),
            Open::Postgres { tx, kind, .. } => {
                let id = record.id();
                let seq = match tx.run(Op::NextSeq { kind, id })? {
                    OpAnswer::Seq(seq) => seq,
                    other => return Err(unexpected(&other)),
                };
                let row = row(seq);
                tx.run(Op::Save {
                    kind,
                    id,
                    state: record.state(),
                    body: text_of(R::KIND, record)?,
                    seq,
                    row: text_of("history row", &row)?,
                })?;
                Ok(row)
            }
        }
    }

    /// The id `key` points to in `index`.
    ///
    /// # Errors
    /// A database failure.
    pub fn find<'k, K: Key + 'static>(
        &self,
        index: &Index<K>,
        key: impl Borrow<K::SelfType<'k>>,
    ) -> Result<Option<u64>, StoreError> {
        match &self.open {
            Open::Redb(tables) => tables.find(index, key),
            Open::Postgres { tx, .. } => id_reply(tx.run(Op::Find {
                name: index.name(),
                key: key_bytes::<K>(key),
            })?),
        }
    }

    /// Points `key` at `id`; returns what it pointed at before.
    ///
    /// # Errors
    /// A database failure.
    pub fn link<'k, K: Key + 'static>(
        &mut self,
        index: &Index<K>,
        key: impl Borrow<K::SelfType<'k>>,
        id: u64,
    ) -> Result<Option<u64>, StoreError> {
        match &mut self.open {
            Open::Redb(tables) => tables.link(index, key, id),
            Open::Postgres { tx, .. } => id_reply(tx.run(Op::Link {
                name: index.name(),
                key: key_bytes::<K>(key),
                id,
            })?),
        }
    }

    /// Removes `key`; returns what it pointed at.
    ///
    /// # Errors
    /// A database failure.
    pub fn unlink<'k, K: Key + 'static>(
        &mut self,
        index: &Index<K>,
        key: impl Borrow<K::SelfType<'k>>,
    ) -> Result<Option<u64>, StoreError> {
        match &mut self.open {
            Open::Redb(tables) => tables.unlink(index, key),
            Open::Postgres { tx, .. } => id_reply(tx.run(Op::Unlink {
                name: index.name(),
                key: key_bytes::<K>(key),
            })?),
        }
    }
}

fn id_reply(reply: OpAnswer) -> Result<Option<u64>, StoreError> {
    match reply {
        OpAnswer::Id(id) => Ok(id),
        other => Err(unexpected(&other)),
    }
}
