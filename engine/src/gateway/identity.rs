//! Who the engine is. Its node id names it among the engines that share a
//! database: the owner of the devices it polls, the node of its command claims
//! (`--node-id`, else `SLUICE_NODE_ID`, else `collector.commands.nodeId`, else
//! the host name). Its MQTT client id is the configured one, or one made up the
//! first time the engine runs on a data directory and kept there (CMD-S1
//! of `docs/commands.md`: the broker keeps the engine's session, and the
//! downlink messages sent while it is away, under this id); engines sharing a
//! database append their node id, so that one configuration serves them all.

use std::path::Path;

use super::kept::{kept, random_hex};
use crate::config::{GatewayConfig, StoreKind, UplinkPayload};

/// The file of the data directory that keeps a made-up client id.
const CLIENT_ID_FILE: &str = "client-id";

/// The environment variable that names the node when `--node-id` does not.
pub const NODE_ID_VAR: &str = "SLUICE_NODE_ID";

/// The engine's node id: `flag`, else [`NODE_ID_VAR`], else the configured
/// `collector.commands.nodeId`, else the host name.
pub(super) fn node_id(config: &GatewayConfig, flag: Option<&str>) -> String {
    let given = |value: Option<String>| value.filter(|v| !v.trim().is_empty());
    given(flag.map(str::to_owned))
        .or_else(|| given(std::env::var(NODE_ID_VAR).ok()))
        .or_else(|| given(config.collector.commands.node_id.clone()))
        .or_else(|| given(host_name()))
        .unwrap_or_else(|| "sluice".to_owned())
}

fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
}

/// The client id the engine connects with; `node` is appended when the state
/// is shared.
///
/// # Errors
/// The kept id cannot be read, or a new one cannot be written.
pub(super) fn client_id(config: &GatewayConfig, node: &str) -> anyhow::Result<String> {
    let own = own_client_id(config)?;
    Ok(match config.collector.store.kind {
        StoreKind::Postgres => format!("{own}-{node}"),
        StoreKind::Redb => own,
    })
}

/// The Sparkplug edge node id: the configured one, with `node` appended when
/// the state is shared (each engine is its own edge node); empty with JSON.
pub(super) fn edge_node_id(config: &GatewayConfig, node: &str) -> String {
    match (&config.collector.mqtt.payload, config.collector.store.kind) {
        (UplinkPayload::Json, _) => String::new(),
        (UplinkPayload::SparkplugB(spb), StoreKind::Redb) => spb.edge_node_id.clone(),
        (UplinkPayload::SparkplugB(spb), StoreKind::Postgres) => {
            format!("{}-{node}", spb.edge_node_id)
        }
    }
}

fn own_client_id(config: &GatewayConfig) -> anyhow::Result<String> {
    if let Some(configured) = &config.collector.mqtt.client_id {
        return Ok(configured.clone());
    }
    let path = Path::new(&config.collector.wal.dir).join(CLIENT_ID_FILE);
    let (id, made) = kept(&path, || Ok(format!("sluice-{}", random_hex(6)?)))?;
    if made {
        tracing::info!(client_id = %id, "made up an MQTT client id for this data directory");
    }
    Ok(id)
}
