//! Engines sharing the devices of one configuration (docs/state.md, STATE-S7, STATE-S8):
//! each engine renews a lease of its own and the ownership leases of its share
//! of the devices, takes unowned and lapsed devices up to its share, and lets
//! the ones above its share lapse (report numbers: `seq_blocks.rs`). Every time is the server's clock, so engines on machines whose
//! clocks disagree still agree on who owns what.

use super::Postgres;
use crate::store::StoreError;
use crate::store::error::pg;

/// The server's time in ms since the epoch.
const NOW: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

/// Rounds of taking devices per renewal: another engine taking the same
/// candidates at once leaves some to the next round.
const TAKE_ROUNDS: usize = 3;

/// Who owns one device, as the database says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceOwner {
    pub device_id: String,
    pub node_id: String,
    /// When the ownership lapses unless renewed (server ms since the epoch).
    pub expire_time: i64,
    /// Whether it has lapsed already.
    pub lapsed: bool,
}

/// The devices of `devices` that this engine owns after a renewal, and the
/// engines alive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    pub devices: Vec<String>,
    pub nodes: usize,
}

impl Postgres {
    /// One renewal of `node`'s leases for `lease_ms`: its own, and its share of
    /// `devices` (all engines alive share them evenly, rounded up). Devices it
    /// owns above its share lapse `handoff_ms` from now (the engine has
    /// stopped polling them by then), so another engine takes them.
    ///
    /// # Errors
    /// A database failure: nothing is known to be owned then.
    pub fn own_devices(
        &self,
        node: &str,
        lease_ms: i64,
        handoff_ms: i64,
        devices: Vec<String>,
    ) -> Result<Owned, StoreError> {
        let node = node.to_owned();
        self.run(move |client| async move {
            let query = async |sql: &str, params: &[&(dyn tokio_postgres::types::ToSql + Sync)]| {
                let statement = client.prepare_cached(sql).await.map_err(pg)?;
                client.query(&statement, params).await.map_err(pg)
            };
            query(
                &format!(
                    "INSERT INTO sluice_node (node_id, expire_time) VALUES ($1, {NOW} + $2)
                     ON CONFLICT (node_id) DO UPDATE SET expire_time = excluded.expire_time"
                ),
                &[&node, &lease_ms],
            )
            .await?;
            let nodes: i64 = query(
                &format!("SELECT count(*) FROM sluice_node WHERE expire_time > {NOW}"),
                &[],
            )
            .await?
            .first()
            .map_or(1, |row| row.get(0));
            let nodes = usize::try_from(nodes).unwrap_or(1).max(1);
            let share = devices.len().div_ceil(nodes);
            let mut held: Vec<String> = query(
                &format!(
                    "SELECT device_id FROM sluice_device_owner
                     WHERE node_id = $1 AND expire_time > {NOW} AND device_id = ANY($2)
                     ORDER BY device_id"
                ),
                &[&node, &devices],
            )
            .await?
            .iter()
            .map(|row| row.get(0))
            .collect();
            let surplus = held.split_off(share.min(held.len()));
            if !surplus.is_empty() {
                query(
                    &format!(
                        "UPDATE sluice_device_owner SET expire_time = least(expire_time, {NOW} + $3)
                         WHERE node_id = $1 AND device_id = ANY($2)"
                    ),
                    &[&node, &surplus, &handoff_ms],
                )
                .await?;
            }
            let mut owned: Vec<String> = query(
                &format!(
                    "UPDATE sluice_device_owner SET expire_time = {NOW} + $3
                     WHERE node_id = $1 AND device_id = ANY($2) AND expire_time > {NOW}
                     RETURNING device_id"
                ),
                &[&node, &held, &lease_ms],
            )
            .await?
            .iter()
            .map(|row| row.get(0))
            .collect();
            for _ in 0..TAKE_ROUNDS {
                let wanted = i64::try_from(share.saturating_sub(owned.len())).unwrap_or(0);
                if wanted == 0 {
                    break;
                }
                let candidates: Vec<String> = query(
                    &format!(
                        "SELECT d FROM unnest($1::text[]) AS d
                         WHERE NOT EXISTS (SELECT 1 FROM sluice_device_owner o
                                           WHERE o.device_id = d AND o.expire_time > {NOW})
                         ORDER BY md5(d || $2) LIMIT $3"
                    ),
                    &[&devices, &node, &wanted],
                )
                .await?
                .iter()
                .map(|row| row.get(0))
                .collect();
                if candidates.is_empty() {
                    break;
                }
                // Taken only where no live lease exists: of two engines taking
                // one device at once, the second finds the first's lease.
                let taken = query(
                    &format!(
                        "INSERT INTO sluice_device_owner AS o (device_id, node_id, expire_time)
                         SELECT d, $2, {NOW} + $3 FROM unnest($1::text[]) AS d
                         ON CONFLICT (device_id) DO UPDATE
                             SET node_id = excluded.node_id, expire_time = excluded.expire_time
                             WHERE o.expire_time <= {NOW}
                         RETURNING device_id"
                    ),
                    &[&candidates, &node, &lease_ms],
                )
                .await?;
                owned.extend(taken.iter().map(|row| row.get::<_, String>(0)));
            }
            owned.sort();
            Ok(Owned {
                devices: owned,
                nodes,
            })
        })
    }

    /// Gives up every lease of `node` at once (the engine stops).
    ///
    /// # Errors
    /// A database failure: the leases then lapse on their own.
    pub fn release_devices(&self, node: &str) -> Result<(), StoreError> {
        let node = node.to_owned();
        self.run(move |client| async move {
            client
                .execute(
                    "DELETE FROM sluice_device_owner WHERE node_id = $1",
                    &[&node],
                )
                .await
                .map_err(pg)?;
            client
                .execute("DELETE FROM sluice_node WHERE node_id = $1", &[&node])
                .await
                .map_err(pg)?;
            Ok(())
        })
    }

    /// Every device's owner as the database has it.
    ///
    /// # Errors
    /// A database failure.
    pub fn device_owners(&self) -> Result<Vec<DeviceOwner>, StoreError> {
        self.run(move |client| async move {
            let rows = client
                .query(
                    &format!(
                        "SELECT device_id, node_id, expire_time, expire_time <= {NOW}
                         FROM sluice_device_owner ORDER BY device_id"
                    ),
                    &[],
                )
                .await
                .map_err(pg)?;
            Ok(rows
                .iter()
                .map(|row| DeviceOwner {
                    device_id: row.get(0),
                    node_id: row.get(1),
                    expire_time: row.get(2),
                    lapsed: row.get(3),
                })
                .collect())
        })
    }
}
