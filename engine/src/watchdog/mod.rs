//! What the engine watches on its own and alarms a person about: each
//! tenant's component pools (listed for `/metrics` and `/health`), and the
//! conditions it keeps an alarm open for while they last (a component
//! quarantined, a device's connection FAILED, a device that keeps refusing
//! requests).

mod conditions;
mod pools;

pub use conditions::{CONNECTION_RULE, PROTOCOL_RULE, QUARANTINE_RULE, watch};
pub use pools::{TenantPool, pools, register_metrics};
