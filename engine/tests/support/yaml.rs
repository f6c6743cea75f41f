//! Configuration text the tests and the benches write for the engine.

/// One `devices` entry with a Modbus TCP channel `main` on `127.0.0.1:port`:
/// `channel` adds keys to the channel (lines indented by 8), `tags` lists its
/// tags (lines indented by 10, starting with `- `).
pub fn modbus_device(id: &str, port: u16, channel: &str, tags: &str) -> String {
    format!(
        "  - deviceId: {id}
    productId: P
    deviceNum: {id}
    channels:
      - channelId: main
        protocol: modbus-tcp
        host: 127.0.0.1
        port: {port}
{channel}        tags:
{tags}"
    )
}
