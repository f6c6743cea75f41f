//! Lease lengths the engine gives when nothing else says how long.

use std::time::Duration;

/// How often a driver renews its own lease, and the lease's length, as the seed
/// sets them.
pub const DRIVER_RENEWAL_PERIOD: Duration = Duration::from_secs(15);
pub const DRIVER_LEASE_SECONDS: u64 = 45;
/// A device reported from outside with no lease of its own (STATE-8), as for
/// a device the engine configures but never polls.
pub const REPORTED_DEVICE_LEASE_SECONDS: u64 = 900;
