//! Stage `chain`: runs any sequence of the built-in stages (`swap_bytes`, `decode`,
//! `scale`, `check_range`, `deadband`) in one call. The engine runs each run of
//! built-in stages of a pipeline through it, so a round crosses the component
//! boundary once for all of them.
//!
//! Settings: `N.use` names stage `N` (0, 1, ... in order), `N.KEY` is setting `KEY`
//! of that stage; issues come back with keys prefixed the same way.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

sluice_guest::stage_component!(sluice_guest::stages::Chain);
