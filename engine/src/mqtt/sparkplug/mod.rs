//! Eclipse Sparkplug B on the uplink (`collector.mqtt.payload: sparkplug-b`):
//! topics, payloads (protobuf) and the metrics of a device's tags. The session
//! rules (bdSeq, seq, births before data, rebirth) are kept by the publisher,
//! see `docs/sparkplug.md`.

mod command;
mod messages;
mod metric;
mod proto;
mod topics;

pub use command::{
    CommandError, DeviceCommand, MetricRef, MetricWrite, asks_rebirth, device_command,
};
pub use messages::{
    BD_SEQ, DeviceBirth, REBIRTH, carries_values, device_birth, device_data, device_death,
    historical, made_at, node_birth, node_death, sequenced,
};
pub use metric::{MetricTable, MetricType, QUALITY, alias};
pub use proto::{Metric, MetricValue, Payload, PropertySet, PropertyValue, PropertyValueKind};
pub use topics::{NAMESPACE, SparkplugTopics};

#[cfg(test)]
mod tests;
