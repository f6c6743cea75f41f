//! The built-in pipeline stages as plain Rust over [`Columns`], shared by the
//! one-stage components (`components/stages/NAME`) and by `chain`, which runs any
//! sequence of them in one call.

mod chain;
mod check_range;
mod deadband;
mod decode;
mod scale;
mod swap_bytes;

use alloc::string::String;
use alloc::vec::Vec;

pub use chain::{Chain, Plug, Unplugged};
pub use check_range::CheckRange;
pub use deadband::Deadband;
pub use decode::Decode;
pub use scale::Scale;
pub use swap_bytes::SwapBytes;

use crate::columns::Columns;
use crate::numeric::{ByteOrder, DataType};
use crate::settings::{SettingValue, unknown_key};

/// What a stage knows of a tag.
#[derive(Debug, Clone)]
pub struct Tag<'a> {
    pub data_type: DataType,
    /// The elements of an array tag; `None` for a tag of one value.
    pub array_len: Option<u32>,
    pub byte_order: ByteOrder,
    pub factor: f64,
    pub offset: f64,
    pub deadband: f64,
    /// The further keys of the tag block.
    pub settings: Vec<(&'a str, SettingValue<'a>)>,
}

/// A configuration mistake, as the WIT `config-error` carries it.
#[derive(Debug, Clone, PartialEq)]
pub struct Issue {
    pub tag: Option<u32>,
    pub key: String,
    pub message: String,
}

impl Issue {
    pub fn new(tag: Option<u32>, key: &str, message: String) -> Self {
        Self {
            tag,
            key: key.into(),
            message,
        }
    }
}

/// A stage's settings, by key.
pub type Settings<'a> = [(&'a str, SettingValue<'a>)];

/// A stage configured for one device's tags.
pub trait Stage: Sized {
    /// Checks the stage settings and the tags.
    ///
    /// # Errors
    /// Every mistake found.
    fn create(settings: &Settings<'_>, tags: &[Tag<'_>]) -> Result<Self, Vec<Issue>>;

    /// Processes one round's samples in place.
    fn process(&self, batch: &mut Columns);

    /// Clears memory kept between batches.
    fn reset(&self) {}
}

/// The names the built-in stages are registered under, in the order of [`Builtin`].
pub const NAMES: [&str; 5] = ["swap_bytes", "decode", "scale", "check_range", "deadband"];

/// Any one built-in stage.
pub enum Builtin {
    SwapBytes(SwapBytes),
    Decode(Decode),
    Scale(Scale),
    CheckRange(CheckRange),
    Deadband(Deadband),
}

impl Builtin {
    /// The stage registered as `name`, configured; `None` for a name that is not built in.
    pub fn create(
        name: &str,
        settings: &Settings<'_>,
        tags: &[Tag<'_>],
    ) -> Option<Result<Self, Vec<Issue>>> {
        Some(match name {
            "swap_bytes" => SwapBytes::create(settings, tags).map(Self::SwapBytes),
            "decode" => Decode::create(settings, tags).map(Self::Decode),
            "scale" => Scale::create(settings, tags).map(Self::Scale),
            "check_range" => CheckRange::create(settings, tags).map(Self::CheckRange),
            "deadband" => Deadband::create(settings, tags).map(Self::Deadband),
            _ => return None,
        })
    }

    pub fn process(&self, batch: &mut Columns) {
        match self {
            Self::SwapBytes(s) => s.process(batch),
            Self::Decode(s) => s.process(batch),
            Self::Scale(s) => s.process(batch),
            Self::CheckRange(s) => s.process(batch),
            Self::Deadband(s) => s.process(batch),
        }
    }

    pub fn reset(&self) {
        match self {
            Self::SwapBytes(s) => s.reset(),
            Self::Decode(s) => s.reset(),
            Self::Scale(s) => s.reset(),
            Self::CheckRange(s) => s.reset(),
            Self::Deadband(s) => s.reset(),
        }
    }
}

/// Refuses every setting: for the stages that take none.
fn no_settings(settings: &Settings<'_>) -> Vec<Issue> {
    settings
        .iter()
        .map(|(key, _)| Issue::new(None, key, unknown_key(key, &[])))
        .collect()
}

#[cfg(test)]
mod tests;
