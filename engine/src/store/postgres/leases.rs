//! The lease table on PostgreSQL: heartbeats batched through `unnest` in one
//! transaction, and the seed's claim (`FOR UPDATE SKIP LOCKED`, then an update
//! that re-checks each row) so that engines sharing the table never expire a
//! row twice (docs/state.md, STATE-S2, STATE-S3).

use tokio_postgres::Row;

use super::Postgres;
use crate::model::{
    EntityKey, EntityState, EntityType, Renewal, StateFilter, StateRow, Transition,
};
use crate::store::StoreError;
use crate::store::error::pg;
use crate::store::leases::{
    Claimed, StateStore, coalesced, filed_at, renewed_state, source_code, source_of, state_code,
    state_of,
};

/// The lease table in a PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PgStateStore {
    db: Postgres,
}

impl PgStateStore {
    pub fn new(db: &Postgres) -> Self {
        Self { db: db.clone() }
    }
}

/// The columns [`state_row`] reads, in its order.
macro_rules! columns {
    () => {
        "entity_type_flag, entity_id, parent_entity_id, entity_state_flag, last_state_flag, \
         last_heartbeat_time, expire_time, lease_version, timeout_seconds, timeout_source_flag, \
         entity_state_ext::text, tenant_id, expired_state_flag"
    };
}

const LOCK_ROWS: &str = "SELECT tenant_id, entity_type_flag, entity_id, entity_state_flag, \
    last_state_flag, expire_time, due_time, lease_version, expired_state_flag
    FROM sluice_entity_state
    WHERE deleted = 0
      AND (tenant_id, entity_type_flag, entity_id) IN
        (SELECT * FROM unnest($1::bigint[], $2::smallint[], $3::text[]))
    ORDER BY tenant_id, entity_type_flag, entity_id COLLATE \"C\"
    FOR UPDATE";

const UPSERT: &str = "INSERT INTO sluice_entity_state (entity_type_flag, entity_id, \
    parent_entity_id, entity_state_flag, last_state_flag, last_heartbeat_time, expire_time, \
    due_time, lease_version, timeout_seconds, timeout_source_flag, entity_state_ext, tenant_id, \
    expired_state_flag)
    SELECT t, id, parent, state, last, beat, expires, due, version, timeout, source, ext::jsonb, \
        tenant, expired
    FROM unnest($1::smallint[], $2::text[], $3::text[], $4::smallint[], $5::smallint[], \
        $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], $10::int[], $11::smallint[], \
        $12::text[], $13::bigint[], $14::smallint[])
        AS u(t, id, parent, state, last, beat, expires, due, version, timeout, source, ext, tenant, \
            expired)
    ON CONFLICT (tenant_id, entity_type_flag, entity_id) WHERE deleted = 0 DO UPDATE SET
        parent_entity_id = EXCLUDED.parent_entity_id,
        entity_state_flag = EXCLUDED.entity_state_flag,
        last_state_flag = EXCLUDED.last_state_flag,
        last_heartbeat_time = EXCLUDED.last_heartbeat_time,
        expire_time = EXCLUDED.expire_time,
        due_time = EXCLUDED.due_time,
        lease_version = EXCLUDED.lease_version,
        timeout_seconds = EXCLUDED.timeout_seconds,
        timeout_source_flag = EXCLUDED.timeout_source_flag,
        entity_state_ext = EXCLUDED.entity_state_ext,
        expired_state_flag = EXCLUDED.expired_state_flag,
        operate_time = now()";

/// The seed's claim: rows due by $1, oldest first, skipping rows another
/// engine holds; a row renewed since it was filed is filed again, the rest are
/// set offline (or unknown: `expired_state_flag`) with a renewed lease in that
/// state. `picked` says how many were taken.
const CLAIM: &str = concat!(
    "WITH picked AS (
        SELECT id, expire_time AS ran_out FROM sluice_entity_state
        WHERE deleted = 0 AND due_time IS NOT NULL AND due_time <= $1
        ORDER BY due_time
        LIMIT $2
        FOR UPDATE SKIP LOCKED
    ), refiled AS (
        UPDATE sluice_entity_state s
        SET due_time = CASE WHEN s.entity_state_flag IN (0, 2, 3) THEN s.expire_time ELSE NULL END
        FROM picked p
        WHERE s.id = p.id AND (s.expire_time > $1 OR s.entity_state_flag NOT IN (0, 2, 3))
        RETURNING s.id
    ), expired AS (
        UPDATE sluice_entity_state s
        SET entity_state_flag = s.expired_state_flag,
            last_state_flag = s.entity_state_flag,
            lease_version = s.lease_version + 1,
            expire_time = $1 + s.timeout_seconds::bigint * 1000,
            due_time = NULL,
            operate_time = now()
        FROM picked p
        WHERE s.id = p.id AND s.expire_time <= $1 AND s.entity_state_flag IN (0, 2, 3)
        RETURNING ",
    columns!(),
    ", p.ran_out
    )
    SELECT (SELECT count(*) FROM picked) AS picked, e.*
    FROM (SELECT 1) AS one LEFT JOIN expired e ON true"
);

