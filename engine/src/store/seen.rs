//! Signed downlink messages already handled (SEC-4 of `docs/security.md`), by
//! topic and `requestId`, with a digest of what they said: a message the broker delivers again is known, and
//! a captured one sent again is not applied a second time. Kept in the
//! engine's own redb file (each engine applies what it receives) until its
//! signature would be too old to accept anyway.

use redb::TableDefinition;

use super::database::Store;
use super::error::StoreError;

/// `topic \n requestId` -> digest (32 bytes) | kept until (i64 LE, ms).
const SEEN: TableDefinition<&str, &[u8]> = TableDefinition::new("downlink_seen");

/// Whether a request was handled before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Never (or long enough ago to be forgotten).
    New,
    /// With the same content: a repeat.
    Same,
    /// With other content under the same request id.
    Other,
}

/// The requests handled, in the engine's redb file.
#[derive(Debug, Clone)]
pub struct SeenRequests {
    store: Store,
}

fn key(topic: &str, request_id: &str) -> String {
    format!("{topic}\n{request_id}")
}

impl SeenRequests {
    pub fn new(store: &Store) -> Self {
        Self {
            store: store.clone(),
        }
    }

    /// Whether `request_id` on `topic` was handled, and with which content.
    ///
    /// # Errors
    /// A database failure.
    pub fn check(
        &self,
        topic: &str,
        request_id: &str,
        digest: &[u8; 32],
    ) -> Result<Seen, StoreError> {
        let Some(table) = self.store.read_table(SEEN)? else {
            return Ok(Seen::New);
        };
        Ok(match table.get(key(topic, request_id).as_str())? {
            None => Seen::New,
            Some(value) if value.value().get(..32) == Some(&digest[..]) => Seen::Same,
            Some(_) => Seen::Other,
        })
    }

    /// Remembers `request_id` on `topic` until `until_ms`; forgets what is past
    /// its time.
    ///
    /// # Errors
    /// A database failure: nothing is remembered.
    pub fn remember(
        &self,
        topic: &str,
        request_id: &str,
        digest: &[u8; 32],
        until_ms: i64,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.store.transaction(|write| {
            let mut table = write.open_table(SEEN)?;
            let mut value = digest.to_vec();
            value.extend_from_slice(&until_ms.to_le_bytes());
            table.insert(key(topic, request_id).as_str(), value.as_slice())?;
            table.retain(|_, value| kept_until(value) >= now_ms)?;
            Ok::<(), StoreError>(())
        })
    }
}

fn kept_until(value: &[u8]) -> i64 {
    value
        .get(32..40)
        .and_then(|b| b.try_into().ok())
        .map_or(i64::MIN, i64::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_known_by_topic_id_and_content_until_its_time() {
        let dir = std::env::temp_dir().join(format!("sluice-seen-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let seen = SeenRequests::new(&Store::open(&dir).expect("store"));
        let (a, b) = ([1u8; 32], [2u8; 32]);
        assert_eq!(seen.check("t", "r1", &a).expect("read"), Seen::New);
        seen.remember("t", "r1", &a, 1_000, 0).expect("kept");
        assert_eq!(seen.check("t", "r1", &a).expect("read"), Seen::Same);
        assert_eq!(seen.check("t", "r1", &b).expect("read"), Seen::Other);
        assert_eq!(seen.check("u", "r1", &a).expect("read"), Seen::New);
        // Past its time, it is forgotten at the next write.
        seen.remember("t", "r2", &b, 5_000, 2_000).expect("kept");
        assert_eq!(seen.check("t", "r1", &a).expect("read"), Seen::New);
        assert_eq!(seen.check("t", "r2", &b).expect("read"), Seen::Same);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
