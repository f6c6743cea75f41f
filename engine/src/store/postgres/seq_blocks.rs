//! Report numbers of engines sharing the devices (STATE-S8 of `docs/state.md`,
//! WAL-4 and WAL-10 of `docs/wal.md`): blocks reserved per device, the highest
//! number known handed out, and a clean stop giving back what it did not use.

use super::Postgres;
use crate::store::StoreError;
use crate::store::error::pg;

/// A block of numbers reserved for one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserved {
    /// The highest number of the block.
    pub ceiling: u64,
    /// Before this block: the numbers the last engine reserved and may not
    /// have used (above its last mark, up to its ceiling), when there are any.
    pub unsure: Option<(u64, u64)>,
}

/// One device's numbers at a clean stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenBack {
    pub device: String,
    /// The last number used.
    pub last: u64,
    /// The ceiling this engine reserved.
    pub ceiling: u64,
    /// The device's mark from now on; `None` keeps the one there (numbers a
    /// crash may have left unused, not announced yet).
    pub mark: Option<u64>,
}

fn db(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn number(n: i64) -> u64 {
    u64::try_from(n).unwrap_or_default()
}

impl Postgres {
    /// Reserves the next `block` report numbers of `device` for this engine.
    ///
    /// # Errors
    /// A database failure: no number is handed out then.
    pub fn reserve_seq(&self, device: &str, block: u64) -> Result<Reserved, StoreError> {
        let device = device.to_owned();
        let block = db(block);
        self.run(move |client| async move {
            let statement = client
                .prepare_cached(
                    "INSERT INTO sluice_device_seq AS s (device_id, ceiling) VALUES ($1, $2)
                     ON CONFLICT (device_id) DO UPDATE SET ceiling = s.ceiling + $2
                     RETURNING ceiling, used",
                )
                .await
                .map_err(pg)?;
            let row = client
                .query_one(&statement, &[&device, &block])
                .await
                .map_err(pg)?;
            let ceiling: i64 = row.get(0);
            let used: Option<i64> = row.get(1);
            let before = ceiling - block;
            Ok(Reserved {
                ceiling: number(ceiling),
                unsure: used
                    .filter(|used| *used < before)
                    .map(|used| (number(used) + 1, number(before))),
            })
        })
    }

    /// Records, per device, the highest number handed out so far (`marks`:
    /// device and number); a lower mark than the one kept changes nothing.
    ///
    /// # Errors
    /// A database failure.
    pub fn mark_seq(&self, marks: Vec<(String, u64)>) -> Result<(), StoreError> {
        let (devices, used): (Vec<String>, Vec<i64>) =
            marks.into_iter().map(|(d, n)| (d, db(n))).unzip();
        self.run(move |client| async move {
            let statement = client
                .prepare_cached(
                    "UPDATE sluice_device_seq AS s SET used = m.used
                     FROM unnest($1::text[], $2::bigint[]) AS m(device_id, used)
                     WHERE s.device_id = m.device_id AND (s.used IS NULL OR s.used < m.used)",
                )
                .await
                .map_err(pg)?;
            client
                .execute(&statement, &[&devices, &used])
                .await
                .map_err(pg)?;
            Ok(())
        })
    }

    /// A clean stop: each device's ceiling comes down to its last number
    /// used, unless another engine reserved above it meanwhile.
    ///
    /// # Errors
    /// A database failure: the numbers stay reserved (a gap the marks explain).
    pub fn give_back_seq(&self, ends: Vec<GivenBack>) -> Result<(), StoreError> {
        let mut devices = Vec::with_capacity(ends.len());
        let mut last = Vec::with_capacity(ends.len());
        let mut ceilings = Vec::with_capacity(ends.len());
        let mut marks: Vec<Option<i64>> = Vec::with_capacity(ends.len());
        for end in ends {
            devices.push(end.device);
            last.push(db(end.last));
            ceilings.push(db(end.ceiling));
            marks.push(end.mark.map(db));
        }
        self.run(move |client| async move {
            let statement = client
                .prepare_cached(
                    "UPDATE sluice_device_seq AS s
                     SET ceiling = m.last, used = coalesce(m.mark, s.used)
                     FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[])
                          AS m(device_id, last, ceiling, mark)
                     WHERE s.device_id = m.device_id AND s.ceiling = m.ceiling",
                )
                .await
                .map_err(pg)?;
            client
                .execute(&statement, &[&devices, &last, &ceilings, &marks])
                .await
                .map_err(pg)?;
            Ok(())
        })
    }
}
