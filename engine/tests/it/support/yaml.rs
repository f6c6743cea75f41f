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

/// The tokens of [`two_tenants`].
pub const PLANT_TOKEN: &str = "plant-token";
pub const HOMES_TOKEN: &str = "homes-token";

/// The pipeline `with-alarms` of [`two_tenants`]' boiler: a `temp` above 90
/// raises `BOILER_HOT`, below 80 clears it.
pub const BOILER_PIPELINE: &str = "name: with-alarms
stages:
  - use: swap_bytes
  - use: decode
  - use: scale
alarms:
  thresholds:
    - { tag: temp, above: 90, clearAt: 80, ruleKey: BOILER_HOT }
";

/// After the `collector:` section `collector`: tenants 1 (`plant`) and 2
/// (`homes`) with their tokens, device `boiler` of tenant 1 on Modbus port
/// `modbus` with pipeline `with-alarms` (`boiler` adds keys to the device, lines
/// indented by 4; `tags` its tags, indented by 10, a `temp` among them), and
/// device `flat-7` of tenant 2 on port `nobody`, where nothing answers.
pub fn two_tenants(
    collector: &str,
    (modbus, nobody): (u16, u16),
    boiler: &str,
    tags: &str,
) -> String {
    format!(
        "{collector}tenants:
  - {{ tenantId: 1, name: plant, tokens: [{PLANT_TOKEN}] }}
  - {{ tenantId: 2, name: homes, tokens: [{HOMES_TOKEN}] }}
devices:
  - deviceId: boiler
    productId: P
    deviceNum: B1
    tenantId: 1
    pipeline: with-alarms
{boiler}    channels:
      - channelId: main
        protocol: modbus-tcp
        host: 127.0.0.1
        port: {modbus}
        readTimeoutMs: 300
        tags:
{tags}  - deviceId: flat-7
    productId: H
    deviceNum: F7
    tenantId: 2
    channels:
      - channelId: main
        protocol: modbus-tcp
        host: 127.0.0.1
        port: {nobody}
        readTimeoutMs: 300
        tags:
          - {{ key: door, address: '40002', dataType: UINT16, periodMs: 5000 }}
"
    )
}
