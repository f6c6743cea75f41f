//! Fuzz targets of every reader of outside input.
//!
//! Each [`Target`] takes one byte string and feeds it to one reader: a codec's
//! answer parsing (native builds of the guest codecs, one fresh session an
//! input), the Modbus TCP codec against tokio-modbus on the same bytes, the
//! configuration and pipeline readers, the WAL record decoder, the downlink
//! payloads and the HTTP request bodies. A target panics when a reader breaks
//! an invariant (FUZZ-1 to FUZZ-7 of `docs/fuzzing.md`): it panics itself (FUZZ-1), refuses without saying why, accepts what it
//! must not, or allocates more than its [`Budget`] for the input's size.
//!
//! Two drivers run them: libFuzzer (`cargo xtask fuzz`, the `fuzz` binary,
//! coverage-guided) and `tests/corpus.rs` on the stable toolchain (each
//! target's corpus and regressions, then deterministic mutations of them),
//! which `cargo xtask test` runs. See `docs/fuzzing.md`.

pub mod bounds;
mod codecs;
mod documents;
mod downlink;
mod http;
mod modbus_diff;
mod wal;

pub use bounds::Budget;
pub use codecs::{CodecSetup, SETUPS};
pub use modbus_diff::request as differential_request;

/// A fuzz target: a reader of outside input and what it may allocate.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub name: &'static str,
    /// Feeds one input to the reader, panicking when it breaks an invariant.
    pub feed: fn(&[u8]),
    pub budget: Budget,
    /// Makes what the reader keeps for the life of the process (the built-in
    /// protocols a configuration is read against), outside the measure.
    pub prepare: Option<fn()>,
}

/// Binary frames and records: 1 MiB (a session, its plan) and 64 bytes a byte.
const CODEC: Budget = Budget {
    fixed: 1 << 20,
    per_byte: 64,
};
/// YAML and JSON documents, whose trees take far more than their text: 4 MiB
/// and 512 bytes a byte.
const DOCUMENT: Budget = Budget {
    fixed: 4 << 20,
    per_byte: 512,
};

/// Every target, by name.
pub const TARGETS: &[Target] = &[
    Target {
        name: "modbus_tcp",
        feed: codecs::modbus_tcp,
        budget: CODEC,
        prepare: None,
    },
    Target {
        name: "modbus_rtu",
        feed: codecs::modbus_rtu,
        budget: CODEC,
        prepare: None,
    },
    Target {
        name: "s7",
        feed: codecs::s7,
        budget: CODEC,
        prepare: None,
    },
    Target {
        name: "mc",
        feed: codecs::mc,
        budget: CODEC,
        prepare: None,
    },
    Target {
        name: "modbus_tcp_vs_tokio_modbus",
        feed: modbus_diff::run,
        budget: CODEC,
        prepare: None,
    },
    Target {
        name: "device_config",
        feed: documents::device_config,
        budget: DOCUMENT,
        prepare: Some(documents::prepare),
    },
    Target {
        name: "pipeline",
        feed: documents::pipeline,
        budget: DOCUMENT,
        prepare: None,
    },
    Target {
        name: "wal_record",
        feed: wal::record,
        budget: CODEC,
        prepare: None,
    },
    Target {
        name: "downlink",
        feed: downlink::payload,
        budget: DOCUMENT,
        prepare: Some(documents::prepare),
    },
    Target {
        name: "http_body",
        feed: http::body,
        budget: DOCUMENT,
        prepare: None,
    },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

impl Target {
    /// Runs one input and checks what it allocated.
    ///
    /// # Panics
    /// When the reader breaks an invariant.
    pub fn run(&self, data: &[u8]) {
        if let Some(prepare) = self.prepare {
            prepare();
        }
        let usage = bounds::measure(|| (self.feed)(data));
        let allowed = self.budget.allowed(data.len());
        assert!(
            usage.peak <= allowed,
            "{}: {} bytes allocated at the peak for an input of {} bytes (allowed {allowed})",
            self.name,
            usage.peak,
            data.len()
        );
    }

    /// [`Target::run`] twice: the second run may keep nothing allocated (the
    /// first may fill caches that live as long as the process; FUZZ-4).
    ///
    /// # Panics
    /// When the reader breaks an invariant or keeps memory per input.
    pub fn run_checking_leaks(&self, data: &[u8]) {
        self.run(data);
        let usage = bounds::measure(|| self.run(data));
        assert!(
            usage.retained <= 0,
            "{}: {} bytes still allocated after an input of {} bytes",
            self.name,
            usage.retained,
            data.len()
        );
    }
}
