//! The alarm lifecycle: nine states, the whitelist of transitions (owned by the
//! rules component), supersede chains, paired clears and an audit record in the
//! transaction of every change. Design and invariants: `docs/alarms.md`.
//!
//! - [`model`]: the alarm record and its history;
//! - [`store`]: every change, each one transaction with its audit record;
//! - [`queries`]: lists, chains and counts;
//! - [`service`]: rules over samples, lease events and device events;
//! - [`delivery`]: the engine's timed transitions (push, quiet hours, escalation);
//! - [`plan`]: how alarms are delivered, as the configuration describes it.

pub mod delivery;
pub mod model;
pub mod plan;
pub mod queries;
pub mod service;
pub mod store;

pub use crate::compile::{DeviceRules, TenantRules};
pub use crate::model::{AlarmAction, AlarmState, Scope, Signal, SignalKind};
pub use delivery::{Delivery, DeliveryPlan, Notifier, QuietHours, Recipient, TickReport};
pub use model::{ActionRecord, Alarm, Change, Source};
pub use plan::delivery_plan;
pub use queries::{AlarmFilter, AlarmStats, Chain};
pub use service::{Alarms, Applied, EventError, RULE_FAILURE};
pub use store::{AlarmError, AlarmStore, Raise, Raised};
