//! The engine's own alarm transitions, on a timer:
//! - NEW alarms are published to the alarm topic and become PUSHED only once the
//!   broker acknowledged them (ALARM-6); a NEW alarm whose tenant's recipients are all
//!   in quiet hours becomes DELAYED instead, and NEW again when they end;
//! - CONFIRMED alarms not handled within `escalateAfterSec` become ESCALATED (and
//!   the escalation is published).
//!
//! [`Delivery::tick`] takes the time as an argument, so tests drive it with any
//! clock; [`Delivery::run`] ticks every second and when an alarm is opened.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, oneshot, watch};

use super::model::Alarm;
use super::store::{AlarmError, AlarmStore};
use crate::clock::now_ms;
use crate::model::{AlarmAction, AlarmState, Scope};
use crate::mqtt::{Notice, alarm_notice};

/// How long a published alarm may wait for its PUBACK before the next tick retries.
const ACK_TIMEOUT: Duration = Duration::from_secs(10);
/// Timer of the engine's transitions.
const TICK: Duration = Duration::from_secs(1);
const MINUTES_PER_DAY: i64 = 24 * 60;

/// Publishes a message and tells when the broker acknowledged it: the receiver
/// resolves on the PUBACK, or fails when the message was not delivered.
pub trait Notifier: Send + Sync + std::fmt::Debug {
    fn publish(&self, topic: &str, payload: Vec<u8>) -> oneshot::Receiver<()>;
}

impl Notifier for crate::uplink::Uplink {
    fn publish(&self, topic: &str, payload: Vec<u8>) -> oneshot::Receiver<()> {
        self.publish_tracked(topic.to_owned(), payload)
    }
}

/// A daily window in which a recipient is not to be woken, in local minutes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuietHours {
    /// Minutes after local midnight.
    pub start: u16,
    pub end: u16,
    /// The recipient's offset from UTC, minutes.
    pub utc_offset_min: i16,
}

impl QuietHours {
    /// Whether `now_ms` (UTC) falls in the window; a window may wrap midnight.
    pub fn contains(&self, now_ms: i64) -> bool {
        let minute = (now_ms.div_euclid(60_000) + i64::from(self.utc_offset_min))
            .rem_euclid(MINUTES_PER_DAY);
        let (start, end) = (i64::from(self.start), i64::from(self.end));
        if start <= end {
            (start..end).contains(&minute)
        } else {
            minute >= start || minute < end
        }
    }
}

/// Who is told of a tenant's alarms.
#[derive(Debug, Clone, PartialEq)]
pub struct Recipient {
    pub name: String,
    pub quiet_hours: Option<QuietHours>,
}

/// How alarms are delivered and escalated.
#[derive(Debug, Clone, Default)]
pub struct DeliverySettings {
    /// The full alarm topic.
    pub topic: String,
    /// Escalate CONFIRMED alarms not handled within this long; `None` never.
    pub escalate_after_ms: Option<i64>,
    /// Recipients per tenant; a tenant without any is never in quiet hours.
    pub recipients: HashMap<u32, Vec<Recipient>>,
}

impl DeliverySettings {
    /// Every recipient of the tenant is in quiet hours at `now`.
    pub fn all_quiet(&self, tenant_id: u32, now_ms: i64) -> bool {
        match self.recipients.get(&tenant_id) {
            Some(recipients) if !recipients.is_empty() => recipients
                .iter()
                .all(|r| r.quiet_hours.is_some_and(|q| q.contains(now_ms))),
            _ => false,
        }
    }
}

/// What one tick did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TickReport {
    pub delayed: usize,
    pub woken: usize,
    pub pushed: usize,
    /// Published but not acknowledged in time: still NEW, retried next tick.
    pub unacknowledged: usize,
    pub escalated: usize,
}

/// The engine's timer over the alarm store.
#[derive(Debug)]
pub struct Delivery {
    store: Arc<AlarmStore>,
    notifier: Arc<dyn Notifier>,
    settings: DeliverySettings,
}

impl Delivery {
    pub fn new(
        store: Arc<AlarmStore>,
        notifier: Arc<dyn Notifier>,
        settings: DeliverySettings,
    ) -> Self {
        Self {
            store,
            notifier,
            settings,
        }
    }

