//! The alarm lifecycle: nine states, the whitelist of transitions (owned by the
//! rules component), supersede chains, paired clears and an audit record in the
//! transaction of every change. Design and invariants: `docs/alarms.md`.
//!
//! - [`model`]: the alarm record and its history;
//! - [`store`]: every change, each one transaction with its audit record;
//! - [`queries`]: lists, chains and counts;
//! - [`service`]: rules over samples, lease events and device events;
//! - [`delivery`]: the engine's timed transitions (push, quiet hours, escalation);
//! - [`settings`]: how alarms are delivered, as the configuration describes it.

pub mod delivery;
pub mod model;
pub mod queries;
pub mod service;
pub mod settings;
pub mod store;

pub use crate::compile::{DeviceRules, TenantRules};
pub use crate::model::{AlarmAction, AlarmState, Scope, Signal, SignalKind};
pub use delivery::{Delivery, DeliverySettings, Notifier, QuietHours, Recipient, TickReport};
pub use model::{ActionRecord, Alarm, Change, Source};
pub use queries::{AlarmFilter, AlarmStats, Chain};
pub use service::{Alarms, Applied, EventError, RULE_FAILURE};
pub use settings::delivery_settings;
pub use store::{AlarmError, AlarmStore, Raise, Raised};
