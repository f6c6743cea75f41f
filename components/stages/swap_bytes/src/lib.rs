//! Stage `swap_bytes`: raw values from the tag's byte order to big-endian. A component of its own for
//! pipelines that name it alone; its behaviour is `sluice_guest::stages::SwapBytes`,
//! which the `chain` stage runs too.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

sluice_guest::stage_component!(sluice_guest::stages::SwapBytes);
