//! The config compiler: one path from the files (device configuration, pipeline
//! files) to a gateway ready to run, or to the complete list of problems, each at
//! `FILE:LINE:COL`: the YAML itself, every codec's view of every channel and
//! address, every stage's settings, pipeline includes and alarm rules.
//!
//! `sluice check`, `sluice run`, the file watcher, `POST /reload` and component
//! deployments all compile through [`build`], so whatever one refuses, the others
//! refuse with the same words.

mod build;
mod device;
mod limits;
mod pools;
mod problems;
mod pushed;
mod rules;
mod sources;
mod stages;

#[cfg(test)]
mod tests;

pub use build::{Compiled, build, compile, components_view, load};
pub use device::{CompiledChannel, CompiledDevice, CompiledPush, lease_length};
pub use limits::SandboxLimits;
pub use pools::Pools;
pub use problems::report_call;
pub use pushed::{Conflict, FileEdit, Overlaid, PUSHED_DIR, Pushed, PushedDevices, put_device};
pub use rules::{DeviceRules, RulesTarget, TenantRules, device_rules, tenant_rules};
pub use sources::{Loaded, Sources};
