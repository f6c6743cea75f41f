//! The collector: devices wired from the compiled configuration, their links and
//! rounds, and the scheduler that polls them.
//!
//! Channels of several devices naming the same protocol, host and port share one
//! link (one TCP connection, requests serialised on it) unless a channel sets
//! `sharedConnection: false`. Codec sessions and pipeline processors live in the
//! device's tenant's component pools. The devices change while it runs
//! ([`Fleet::begin_reload`]) without touching the others' connections, and each
//! round's samples go to a [`SampleSink`] the collector owns the interface of.

mod arrivals;
mod births;
mod device;
mod fleet;
mod framing;
mod heartbeat;
mod latest;
mod links;
mod metrics;
mod outside;
mod ownership;
mod polling;
mod push;
mod raw_values;
mod reach;
mod reporter;
mod roster;
mod scrape;
mod sink;
mod swap;
mod tag_io;
mod trend;
mod wiring;

pub use births::FleetBirths;
pub use device::{Channel, Device, DeviceParts, LeaseTerms, Probe, Writable};
pub use fleet::{DeviceChanges, Fleet, PendingReload};
pub use latest::{LatestValues, LatestView, RoundsDone, TagDisplay, TrendView};
pub use links::{Endpoint, LinkInfo};
pub use metrics::{DeviceCounters, DeviceMetrics};
pub use ownership::Ownership;
pub use polling::{Collector, keep_ownership};
pub use push::{DeviceBrokers, MessageCounters, PushInput, PushSetup};
pub use roster::Roster;
pub use sink::SampleSink;
pub use swap::{swap_codec, swap_decoder, swap_pipelines};
pub use tag_io::TagIoError;
pub use wiring::Services;
