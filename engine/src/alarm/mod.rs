//! The alarm lifecycle: nine states, the whitelist of transitions (owned by the
//! rules component), supersede chains, paired clears and an audit record in the
//! transaction of every change. Design and invariants: `docs/alarms.md`.
//!
//! - [`model`]: the alarm record and its history;
//! - [`store`]: the redb tables and every change, each one transaction;
//! - [`service`]: rules over samples, lease events and device events;
//! - [`delivery`]: the engine's timed transitions (push, quiet hours, escalation);
//! - [`build`]: the service as the configuration describes it.

pub mod build;
pub mod delivery;
pub mod model;
pub mod service;
pub mod store;

pub use crate::model::{AlarmAction, AlarmState, Scope, Signal, SignalKind};
pub use delivery::{Delivery, DeliveryPlan, Notifier, QuietHours, Recipient, TickReport};
pub use model::{ActionRecord, Alarm, Change, Source};
pub use service::{Alarms, Applied, DeviceRules, EventError, RULE_FAILURE, TenantRules};
pub use store::{
    AlarmError, AlarmFilter, AlarmStats, AlarmStore, AuditError, AuditTable, AuditWriter, Chain,
    Raise, Raised, TableAudit,
};