/// An operator's change: the state before as readers saw it goes to
/// `last_state_flag`; the row is filed or unfiled as its new state needs (STATE-2).
const SET_STATE: &str = concat!(
    "UPDATE sluice_entity_state
    SET last_state_flag = CASE
            WHEN entity_state_flag IN (0, 2, 3) AND expire_time <= $4 THEN expired_state_flag
            ELSE entity_state_flag END,
        entity_state_flag = $3::smallint,
        lease_version = lease_version + 1,
        due_time = CASE
            WHEN $3::smallint NOT IN (0, 2, 3) THEN NULL
            WHEN due_time IS NULL OR due_time > expire_time THEN expire_time
            ELSE due_time END,
        operate_time = now()
    WHERE deleted = 0 AND tenant_id = $5 AND entity_type_flag = $1 AND entity_id = $2
    RETURNING ",
    columns!()
);

const GET: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM sluice_entity_state
    WHERE deleted = 0 AND tenant_id = $3 AND entity_type_flag = $1 AND entity_id = $2"
);

const LIST: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM sluice_entity_state
    WHERE deleted = 0
      AND ($1::smallint IS NULL OR entity_type_flag = $1)
      AND ($2::text IS NULL OR parent_entity_id = $2)
      AND ($3::bigint IS NULL OR tenant_id = $3)
    ORDER BY tenant_id, entity_type_flag, entity_id COLLATE \"C\""
);

fn bad(what: &'static str) -> StoreError {
    StoreError::Malformed {
        what: "lease row",
        reason: format!("unknown {what} code"),
    }
}

fn entity_type_of(code: i16) -> Result<EntityType, StoreError> {
    [EntityType::Driver, EntityType::Device]
        .into_iter()
        .find(|t| i16::from(t.code()) == code)
        .ok_or_else(|| bad("entity type"))
}

fn state_from(code: i16) -> Result<EntityState, StoreError> {
    u8::try_from(code)
        .ok()
        .and_then(state_of)
        .ok_or_else(|| bad("state"))
}

/// A row of the `columns!()` list, starting at column `at`.
fn state_row(row: &Row, at: usize) -> Result<StateRow, StoreError> {
    let ext: String = row.try_get(at + 10).map_err(pg)?;
    Ok(StateRow {
        entity_type: entity_type_of(row.try_get(at).map_err(pg)?)?,
        entity_id: row.try_get(at + 1).map_err(pg)?,
        parent_id: row.try_get(at + 2).map_err(pg)?,
        state: state_from(row.try_get(at + 3).map_err(pg)?)?,
        last_state: state_from(row.try_get(at + 4).map_err(pg)?)?,
        last_heartbeat: row.try_get(at + 5).map_err(pg)?,
        expire_time: row.try_get(at + 6).map_err(pg)?,
        lease_version: row.try_get::<_, i64>(at + 7).map_err(pg)? as u64,
        timeout_seconds: row.try_get::<_, i32>(at + 8).map_err(pg)?.max(0) as u64,
        timeout_source: u8::try_from(row.try_get::<_, i16>(at + 9).map_err(pg)?)
            .ok()
            .and_then(source_of)
            .ok_or_else(|| bad("timeout source"))?,
        extension: serde_json::from_str(&ext).map_err(|source| StoreError::Decode {
            what: "lease details",
            source,
        })?,
        tenant_id: u32::try_from(row.try_get::<_, i64>(at + 11).map_err(pg)?).unwrap_or(0),
        expired_state: state_from(row.try_get(at + 12).map_err(pg)?)?,
    })
}

/// What a renewal needs of a stored row.
struct Old {
    tenant_id: i64,
    entity_type: i16,
    entity_id: String,
    state: EntityState,
    last_state: EntityState,
    expire_time: i64,
    due_time: Option<i64>,
    lease_version: i64,
    expired_state: EntityState,
}

