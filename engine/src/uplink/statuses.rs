//! The retained statuses of the devices and drivers this engine speaks for
//! (docs/state.md, STATE-7): each names the collector that said it, the
//! latest per topic waits for the next connection while none is up, and at a
//! clean stop the engine alone on its devices says each of them offline
//! before it disconnects.

use std::collections::HashMap;

use crate::model::EntityState;
use crate::mqtt::entity_status;

/// One status as the rest of the engine hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Status {
    pub topic: String,
    pub state: EntityState,
    pub ts_ms: i64,
}

/// What the publisher has said, and has still to say, on status topics.
#[derive(Debug)]
pub(super) struct Statuses {
    /// The collector's client id, named in every status.
    collector: String,
    /// Whether no other engine speaks for these devices (the state is not
    /// shared): then a clean stop says them offline.
    sole: bool,
    /// The latest status per topic that came while no connection was up.
    waiting: HashMap<String, Status>,
    /// The last state queued per topic on a connection.
    said: HashMap<String, EntityState>,
}

impl Statuses {
    pub(super) fn new(collector: &str, sole: bool) -> Self {
        Self {
            collector: collector.to_owned(),
            sole,
            waiting: HashMap::new(),
            said: HashMap::new(),
        }
    }

    /// A status to say now, on a connection that is up: its topic and payload.
    pub(super) fn say(&mut self, status: Status) -> (String, Vec<u8>) {
        self.said.insert(status.topic.clone(), status.state);
        let payload = entity_status(status.state, status.ts_ms, &self.collector);
        (status.topic, payload)
    }

    /// A status that came while no connection was up: only the latest per
    /// topic is kept.
    pub(super) fn keep(&mut self, status: Status) {
        self.waiting.insert(status.topic.clone(), status);
    }

    /// What waited for a connection, to say on the one that just came up.
    pub(super) fn waited(&mut self) -> Vec<(String, Vec<u8>)> {
        let waiting: Vec<Status> = self.waiting.drain().map(|(_, status)| status).collect();
        waiting.into_iter().map(|status| self.say(status)).collect()
    }

    /// The last words of a clean stop: `offline` on every topic last said
    /// otherwise, when this engine alone speaks for its devices.
    pub(super) fn farewell(&mut self, now_ms: i64) -> Vec<(String, Vec<u8>)> {
        if !self.sole {
            return Vec::new();
        }
        let live: Vec<String> = self
            .said
            .iter()
            .filter(|(_, state)| **state != EntityState::Offline)
            .map(|(topic, _)| topic.clone())
            .collect();
        live.into_iter()
            .map(|topic| {
                self.say(Status {
                    topic,
                    state: EntityState::Offline,
                    ts_ms: now_ms,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(topic: &str, state: EntityState, ts_ms: i64) -> Status {
        Status {
            topic: topic.to_owned(),
            state,
            ts_ms,
        }
    }

    fn json(payload: &[u8]) -> serde_json::Value {
        serde_json::from_slice(payload).expect("json")
    }

    #[test]
    fn a_clean_stop_says_offline_where_something_else_was_said() {
        let mut statuses = Statuses::new("gw-1", true);
        let (topic, payload) = statuses.say(status("P/a/status/post", EntityState::Online, 5));
        assert_eq!(topic, "P/a/status/post");
        assert_eq!(
            json(&payload),
            serde_json::json!({"status": "online", "ts": 5, "collector": "gw-1"})
        );
        statuses.say(status("P/b/status/post", EntityState::Online, 5));
        statuses.say(status("P/b/status/post", EntityState::Offline, 6));
        statuses.keep(status("P/c/status/post", EntityState::Fault, 7));
        statuses.keep(status("P/c/status/post", EntityState::Maintain, 8));
        let waited = statuses.waited();
        assert_eq!(waited.len(), 1, "only the latest per topic waits");
        assert_eq!(json(&waited[0].1)["status"], "maintain");
        let mut last: Vec<(String, serde_json::Value)> = statuses
            .farewell(9)
            .into_iter()
            .map(|(topic, payload)| (topic, json(&payload)))
            .collect();
        last.sort_by(|a, b| a.0.cmp(&b.0));
        let offline = serde_json::json!({"status": "offline", "ts": 9, "collector": "gw-1"});
        assert_eq!(
            last,
            vec![
                ("P/a/status/post".to_owned(), offline.clone()),
                ("P/c/status/post".to_owned(), offline),
            ]
        );
        assert!(statuses.farewell(10).is_empty(), "said once");
    }

    #[test]
    fn engines_sharing_their_devices_leave_them_to_the_next_owner() {
        let mut statuses = Statuses::new("gw-1", false);
        statuses.say(status("P/a/status/post", EntityState::Online, 5));
        assert!(statuses.farewell(9).is_empty());
    }
}
