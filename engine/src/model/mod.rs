//! The data every layer shares, in the engine's own types: samples and tags as
//! they flow between the engine and its components (the runtime converts them to
//! and from the WIT types at the boundary), and the vocabularies of the lifecycles
//! (alarm states, command statuses, entity states) with their whitelists.

mod alarm;
mod command;
mod entity;
mod frame;
mod protocol;
mod sample;
mod scope;
mod secret;
mod serial;
mod shared_lists;
mod tag;
mod whitelist;

pub use alarm::{AlarmAction, AlarmState, Signal, SignalKind};
pub use command::{CommandAction, CommandKind, CommandStatus, ReceiptResult, result_code};
pub use entity::{
    EntityKey, EntityState, EntityType, PlainRenewal, Renewal, StateFilter, StateRow,
    TimeoutSource, Transition,
};
pub use frame::{DeviceError, FrameError, FrameSize, PlannedRead};
pub use protocol::{
    ENGINE_CHANNEL_KEYS, ProtocolInfo, ProtocolTaken, Protocols, SettingDecl, SettingType,
    Transport,
};
pub use sample::{Batch, Quality, RawValues, Sample, Span, Value};
pub use scope::Scope;
pub use secret::Secret;
pub use serial::{Parity, SerialLine};
pub use shared_lists::{ListKey, SharedLists};
pub use tag::{Access, ByteOrder, ConfigIssue, DataType, Setting, SettingValue, TagSpec};
pub use whitelist::{ActionNotAllowed, Transitions, Whitelist};
