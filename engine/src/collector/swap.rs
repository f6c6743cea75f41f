//! New component versions put in place while the engine runs: every device holds
//! its pipeline and each channel its codec session (a device that publishes by
//! itself, its decoder) behind a [`Swappable`], takes it once per round (per
//! message), and so sees a new one from its next round on, never in the
//! middle of one (COMP-5). What is swapped in was compiled for the running configuration
//! as a whole beforehand, so a swap cannot fail half-way.
//!
//! [`Swappable`]: crate::sync::Swappable

use std::collections::HashMap;
use std::sync::Arc;

use super::device::Device;
use crate::compile::{Compiled, CompiledDevice};

/// Compiled devices by id.
fn by_id(compiled: Compiled) -> HashMap<String, CompiledDevice> {
    compiled
        .devices
        .into_iter()
        .map(|d| (d.config.device_id.clone(), d))
        .collect()
}

/// Puts every device's newly compiled pipeline (and decoder of writes, and
/// the one call a message that runs it) in place; returns how many devices got one.
pub fn swap_pipelines(devices: &[Arc<Device>], compiled: Compiled) -> usize {
    let mut fresh = by_id(compiled);
    let mut swapped = 0;
    for device in devices {
        if let Some(new) = fresh.remove(&device.id) {
            device.swap_pipeline(new.pipeline, new.decoder);
            // The one call a message runs the pipeline too: the new one.
            if let (Some(push), Some(new)) = (&device.push, new.push) {
                push.ingester.set(new.ingester);
            }
            swapped += 1;
        }
    }
    swapped
}

/// Puts the newly compiled sessions of codec `codec` in place on every channel
/// that speaks it, and restarts those channels' links so each new session starts
/// with its own handshake; other links are not touched. Returns how many
/// channels got one. Blocking (takes the links' locks): call it off the async
/// workers.
pub fn swap_codec(devices: &[Arc<Device>], compiled: Compiled, codec: &str) -> usize {
    let mut fresh = by_id(compiled);
    let mut swapped = 0;
    for device in devices {
        let Some(new) = fresh.remove(&device.id) else {
            continue;
        };
        for (channel, compiled) in device.channels.iter().zip(new.channels) {
            if channel.session.get().health().component != codec {
                continue;
            }
            channel.session.set(compiled.session);
            channel
                .link
                .blocking_lock()
                .restart("a new version of its codec was deployed");
            swapped += 1;
        }
    }
    swapped
}

/// Puts the newly compiled decoders of component `decoder` in place on every
/// device that publishes by itself and reads with it: each takes the new one
/// from its next message, and no message is decoded by both (COMP-5).
/// Returns how many devices got one.
pub fn swap_decoder(devices: &[Arc<Device>], compiled: Compiled, decoder: &str) -> usize {
    let mut fresh = by_id(compiled);
    let mut swapped = 0;
    for device in devices {
        let (Some(push), Some(new)) = (&device.push, fresh.remove(&device.id)) else {
            continue;
        };
        if push.decoder.get().component() != decoder {
            continue;
        }
        if let Some(new) = new.push {
            // Each message takes one of the two, the ingester first: either is
            // the new version, or the old one until its own swap (COMP-5).
            push.ingester.set(new.ingester);
            push.decoder.set(new.decoder);
            swapped += 1;
        }
    }
    swapped
}