/// The columns of one upsert, one vector a column.
#[derive(Default)]
struct Upsert {
    types: Vec<i16>,
    ids: Vec<String>,
    parents: Vec<String>,
    states: Vec<i16>,
    lasts: Vec<i16>,
    beats: Vec<i64>,
    expires: Vec<i64>,
    dues: Vec<Option<i64>>,
    versions: Vec<i64>,
    timeouts: Vec<i32>,
    sources: Vec<i16>,
    exts: Vec<String>,
    tenants: Vec<i64>,
    expired: Vec<i16>,
}

impl StateStore for PgStateStore {
    fn renew(&self, renewals: &[Renewal], now_ms: i64) -> Result<Vec<Transition>, StoreError> {
        let renewals: Vec<Renewal> = coalesced(renewals)
            .into_iter()
            .map(|(_, renewal)| renewal.clone())
            .collect();
        if renewals.is_empty() {
            return Ok(Vec::new());
        }
        self.db.run(move |mut client| async move {
            let tx = client.transaction().await.map_err(pg)?;
            let tenants: Vec<i64> = renewals.iter().map(|r| i64::from(r.tenant_id)).collect();
            let types: Vec<i16> = renewals
                .iter()
                .map(|r| i16::from(r.entity_type.code()))
                .collect();
            let ids: Vec<&str> = renewals.iter().map(|r| r.entity_id.as_str()).collect();
            let lock_rows = tx.prepare_cached(LOCK_ROWS).await.map_err(pg)?;
            // Both are in key order (bytewise, as `COLLATE "C"` orders): one pass.
            let mut stored = Vec::new();
            let locked = tx
                .query(&lock_rows, &[&tenants, &types, &ids])
                .await
                .map_err(pg)?;
            for row in locked {
                stored.push(Old {
                    tenant_id: row.try_get(0).map_err(pg)?,
                    entity_type: row.try_get(1).map_err(pg)?,
                    entity_id: row.try_get(2).map_err(pg)?,
                    state: state_from(row.try_get(3).map_err(pg)?)?,
                    last_state: state_from(row.try_get(4).map_err(pg)?)?,
                    expire_time: row.try_get(5).map_err(pg)?,
                    due_time: row.try_get(6).map_err(pg)?,
                    lease_version: row.try_get(7).map_err(pg)?,
                    expired_state: state_from(row.try_get(8).map_err(pg)?)?,
                });
            }
            let mut stored = stored.into_iter().peekable();
            let mut upsert = Upsert::default();
            let mut transitions = Vec::new();
            for renewal in &renewals {
                let t = i16::from(renewal.entity_type.code());
                let old = stored.next_if(|o| {
                    o.tenant_id == i64::from(renewal.tenant_id)
                        && o.entity_type == t
                        && o.entity_id == renewal.entity_id
                });
                let old = old.as_ref();
                let before = old.map_or(EntityState::Offline, |o| {
                    o.state.as_of(o.expire_time, now_ms, o.expired_state)
                });
                let (state, last_state) =
                    renewed_state(old.map(|o| (o.state, o.last_state)), renewal, before);
                let timeout = i32::try_from(renewal.timeout_seconds).unwrap_or(i32::MAX);
                let expires = now_ms.saturating_add(i64::from(timeout) * 1000);
                let due = filed_at(state, old.and_then(|o| o.due_time), expires);
                let version = old.map_or(0, |o| o.lease_version) + 1;
                let ext = serde_json::to_string(&renewal.extension).map_err(|source| {
                    StoreError::Encode {
                        what: "lease details",
                        source,
                    }
                })?;
                upsert.types.push(t);
                upsert.ids.push(renewal.entity_id.clone());
                upsert.parents.push(renewal.parent_id.clone());
                upsert.states.push(i16::from(state_code(state)));
                upsert.lasts.push(i16::from(state_code(last_state)));
                upsert.beats.push(now_ms);
                upsert.expires.push(expires);
                upsert.dues.push(due);
                upsert.versions.push(version);
                upsert.timeouts.push(timeout);
                upsert
                    .sources
                    .push(i16::from(source_code(renewal.timeout_source)));
                upsert.exts.push(ext);
                upsert.tenants.push(i64::from(renewal.tenant_id));
                upsert
                    .expired
                    .push(i16::from(state_code(renewal.expired_state)));
                if before != state {
                    transitions.push(Transition {
                        row: StateRow {
                            entity_type: renewal.entity_type,
                            entity_id: renewal.entity_id.clone(),
                            parent_id: renewal.parent_id.clone(),
                            state,
                            last_state,
                            last_heartbeat: now_ms,
                            expire_time: expires,
                            lease_version: version as u64,
                            timeout_seconds: timeout as u64,
                            timeout_source: renewal.timeout_source,
                            extension: renewal.extension.clone(),
                            tenant_id: renewal.tenant_id,
                            expired_state: renewal.expired_state,
                        },
                        from: before,
                    });
                }
            }
            let u = &upsert;
            let write = tx.prepare_cached(UPSERT).await.map_err(pg)?;
            tx.execute(
                &write,
                &[
                    &u.types,
                    &u.ids,
                    &u.parents,
                    &u.states,
                    &u.lasts,
                    &u.beats,
                    &u.expires,
                    &u.dues,
                    &u.versions,
                    &u.timeouts,
                    &u.sources,
                    &u.exts,
                    &u.tenants,
                    &u.expired,
                ],
            )
            .await
            .map_err(pg)?;
            tx.commit().await.map_err(pg)?;
            Ok(transitions)
        })
    }

