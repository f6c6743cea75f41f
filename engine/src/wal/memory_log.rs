//! The log when the WAL is disabled: a ring in memory, `ringCapacity` messages,
//! lost on restart. The overflow policy applies when the ring is full. Dead
//! letters are kept in memory too.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::dead_letter::{DeadLetter, MAX_DEAD_LETTERS};
use super::error::WalError;
use super::log::{Appended, MessageLog};
use super::record::{Message, Record};
use crate::config::OverflowPolicy;
use crate::sync::lock;

#[derive(Debug, Default)]
struct Ring {
    next_id: u64,
    records: VecDeque<Record>,
    bytes: u64,
    dead: VecDeque<DeadLetter>,
}

/// A bounded in-memory log.
#[derive(Debug)]
pub struct MemoryLog {
    capacity: usize,
    ring: Mutex<Ring>,
}

impl MemoryLog {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            ring: Mutex::new(Ring {
                next_id: 1,
                ..Ring::default()
            }),
        }
    }

    fn ring(&self) -> std::sync::MutexGuard<'_, Ring> {
        lock(&self.ring)
    }
}

impl Ring {
    fn remove(&mut self, id: u64) {
        // Ids are sorted in the ring: find by binary search.
        if let Ok(index) = self.records.binary_search_by_key(&id, |r| r.id)
            && let Some(record) = self.records.remove(index)
        {
            self.bytes -= size(&record.message);
        }
    }
}

fn size(message: &Message) -> u64 {
    (message.payload.len() + message.topic.len() + message.device.len()) as u64
}

impl MessageLog for MemoryLog {
    fn append(&self, records: Vec<Record>, policy: OverflowPolicy) -> Result<Appended, WalError> {
        let mut ring = self.ring();
        let mut outcome = Appended::default();
        for Record { id, message } in records {
            ring.next_id = ring.next_id.max(id + 1);
            if ring.records.len() >= self.capacity {
                match policy {
                    OverflowPolicy::DropNewest => {
                        outcome.dropped_newest += 1;
                        continue;
                    }
                    OverflowPolicy::DropOldest => {
                        if let Some(old) = ring.records.pop_front() {
                            ring.bytes -= size(&old.message);
                            outcome.dropped_oldest += 1;
                        }
                    }
                }
            }
            ring.bytes += size(&message);
            ring.records.push_back(Record { id, message });
            outcome.stored += 1;
        }
        Ok(outcome)
    }

    fn read_after(&self, after: Option<u64>, limit: usize) -> Result<Vec<Record>, WalError> {
        let ring = self.ring();
        let start = after.map_or(0, |id| id.saturating_add(1));
        Ok(ring
            .records
            .iter()
            .filter(|r| r.id >= start)
            .take(limit)
            .cloned()
            .collect())
    }

    fn release(&self, ids: &[u64]) -> Result<(), WalError> {
        let mut ring = self.ring();
        for id in ids {
            ring.remove(*id);
        }
        Ok(())
    }

    fn set_aside(&self, letter: &DeadLetter) -> Result<u64, WalError> {
        let mut ring = self.ring();
        ring.remove(letter.id);
        ring.dead.push_back(letter.clone());
        let mut dropped = 0;
        while ring.dead.len() > MAX_DEAD_LETTERS {
            ring.dead.pop_front();
            dropped += 1;
        }
        Ok(dropped)
    }

    fn dead_letters(&self) -> Result<Vec<DeadLetter>, WalError> {
        Ok(self.ring().dead.iter().cloned().collect())
    }

    fn take_dead_letter(&self, id: u64) -> Result<Option<DeadLetter>, WalError> {
        let mut ring = self.ring();
        let index = ring.dead.iter().position(|d| d.id == id);
        Ok(index.and_then(|i| ring.dead.remove(i)))
    }

    fn dead_letter_count(&self) -> u64 {
        self.ring().dead.len() as u64
    }

    fn next_id(&self) -> u64 {
        self.ring().next_id
    }

    fn size(&self) -> (u64, u64) {
        let ring = self.ring();
        (ring.records.len() as u64, ring.bytes)
    }

    fn corrupt(&self) -> u64 {
        0
    }
}
