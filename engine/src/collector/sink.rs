//! Where a round's samples go besides the uplink: the collector hands them to a
//! [`SampleSink`] (the alarm service), which it also tells when devices are
//! rebuilt, so rules always judge the build of a device they were made for.

use crate::compile::DeviceRules;
use crate::model::Sample;

/// Whoever listens to the devices' rounds: the collector owns it, the alarm
/// service above fills it in (ARCH-2).
pub trait SampleSink: Send + Sync + std::fmt::Debug {
    /// One round's processed samples of build `build` of device `device_id`. Runs
    /// on the round's task: it must not wait for storage.
    fn on_samples(&self, device_id: &str, build: u64, samples: &[Sample]);

    /// Devices were built: the builds of `gone` no longer run (removed, or
    /// rebuilt), and each of `built` runs as build `key` with these rules.
    fn devices_built(&self, gone: &[String], built: Vec<(String, u64, DeviceRules)>);
}
