//! The schema on PostgreSQL, in numbered migrations applied once each, in
//! order, under an advisory lock so that engines starting together do not race
//! (docs/state.md, STATE-S1).

use crate::store::StoreError;
use crate::store::error::pg;

/// The migrations, in order: migration `n` is `MIGRATIONS[n - 1]`.
const MIGRATIONS: &[&str] = &[
    // 1: the lease table, shaped as the seed's, with times in ms since the
    // epoch. `due_time` is the expiry the claim index files a live row under
    // (STATE-2): heartbeats that lengthen a lease leave it, and every other column
    // a heartbeat writes is in no index, so renewals stay HOT updates.
    "CREATE TABLE sluice_entity_state (
        id                  BIGSERIAL PRIMARY KEY,
        entity_type_flag    SMALLINT NOT NULL,
        entity_id           TEXT     NOT NULL,
        parent_entity_id    TEXT     NOT NULL DEFAULT '',
        entity_state_flag   SMALLINT NOT NULL DEFAULT 1,
        last_state_flag     SMALLINT NOT NULL DEFAULT 1,
        last_heartbeat_time BIGINT   NOT NULL,
        expire_time         BIGINT   NOT NULL,
        due_time            BIGINT,
        lease_version       BIGINT   NOT NULL DEFAULT 0,
        last_alarm_id       BIGINT   NOT NULL DEFAULT 0,
        timeout_seconds     INTEGER  NOT NULL DEFAULT 0,
        timeout_source_flag SMALLINT NOT NULL DEFAULT 0,
        entity_state_ext    JSONB    NOT NULL DEFAULT '{}',
        tenant_id           BIGINT   NOT NULL DEFAULT 0,
        create_time         TIMESTAMPTZ NOT NULL DEFAULT now(),
        operate_time        TIMESTAMPTZ NOT NULL DEFAULT now(),
        deleted             SMALLINT NOT NULL DEFAULT 0
    ) WITH (fillfactor = 70);
    CREATE UNIQUE INDEX idx_entity_state_active_unique
        ON sluice_entity_state (entity_type_flag, entity_id) WHERE deleted = 0;
    CREATE INDEX idx_entity_state_due
        ON sluice_entity_state (due_time) WHERE due_time IS NOT NULL AND deleted = 0;
    CREATE INDEX idx_entity_state_parent
        ON sluice_entity_state (tenant_id, entity_type_flag, parent_entity_id) WHERE deleted = 0;",
    // 2: records with a lifecycle (alarms, commands) as JSON by kind and id,
    // with their state beside them for the scans; their history rows (the audit
    // trail); the indexes onto them (an alarm's active key, a command's request
    // id) and values by key (write intents and records). An alarm's active key
    // is unique among its alarms, checked at commit (STATE-S6): the engine releases a
    // key and hands it on within one transaction.
    "CREATE TABLE sluice_record (
        kind  TEXT   NOT NULL,
        id    BIGINT NOT NULL,
        state TEXT   NOT NULL,
        body  JSONB  NOT NULL,
        PRIMARY KEY (kind, id)
    );
    CREATE INDEX idx_record_state ON sluice_record (kind, state, id);
    ALTER TABLE sluice_record ADD CONSTRAINT alarm_active_key_unique
        EXCLUDE USING btree ((body->>'activeKey') WITH =)
        WHERE (kind = 'alarm' AND body->>'activeKey' IS NOT NULL)
        DEFERRABLE INITIALLY DEFERRED;
    CREATE TABLE sluice_record_history (
        kind TEXT    NOT NULL,
        id   BIGINT  NOT NULL,
        seq  INTEGER NOT NULL,
        body JSONB   NOT NULL,
        at   TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (kind, id, seq)
    );
    CREATE TABLE sluice_record_id (
        kind TEXT   PRIMARY KEY,
        last BIGINT NOT NULL
    );
    CREATE TABLE sluice_link (
        name TEXT   NOT NULL,
        key  BYTEA  NOT NULL,
        id   BIGINT NOT NULL,
        PRIMARY KEY (name, key)
    );
    CREATE TABLE sluice_value (
        name TEXT  NOT NULL,
        key  BYTEA NOT NULL,
        body JSONB NOT NULL,
        PRIMARY KEY (name, key)
    );",
    // 3: engines sharing the devices (STATE-S7, STATE-S8): each engine's own lease, the
    // device-ownership leases, and the highest report number reserved per
    // device. Times are the server's, in ms since the epoch.
    "CREATE TABLE sluice_node (
        node_id     TEXT   PRIMARY KEY,
        expire_time BIGINT NOT NULL
    );
    CREATE TABLE sluice_device_owner (
        device_id   TEXT   PRIMARY KEY,
        node_id     TEXT   NOT NULL,
        expire_time BIGINT NOT NULL
    ) WITH (fillfactor = 70);
    CREATE TABLE sluice_device_seq (
        device_id TEXT   PRIMARY KEY,
        ceiling   BIGINT NOT NULL
    );",
    // 4: the highest report number known handed out per device (WAL-10): what
    // a crash may have left unused is announced by the engine that goes on.
    "ALTER TABLE sluice_device_seq ADD COLUMN used BIGINT;",
    // 5: where a lease ends (1 offline, 4 unknown: a device's `stateWhenExpired`).
    "ALTER TABLE sluice_entity_state ADD COLUMN expired_state_flag SMALLINT NOT NULL DEFAULT 1;",
    // 6: rows keyed by tenant, as the seed's unique key (tenant, type, id): two
    // tenants on one codec have a driver row each. The seed's indexes by tenant
    // and state and by parent and state; a heartbeat that keeps the state
    // writes the same flag, so renewals stay HOT updates.
    "DROP INDEX idx_entity_state_active_unique;
    CREATE UNIQUE INDEX idx_entity_state_active_unique
        ON sluice_entity_state (tenant_id, entity_type_flag, entity_id) WHERE deleted = 0;
    DROP INDEX idx_entity_state_parent;
    CREATE INDEX idx_entity_state_parent
        ON sluice_entity_state (tenant_id, entity_type_flag, parent_entity_id, entity_state_flag)
        WHERE deleted = 0;
    CREATE INDEX idx_entity_state_tenant_status
        ON sluice_entity_state (tenant_id, entity_type_flag, entity_state_flag) WHERE deleted = 0;",
];

/// An arbitrary number naming the lock migrations run under.
const MIGRATION_LOCK: i64 = 0x0051_1ce0;

/// Creates the schema, or brings it up to date.
///
/// # Errors
/// A database failure, or a schema newer than [`MIGRATIONS`].
pub(super) async fn migrate(mut client: deadpool_postgres::Object) -> Result<(), StoreError> {
    let tx = client.transaction().await.map_err(pg)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(pg)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS sluice_schema (
            version    INTEGER PRIMARY KEY,
            applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )",
    )
    .await
    .map_err(pg)?;
    let found: i32 = tx
        .query_one("SELECT coalesce(max(version), 0) FROM sluice_schema", &[])
        .await
        .map_err(pg)?
        .get(0);
    let known = MIGRATIONS.len() as i32;
    if found > known {
        return Err(StoreError::SchemaNewer { found, known });
    }
    for (version, sql) in (1..).zip(MIGRATIONS).skip(found as usize) {
        tx.batch_execute(sql).await.map_err(pg)?;
        tx.execute(
            "INSERT INTO sluice_schema (version) VALUES ($1)",
            &[&version],
        )
        .await
        .map_err(pg)?;
        tracing::info!(version, "database schema migrated");
    }
    tx.commit().await.map_err(pg)
}