    /// Ticks every second and when `opened` is notified, until `shutdown`.
    pub async fn run(self, opened: Arc<Notify>, mut shutdown: watch::Receiver<bool>) {
        let mut timer = tokio::time::interval(TICK);
        timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = timer.tick() => {}
                () = opened.notified() => {}
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        return;
                    }
                }
            }
            if let Err(error) = self.tick(now_ms()).await {
                tracing::error!(%error, "alarm delivery tick failed");
            }
        }
    }

    /// One pass at `now`: wake, delay, publish and push, escalate.
    ///
    /// # Errors
    /// A storage failure; what was done before it stays done.
    pub async fn tick(&self, now: i64) -> Result<TickReport, AlarmError> {
        let mut report = TickReport::default();
        for alarm in self.in_state(AlarmState::Delayed).await? {
            if !self.settings.all_quiet(alarm.tenant_id, now)
                && self.engine_act(alarm.id, AlarmAction::Wake, now).await?
            {
                report.woken += 1;
            }
        }
        let mut waiting = Vec::new();
        for alarm in self.in_state(AlarmState::New).await? {
            if self.settings.all_quiet(alarm.tenant_id, now) {
                if self.engine_act(alarm.id, AlarmAction::Delay, now).await? {
                    report.delayed += 1;
                }
                continue;
            }
            let payload = alarm_notice(Notice::Alarm, &alarm);
            waiting.push((
                alarm.id,
                self.notifier.publish(&self.settings.topic, payload),
            ));
        }
        for (id, acked) in waiting {
            match tokio::time::timeout(ACK_TIMEOUT, acked).await {
                Ok(Ok(())) => {
                    if self.engine_act(id, AlarmAction::Push, now).await? {
                        report.pushed += 1;
                    }
                }
                _ => report.unacknowledged += 1,
            }
        }
        if let Some(after) = self.settings.escalate_after_ms {
            for alarm in self.in_state(AlarmState::Confirmed).await? {
                let overdue = alarm.confirmed_at.is_some_and(|at| at + after <= now);
                if overdue
                    && self
                        .engine_act(alarm.id, AlarmAction::Escalate, now)
                        .await?
                {
                    report.escalated += 1;
                    if let Some(alarm) = self.store.get(alarm.id, Scope::All)? {
                        // Best effort: the state change is what counts.
                        drop(self.notifier.publish(
                            &self.settings.topic,
                            alarm_notice(Notice::Escalation, &alarm),
                        ));
                    }
                }
            }
        }
        Ok(report)
    }

    async fn in_state(&self, state: AlarmState) -> Result<Vec<Alarm>, AlarmError> {
        let store = Arc::clone(&self.store);
        tokio::task::spawn_blocking(move || store.in_state(state)).await?
    }

    /// Applies an engine transition; `false` when a person changed the alarm
    /// first (the whitelist refuses it now), which is not an error.
    async fn engine_act(&self, id: u64, action: AlarmAction, now: i64) -> Result<bool, AlarmError> {
        let store = Arc::clone(&self.store);
        let result = tokio::task::spawn_blocking(move || {
            store.act(id, action, Scope::All, "engine", None, now)
        })
        .await?;
        match result {
            Ok(_) => Ok(true),
            Err(AlarmError::Refused(_)) => Ok(false),
            Err(error) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;

    #[test]
    fn quiet_hours_wrap_midnight_in_local_time() {
        // 22:00-07:00 at UTC+8: 14:00-23:00 UTC.
        let quiet = QuietHours {
            start: 22 * 60,
            end: 7 * 60,
            utc_offset_min: 8 * 60,
        };
        assert!(!quiet.contains(13 * HOUR));
        assert!(quiet.contains(14 * HOUR));
        assert!(quiet.contains(22 * HOUR + 59 * 60_000));
        assert!(!quiet.contains(23 * HOUR));
        let day = QuietHours {
            start: 12 * 60,
            end: 13 * 60,
            utc_offset_min: 0,
        };
        assert!(day.contains(12 * HOUR + 30 * 60_000));
        assert!(!day.contains(13 * HOUR));
    }

    #[test]
    fn a_tenant_is_quiet_only_when_every_recipient_is() {
        let quiet = Some(QuietHours {
            start: 0,
            end: 60,
            utc_offset_min: 0,
        });
        let settings = DeliverySettings {
            recipients: HashMap::from([(
                1,
                vec![
                    Recipient {
                        name: "night".into(),
                        quiet_hours: quiet,
                    },
                    Recipient {
                        name: "always".into(),
                        quiet_hours: None,
                    },
                ],
            )]),
            ..DeliverySettings::default()
        };
        assert!(!settings.all_quiet(1, 30 * 60_000));
        assert!(!settings.all_quiet(2, 30 * 60_000));
        let mut only_night = settings.clone();
        if let Some(list) = only_night.recipients.get_mut(&1) {
            list.truncate(1);
        }
        assert!(only_night.all_quiet(1, 30 * 60_000));
        assert!(!only_night.all_quiet(1, 90 * 60_000));
    }
}
