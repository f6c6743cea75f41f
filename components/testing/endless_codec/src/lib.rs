//! Codec `endless_codec`: never finishes saying what it speaks (`describe`
//! spins forever), so the engine's refusal of such a codec at upload can be
//! tested. Its sessions are `hostile_codec`'s.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

#[path = "../../hostile_codec/src/session.rs"]
mod session;

use alloc::vec::Vec;

use session::Calm;

sluice_guest::codec_component!(Calm);

fn protocols() -> Vec<ProtocolDeclaration> {
    loop {
        core::hint::spin_loop();
    }
}
