//! Records with a lifecycle (alarms, commands), their history rows, the
//! indexes onto them and values by key (write intents and records), on
//! PostgreSQL: the tables behind [`crate::store::Journal`] and
//! [`crate::store::Keyed`] (docs/state.md, STATE-S4 to STATE-S6).
//!
//! A journal's change is one PostgreSQL transaction on one pooled connection
//! ([`Transaction`]); the change's calls are sent to it one by one and
//! answered in order. Every record it reads is locked (`FOR UPDATE`), the
//! records it takes from a scan by state are locked with `SKIP LOCKED` (two
//! engines claiming at once take different commands, and neither waits for the
//! other), and every index key it looks up is locked first (two engines raising
//! one alarm key are served one after the other), so its guards see the rows
//! as they are and nobody else changes them before the commit (STATE-S5).

use tokio::sync::mpsc;

use super::Postgres;
use crate::store::StoreError;
use crate::store::error::Shared;
use crate::store::error::pg;

/// A step of a change.
#[derive(Debug)]
pub(crate) enum Op {
    /// The record, locked.
    Get { kind: &'static str, id: u64 },
    /// A fresh id of `kind`.
    NextId { kind: &'static str },
    /// The ids in `state`, ascending, as committed (nothing locked).
    IdsIn { kind: &'static str, state: String },
    /// The record if it is in `state` and no other transaction holds it; locked.
    Take {
        kind: &'static str,
        id: u64,
        state: String,
    },
    /// The next history sequence number of the record.
    NextSeq { kind: &'static str, id: u64 },
    /// Stores the record and appends its history row.
    Save {
        kind: &'static str,
        id: u64,
        state: &'static str,
        body: String,
        seq: u32,
        row: String,
    },
    /// What `key` points to in index `name`, the key locked first.
    Find { name: &'static str, key: Vec<u8> },
    /// Points `key` at `id`; answers what it pointed at.
    Link {
        name: &'static str,
        key: Vec<u8>,
        id: u64,
    },
    /// Removes `key`; answers what it pointed at.
    Unlink { name: &'static str, key: Vec<u8> },
    /// Stores a value by key.
    Put {
        name: &'static str,
        key: Vec<u8>,
        body: String,
    },
    /// Removes a value by key.
    Remove { name: &'static str, key: Vec<u8> },
}

/// The answer to an [`Op`].
#[derive(Debug)]
pub(crate) enum OpAnswer {
    Body(Option<String>),
    Id(Option<u64>),
    Ids(Vec<u64>),
    Seq(u32),
    Done,
}

enum Request {
    Op(Op),
    Commit,
}

/// An open transaction, run by a task on the store's runtime; rolled back when
/// dropped without [`Transaction::commit`].
#[derive(Debug)]
pub(crate) struct Transaction {
    requests: mpsc::UnboundedSender<Request>,
    replies: std::sync::mpsc::Receiver<Result<OpAnswer, StoreError>>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::Op(op) => op.fmt(f),
            Request::Commit => f.write_str("Commit"),
        }
    }
}

fn abandoned() -> StoreError {
    StoreError::Postgres(Shared::message("the transaction was abandoned"))
}

impl Transaction {
    fn ask(&self, request: Request) -> Result<OpAnswer, StoreError> {
        self.requests.send(request).map_err(|_| abandoned())?;
        self.replies.recv().map_err(|_| abandoned())?
    }

    /// Runs `op` in the transaction.
    ///
    /// # Errors
    /// A database failure; the transaction can then only roll back.
    pub(crate) fn run(&self, op: Op) -> Result<OpAnswer, StoreError> {
        self.ask(Request::Op(op))
    }

    /// Commits the transaction.
    ///
    /// # Errors
    /// A database failure, or an earlier step that failed: nothing is kept then.
    pub(crate) fn commit(self) -> Result<(), StoreError> {
        self.ask(Request::Commit).map(drop)
    }
}

impl Postgres {
    /// Opens a transaction on a connection of the pool.
    ///
    /// # Errors
    /// No connection could be had, or `BEGIN` failed.
    pub(crate) fn begin(&self) -> Result<Transaction, StoreError> {
        let (requests, mut incoming) = mpsc::unbounded_channel();
        let (answer, replies) = std::sync::mpsc::channel();
        self.spawn(move |client| async move {
            if let Err(error) = client.batch_execute("BEGIN").await {
                let _ = answer.send(Err(pg(error)));
                return;
            }
            let _ = answer.send(Ok(OpAnswer::Done));
            let mut failed = false;
            while let Some(request) = incoming.recv().await {
                let reply = match request {
                    Request::Op(op) => execute(&client, op).await,
                    Request::Commit if failed => Err(StoreError::Postgres(Shared::message(
                        "a step of the transaction failed before its commit",
                    ))),
                    Request::Commit => match client.batch_execute("COMMIT").await {
                        Ok(()) => {
                            let _ = answer.send(Ok(OpAnswer::Done));
                            return;
                        }
                        Err(error) => Err(pg(error)),
                    },
                };
                failed |= reply.is_err();
                let _ = answer.send(reply);
            }
            let _ = client.batch_execute("ROLLBACK").await;
        })?;
        match replies.recv() {
            Ok(Ok(_)) => Ok(Transaction { requests, replies }),
            Ok(Err(error)) => Err(error),
            Err(_) => Err(abandoned()),
        }
    }
}

fn id_of(value: i64) -> u64 {
    u64::try_from(value).unwrap_or_default()
}

fn db(id: u64) -> i64 {
    i64::try_from(id).unwrap_or(i64::MAX)
}

const GET: &str = "SELECT body::text FROM sluice_record WHERE kind = $1 AND id = $2 FOR UPDATE";
const NEXT_ID: &str = "INSERT INTO sluice_record_id AS r (kind, last) VALUES ($1, 1)
    ON CONFLICT (kind) DO UPDATE SET last = r.last + 1 RETURNING last";
const IDS_IN: &str = "SELECT id FROM sluice_record WHERE kind = $1 AND state = $2 ORDER BY id";
const TAKE: &str = "SELECT body::text FROM sluice_record WHERE kind = $1 AND id = $2 AND state = $3
    FOR UPDATE SKIP LOCKED";
const NEXT_SEQ: &str = "SELECT coalesce(max(seq) + 1, 0) FROM sluice_record_history
    WHERE kind = $1 AND id = $2";
const SAVE: &str =
    "INSERT INTO sluice_record (kind, id, state, body) VALUES ($1, $2, $3, $4::text::jsonb)
    ON CONFLICT (kind, id) DO UPDATE SET state = excluded.state, body = excluded.body";
const SAVE_ROW: &str = "INSERT INTO sluice_record_history (kind, id, seq, body)
    VALUES ($1, $2, $3, $4::text::jsonb)";
const LOCK_KEY: &str =
    "SELECT pg_advisory_xact_lock(hashtextextended($1 || ':' || encode($2, 'hex'), 0))";
const FIND: &str = "SELECT id FROM sluice_link WHERE name = $1 AND key = $2";
const LINK: &str = "WITH before AS (SELECT id FROM sluice_link WHERE name = $1 AND key = $2),
    upsert AS (INSERT INTO sluice_link (name, key, id) VALUES ($1, $2, $3)
        ON CONFLICT (name, key) DO UPDATE SET id = excluded.id)
    SELECT id FROM before";
const UNLINK: &str = "DELETE FROM sluice_link WHERE name = $1 AND key = $2 RETURNING id";
const PUT: &str = "INSERT INTO sluice_value (name, key, body) VALUES ($1, $2, $3::text::jsonb)
    ON CONFLICT (name, key) DO UPDATE SET body = excluded.body";
const REMOVE: &str = "DELETE FROM sluice_value WHERE name = $1 AND key = $2";

async fn execute(client: &deadpool_postgres::Object, op: Op) -> Result<OpAnswer, StoreError> {
    let query = async |sql: &str, params: &[&(dyn tokio_postgres::types::ToSql + Sync)]| {
        let statement = client.prepare_cached(sql).await.map_err(pg)?;
        client.query(&statement, params).await.map_err(pg)
    };
    Ok(match op {
        Op::Get { kind, id } => OpAnswer::Body(
            query(GET, &[&kind, &db(id)])
                .await?
                .first()
                .map(|row| row.get(0)),
        ),
        Op::NextId { kind } => OpAnswer::Id(
            query(NEXT_ID, &[&kind])
                .await?
                .first()
                .map(|row| id_of(row.get(0))),
        ),
        Op::IdsIn { kind, state } => OpAnswer::Ids(
            query(IDS_IN, &[&kind, &state])
                .await?
                .iter()
                .map(|row| id_of(row.get(0)))
                .collect(),
        ),
        Op::Take { kind, id, state } => OpAnswer::Body(
            query(TAKE, &[&kind, &db(id), &state])
                .await?
                .first()
                .map(|row| row.get(0)),
        ),
        Op::NextSeq { kind, id } => {
            let rows = query(NEXT_SEQ, &[&kind, &db(id)]).await?;
            let seq: i32 = rows.first().map_or(0, |row| row.get(0));
            OpAnswer::Seq(u32::try_from(seq).unwrap_or_default())
        }
        Op::Save {
            kind,
            id,
            state,
            body,
            seq,
            row,
        } => {
            query(SAVE, &[&kind, &db(id), &state, &body]).await?;
            let seq = i32::try_from(seq).unwrap_or(i32::MAX);
            query(SAVE_ROW, &[&kind, &db(id), &seq, &row]).await?;
            OpAnswer::Done
        }
        Op::Find { name, key } => {
            query(LOCK_KEY, &[&name, &key]).await?;
            OpAnswer::Id(
                query(FIND, &[&name, &key])
                    .await?
                    .first()
                    .map(|row| id_of(row.get(0))),
            )
        }
        Op::Link { name, key, id } => OpAnswer::Id(
            query(LINK, &[&name, &key, &db(id)])
                .await?
                .first()
                .map(|row| id_of(row.get(0))),
        ),
        Op::Unlink { name, key } => OpAnswer::Id(
            query(UNLINK, &[&name, &key])
                .await?
                .first()
                .map(|row| id_of(row.get(0))),
        ),
        Op::Put { name, key, body } => {
            query(PUT, &[&name, &key, &body]).await?;
            OpAnswer::Done
        }
        Op::Remove { name, key } => {
            query(REMOVE, &[&name, &key]).await?;
            OpAnswer::Done
        }
    })
}

/// Reads outside a change: plain snapshots, nothing locked.
impl Postgres {
    /// Record `id` of `kind`, as JSON.
    pub(crate) fn record(&self, kind: &'static str, id: u64) -> Result<Option<String>, StoreError> {
        self.texts(
            "SELECT body::text FROM sluice_record WHERE kind = $1 AND id = $2",
            kind,
            db(id),
        )
        .map(|mut rows| rows.pop())
    }

    /// The records of `kind` with these ids, as (id, JSON), in one query.
    pub(crate) fn records(
        &self,
        kind: &'static str,
        ids: Vec<u64>,
    ) -> Result<Vec<(u64, String)>, StoreError> {
        let ids: Vec<i64> = ids.into_iter().map(db).collect();
        self.run(move |client| async move {
            let statement = client
                .prepare_cached(
                    "SELECT id, body::text FROM sluice_record WHERE kind = $1 AND id = ANY($2)",
                )
                .await
                .map_err(pg)?;
            let rows = client.query(&statement, &[&kind, &ids]).await.map_err(pg)?;
            Ok(rows
                .iter()
                .map(|row| (id_of(row.get(0)), row.get(1)))
                .collect())
        })
    }

    /// The history rows of record `id`, oldest first, as JSON.
    pub(crate) fn history(&self, kind: &'static str, id: u64) -> Result<Vec<String>, StoreError> {
        self.texts(
            "SELECT body::text FROM sluice_record_history WHERE kind = $1 AND id = $2 ORDER BY seq",
            kind,
            db(id),
        )
    }

    /// The ids of `kind` in `state`, ascending.
    pub(crate) fn ids_in(&self, kind: &'static str, state: &str) -> Result<Vec<u64>, StoreError> {
        let state = state.to_owned();
        self.run(move |client| async move {
            let statement = client
                .prepare_cached(
                    "SELECT id FROM sluice_record WHERE kind = $1 AND state = $2 ORDER BY id",
                )
                .await
                .map_err(pg)?;
            let rows = client
                .query(&statement, &[&kind, &state])
                .await
                .map_err(pg)?;
            Ok(rows.iter().map(|row| id_of(row.get(0))).collect())
        })
    }

    /// Up to `limit` records of `kind` with ids below `below`, newest first, as
    /// (id, JSON).
    pub(crate) fn newest(
        &self,
        kind: &'static str,
        below: u64,
        limit: i64,
    ) -> Result<Vec<(u64, String)>, StoreError> {
        self.run(move |client| async move {
            let statement = client
                .prepare_cached(
                    "SELECT id, body::text FROM sluice_record WHERE kind = $1 AND id < $2
                     ORDER BY id DESC LIMIT $3",
                )
                .await
                .map_err(pg)?;
            let rows = client
                .query(&statement, &[&kind, &db(below), &limit])
                .await
                .map_err(pg)?;
            Ok(rows
                .iter()
                .map(|row| (id_of(row.get(0)), row.get(1)))
                .collect())
        })
    }

    /// Every id index `name` points to, in key order.
    pub(crate) fn linked(&self, name: &'static str) -> Result<Vec<u64>, StoreError> {
        self.run(move |client| async move {
            let statement = client
                .prepare_cached("SELECT id FROM sluice_link WHERE name = $1 ORDER BY key")
                .await
                .map_err(pg)?;
            let rows = client.query(&statement, &[&name]).await.map_err(pg)?;
            Ok(rows.iter().map(|row| id_of(row.get(0))).collect())
        })
    }

    /// What `key` points to in index `name`.
    pub(crate) fn find(&self, name: &'static str, key: Vec<u8>) -> Result<Option<u64>, StoreError> {
        self.run(move |client| async move {
            let statement = client.prepare_cached(FIND).await.map_err(pg)?;
            let rows = client.query(&statement, &[&name, &key]).await.map_err(pg)?;
            Ok(rows.first().map(|row| id_of(row.get(0))))
        })
    }

    /// The value under `key` in `name`, as JSON.
    pub(crate) fn value(
        &self,
        name: &'static str,
        key: Vec<u8>,
    ) -> Result<Option<String>, StoreError> {
        self.run(move |client| async move {
            let statement = client
                .prepare_cached("SELECT body::text FROM sluice_value WHERE name = $1 AND key = $2")
                .await
                .map_err(pg)?;
            let rows = client.query(&statement, &[&name, &key]).await.map_err(pg)?;
            Ok(rows.first().map(|row| row.get(0)))
        })
    }

    /// Stores `body` under `key` in `name`, committed.
    pub(crate) fn put_value(
        &self,
        name: &'static str,
        key: Vec<u8>,
        body: String,
    ) -> Result<(), StoreError> {
        self.run(move |client| async move {
            let statement = client.prepare_cached(PUT).await.map_err(pg)?;
            client
                .execute(&statement, &[&name, &key, &body])
                .await
                .map_err(pg)?;
            Ok(())
        })
    }

    fn texts(
        &self,
        sql: &'static str,
        kind: &'static str,
        id: i64,
    ) -> Result<Vec<String>, StoreError> {
        self.run(move |client| async move {
            let statement = client.prepare_cached(sql).await.map_err(pg)?;
            let rows = client.query(&statement, &[&kind, &id]).await.map_err(pg)?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
        })
    }
}