    fn set_state(
        &self,
        entity: &EntityKey,
        state: EntityState,
        now_ms: i64,
    ) -> Result<Option<Transition>, StoreError> {
        let (tenant, t, id, flag) = (
            i64::from(entity.tenant_id),
            i16::from(entity.entity_type.code()),
            entity.entity_id.clone(),
            i16::from(state_code(state)),
        );
        self.db.run(move |client| async move {
            let statement = client.prepare_cached(SET_STATE).await.map_err(pg)?;
            let row = client
                .query_opt(&statement, &[&t, &id, &flag, &now_ms, &tenant])
                .await
                .map_err(pg)?;
            row.map(|row| {
                let row = state_row(&row, 0)?;
                Ok(Transition {
                    from: row.last_state,
                    row,
                })
            })
            .transpose()
        })
    }

    fn expire(&self, now_ms: i64, batch: usize) -> Result<Claimed, StoreError> {
        let limit = i64::try_from(batch).unwrap_or(i64::MAX);
        self.db.run(move |client| async move {
            let statement = client.prepare_cached(CLAIM).await.map_err(pg)?;
            let rows = client
                .query(&statement, &[&now_ms, &limit])
                .await
                .map_err(pg)?;
            let picked = rows.first().map_or(0, |r| r.get::<_, i64>(0));
            let mut expired = Vec::new();
            for row in &rows {
                if row.try_get::<_, Option<i16>>(1).map_err(pg)?.is_none() {
                    continue;
                }
                let ran_out: i64 = row.try_get(14).map_err(pg)?;
                let state = state_row(row, 1)?;
                expired.push((ran_out, state));
            }
            expired.sort_by(|a, b| {
                (a.0, a.1.tenant_id, &a.1.entity_id).cmp(&(b.0, b.1.tenant_id, &b.1.entity_id))
            });
            Ok(Claimed {
                transitions: expired
                    .into_iter()
                    .map(|(_, row)| Transition {
                        from: row.last_state,
                        row,
                    })
                    .collect(),
                more: picked >= limit,
            })
        })
    }

    fn get(&self, entity: &EntityKey) -> Result<Option<StateRow>, StoreError> {
        let (tenant, t, id) = (
            i64::from(entity.tenant_id),
            i16::from(entity.entity_type.code()),
            entity.entity_id.clone(),
        );
        self.db.run(move |client| async move {
            let statement = client.prepare_cached(GET).await.map_err(pg)?;
            let row = client
                .query_opt(&statement, &[&t, &id, &tenant])
                .await
                .map_err(pg)?;
            row.map(|row| state_row(&row, 0)).transpose()
        })
    }

    fn list(&self, filter: &StateFilter) -> Result<Vec<StateRow>, StoreError> {
        let t = filter.entity_type.map(|t| i16::from(t.code()));
        let parent = filter.parent.clone();
        let tenant = filter.tenant.map(i64::from);
        self.db.run(move |client| async move {
            let statement = client.prepare_cached(LIST).await.map_err(pg)?;
            let rows = client
                .query(&statement, &[&t, &parent, &tenant])
                .await
                .map_err(pg)?;
            rows.iter().map(|row| state_row(row, 0)).collect()
        })
    }
}
