//! The engine's MQTT client id: the configured one, or one made up the first time
//! the engine runs on a data directory and kept there (invariant S1 of
//! `docs/commands.md`: the broker keeps the engine's session, and the downlink
//! messages sent while it is away, under this id).

use std::io::Read;
use std::path::Path;

use anyhow::Context;

use crate::config::GatewayConfig;

/// The file of the data directory that keeps a made-up client id.
const CLIENT_ID_FILE: &str = "client-id";

/// The client id the engine connects with.
///
/// # Errors
/// The kept id cannot be read, or a new one cannot be written.
pub(super) fn client_id(config: &GatewayConfig) -> anyhow::Result<String> {
    if let Some(configured) = &config.collector.mqtt.client_id {
        return Ok(configured.clone());
    }
    let dir = Path::new(&config.collector.wal.dir);
    let path = dir.join(CLIENT_ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(kept) if !kept.trim().is_empty() => return Ok(kept.trim().to_owned()),
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(error).with_context(|| format!("cannot read {}", path.display()));
        }
    }
    let made_up = format!("sluice-{}", random_hex()?);
    let partial = dir.join(format!("{CLIENT_ID_FILE}.partial"));
    std::fs::write(&partial, &made_up)
        .and_then(|()| std::fs::rename(&partial, &path))
        .with_context(|| format!("cannot keep the client id in {}", path.display()))?;
    tracing::info!(client_id = %made_up, "made up an MQTT client id for this data directory");
    Ok(made_up)
}

/// Twelve random hex digits: unique enough that no two engines meet on a broker.
fn random_hex() -> anyhow::Result<String> {
    let mut bytes = [0u8; 6];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .context("cannot read /dev/urandom for a client id")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
