//! Stage `deadband`: drops values that moved less than the tag's deadband. A component of its own for
//! pipelines that name it alone; its behaviour is `sluice_guest::stages::Deadband`,
//! which the `chain` stage runs too.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

sluice_guest::stage_component!(sluice_guest::stages::Deadband);
