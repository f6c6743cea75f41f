//! Codec `hostile_codec`: speaks protocol `hostile` and misbehaves on purpose
//! when a channel is checked (`open`), so the engine's containment of a codec
//! can be tested. Channel setting `mode`: `trap` executes `unreachable`, `loop`
//! spins forever (the CPU budget must stop it), `memory` allocates until the
//! memory cap refuses; `calm` (the default) opens a session that plans no read.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

mod session;

use alloc::vec;
use alloc::vec::Vec;

use session::Calm;

sluice_guest::codec_component!(Calm);

fn protocols() -> Vec<ProtocolDeclaration> {
    vec![ProtocolDeclaration {
        name: "hostile".into(),
        transports: vec![Transport::Tcp],
        default_port: Some(1),
        settings: vec![declare(
            "mode",
            choices(&["calm", "trap", "loop", "memory"]),
            text("calm"),
            "how the codec misbehaves when a channel is checked",
        )],
        address_help: "anything".into(),
    }]
}
