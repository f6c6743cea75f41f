//! Stage `scale`: value = raw x factor + offset (setting `decimals`). A component of its own for
//! pipelines that name it alone; its behaviour is `sluice_guest::stages::Scale`,
//! which the `chain` stage runs too.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

sluice_guest::stage_component!(sluice_guest::stages::Scale);
