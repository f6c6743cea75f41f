//! The MQTT contract: every topic the engine publishes to or subscribes to, and
//! every payload, as types. The client that carries them is the `uplink` module.
//!
//! | topic (under `collector.mqtt.topicPrefix`) | direction | payload |
//! |---|---|---|
//! | `{productId}/{deviceNum}/property/post` | up | [`payload`] |
//! | `{productId}/{deviceNum}/status/post` (retained) | up | [`entity_status`] |
//! | `{productId}/{deviceNum}/event/post/{event}` | up | [`entity_event`] |
//! | `collector/{clientId}/status/post` (retained, Last Will) | up | [`status`] |
//! | `collector.alarms.topic` | up | [`alarm_notice`] |
//! | `{productId}/{deviceNum}/property/set`, `.../function/invoke` | down | [`CommandRequest`] |
//! | `.../property/set/reply`, `.../function/invoke/reply` | up | [`CommandReply`] |
//!
//! With `payload: sparkplug-b` the device data, births and deaths and the
//! commands of a host use the Sparkplug B topics and payloads instead
//! ([`sparkplug`]); alarms, events and replies keep their JSON topics.

pub mod limits;
mod messages;
mod report;
mod request;
pub mod signature;
pub mod sparkplug;
mod topics;

pub use messages::{
    CommandReply, Notice, PushProblem, PushReply, PushStatus, ReplyStatus, alarm_notice,
    entity_event, entity_status, status,
};
pub use report::{ReportHeader, payload};
pub use request::{CommandRequest, EXPECTED_SHAPE, request_id_of};
pub use topics::{CommandTarget, DRIVER_PRODUCT, DeviceTopic, Topics};
