//! Records the broker refuses by closing the connection (WAL-9 of
//! `docs/wal.md`). MQTT 3.1.1 gives a broker no way to refuse one publish but
//! to disconnect (mosquitto does so for a packet above its `max_packet_size`);
//! the next connection would offer the same record first again, forever.
//!
//! A connection that drops shortly after a record was sent, before its PUBACK,
//! makes the oldest such record a suspect. While there is a suspect the
//! publisher sends one record at a time ([`Refusals::window`]), so the next
//! drop names the record it happened on exactly: one that was the only record
//! in flight when [`REFUSED_AFTER`] connections in a row dropped on it is taken
//! for refused and set aside. A suspect the broker acknowledges is cleared and
//! the full window comes back; a record acknowledged is never sent again.

use std::time::Duration;

use tokio::time::Instant;

/// Connections in a row that must drop on the same record.
pub(super) const REFUSED_AFTER: u32 = 3;

/// How soon after the record was sent the connection must drop: a broker that
/// refuses a packet closes at once; an outage can come at any time.
pub(super) const SOON: Duration = Duration::from_secs(5);

/// The record suspected so far, and how many drops in a row it was behind.
#[derive(Debug, Default)]
pub(super) struct Refusals {
    suspect: Option<(u64, u32)>,
}

impl Refusals {
    /// A connection dropped at `now` while `oldest` (a record id, and when it
    /// was sent) was the oldest record awaiting its PUBACK. Returns the record
    /// to set aside once the same one was behind [`REFUSED_AFTER`] drops in a
    /// row, each within [`SOON`] of its sending.
    pub(super) fn connection_lost(
        &mut self,
        oldest: Option<(u64, Instant)>,
        now: Instant,
    ) -> Option<u64> {
        let Some((id, _)) = oldest.filter(|(_, sent)| now.duration_since(*sent) <= SOON) else {
            self.suspect = None;
            return None;
        };
        let drops = match self.suspect {
            Some((suspect, drops)) if suspect == id => drops + 1,
            _ => 1,
        };
        if drops >= REFUSED_AFTER {
            self.suspect = None;
            return Some(id);
        }
        self.suspect = Some((id, drops));
        None
    }

    /// Record `id` was acknowledged: no longer a suspect if it was one.
    pub(super) fn acknowledged(&mut self, id: u64) {
        if self.suspect.is_some_and(|(suspect, _)| suspect == id) {
            self.suspect = None;
        }
    }

    /// How many records may await their PUBACK at once: one while a record is
    /// suspected, else `full`.
    pub(super) fn window(&self, full: usize) -> usize {
        if self.suspect.is_some() { 1 } else { full }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_record_behind_three_quick_drops_is_refused() {
        let start = Instant::now();
        let mut refusals = Refusals::default();
        let at = |ms| start + Duration::from_millis(ms);
        assert_eq!(refusals.connection_lost(Some((7, at(0))), at(10)), None);
        assert_eq!(refusals.connection_lost(Some((7, at(100))), at(110)), None);
        assert_eq!(
            refusals.connection_lost(Some((7, at(300))), at(310)),
            Some(7)
        );
        // It starts afresh after a verdict.
        assert_eq!(refusals.connection_lost(Some((7, at(400))), at(410)), None);
    }

    #[test]
    fn a_suspect_narrows_the_window_until_it_is_acknowledged() {
        let start = Instant::now();
        let mut refusals = Refusals::default();
        assert_eq!(refusals.window(90), 90);
        refusals.connection_lost(Some((7, start)), start);
        assert_eq!(refusals.window(90), 1);
        refusals.acknowledged(8);
        assert_eq!(refusals.window(90), 1, "another record");
        refusals.acknowledged(7);
        assert_eq!(refusals.window(90), 90);
    }

    #[test]
    fn only_quick_drops_in_a_row_on_the_same_record_count() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut refusals = Refusals::default();
        refusals.connection_lost(Some((7, at(0))), at(10));
        refusals.connection_lost(Some((7, at(100))), at(110));
        // An outage long after the record went out: not the record's doing.
        assert_eq!(
            refusals.connection_lost(Some((7, at(200))), at(20_000)),
            None
        );
        assert_eq!(
            refusals.connection_lost(Some((7, at(30_000))), at(30_010)),
            None
        );
        assert_eq!(
            refusals.connection_lost(Some((8, at(30_100))), at(30_110)),
            None
        );
        assert_eq!(
            refusals.connection_lost(Some((7, at(30_200))), at(30_210)),
            None
        );
        // A drop with nothing awaiting its PUBACK breaks the row too.
        assert_eq!(refusals.connection_lost(None, at(30_400)), None);
        assert_eq!(
            refusals.connection_lost(Some((7, at(30_500))), at(30_510)),
            None
        );
        assert_eq!(
            refusals.connection_lost(Some((7, at(30_600))), at(30_610)),
            None
        );
        assert_eq!(
            refusals.connection_lost(Some((7, at(30_700))), at(30_710)),
            Some(7)
        );
    }
}
