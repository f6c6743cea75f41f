//! Components deployed while the engine runs: uploaded versions are compiled and
//! checked against their world, every device's pipeline is rebuilt with them off
//! the hot path, and the new pipelines are swapped in at each device's next round.
//! A version that breaks any pipeline is rolled back before a device sees it.
//! Deployed versions are kept in the data directory (`components/NAME/VERSION.wasm`
//! and `components/NAME/manifest.json`, written via rename) and installed again at
//! start, with the version that was active.
//!
//! The same one-at-a-time path reloads the pipeline files and the device
//! configuration (`reload.rs`) and applies the device configurations the platform
//! pushes (`push.rs`).

mod deployer;
mod error;
mod push;
mod reload;
mod rights;
mod shelf;
mod status;

pub use deployer::{Deployer, DeployerParts};
pub use error::DeployError;
pub use push::{Push, PushOutcome, PushTarget, serve_pushes};
pub use reload::{DeviceReload, ReloadReport, watch_sources};
pub use rights::PushRights;
pub use shelf::{COMPONENTS_DIR, Shelf};
pub use status::ReloadStatus;
