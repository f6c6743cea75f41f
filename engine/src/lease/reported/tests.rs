use serde_json::json;

use super::*;
use crate::lease::{Announce, StateRow};

/// An engine with device `plc-1` of tenant 1 (identity `P/1`) read through
/// driver `modbus_tcp`, and tenants 0, 1 and 2.
struct Engine;

impl Owners for Engine {
    fn own_device(&self, id: &str) -> Option<u32> {
        (id == "plc-1").then_some(1)
    }

    fn own_driver(&self, tenant: u32, id: &str) -> bool {
        tenant == 1 && id == "modbus_tcp"
    }

    fn own_identity(&self, product_id: &str, device_num: &str) -> bool {
        (product_id, device_num) == ("P", "1")
    }

    fn knows_tenant(&self, tenant: u32) -> bool {
        tenant <= 2
    }
}

fn batch(heartbeats: serde_json::Value) -> HeartbeatBatch {
    serde_json::from_value(json!({ "heartbeats": heartbeats })).expect("a batch")
}

fn sender(scope: Scope) -> Sender<'static> {
    Sender {
        scope,
        tenant: scope.tenant().unwrap_or(0),
        via: "http",
    }
}

fn refusal(heartbeats: serde_json::Value, scope: Scope) -> Refused {
    renewals(&batch(heartbeats), sender(scope), &Engine).expect_err("refused")
}

#[test]
fn a_driver_and_its_device_become_renewals_with_their_leases() {
    let taken = renewals(
        &batch(json!([
            {"type": "driver", "id": "opcua", "state": "online"},
            {"type": "device", "id": "m-7", "parent": "opcua", "state": "fault",
             "timeout": 90, "productId": "meter", "deviceNum": "7"},
            {"type": "device", "id": "m-8", "parent": "opcua", "state": "online",
             "timeout": 1500, "timeoutUnit": "ms"},
        ])),
        sender(Scope::Tenant(2)),
        &Engine,
    )
    .expect("taken");
    let driver = &taken[0];
    assert_eq!(
        (driver.entity_type, driver.tenant_id, driver.state),
        (EntityType::Driver, 2, EntityState::Online)
    );
    assert_eq!(
        (driver.timeout_seconds, driver.timeout_source),
        (45, TimeoutSource::System)
    );
    let device = &taken[1];
    assert_eq!(
        (
            device.parent_id.as_str(),
            device.state,
            device.timeout_seconds
        ),
        ("opcua", EntityState::Fault, 90)
    );
    assert_eq!(device.timeout_source, TimeoutSource::Driver);
    assert_eq!(
        device.extension,
        json!({"reportedBy": "http", "productId": "meter", "deviceNum": "7"})
    );
    // 1.5 s rounds up to 2: a lease never ends before the collector said.
    assert_eq!(taken[2].timeout_seconds, 2);
    assert_eq!(taken[2].extension, json!({"reportedBy": "http"}));
}

#[test]
fn the_admin_names_any_configured_tenant_and_a_tenant_only_its_own() {
    let one = json!([{"type": "driver", "id": "opcua", "state": "online", "tenantId": 1}]);
    let taken = renewals(&batch(one.clone()), sender(Scope::All), &Engine).expect("admin");
    assert_eq!(taken[0].tenant_id, 1);
    assert_eq!(
        refusal(one, Scope::Tenant(2)),
        Refused::Forbidden("heartbeats[0]: tenant 1 is not the tenant of this token or key".into())
    );
    assert_eq!(
        refusal(
            json!([{"type": "driver", "id": "opcua", "state": "online", "tenantId": 9}]),
            Scope::All
        ),
        Refused::Invalid("heartbeats[0]: no tenant 9 is configured".into())
    );
}

#[test]
fn what_the_engine_collects_itself_is_not_reported_from_outside() {
    let own_device = json!([{"type": "device", "id": "plc-1", "parent": "x", "state": "online"}]);
    assert!(matches!(
        refusal(own_device.clone(), Scope::Tenant(1)),
        Refused::Conflict(m) if m.contains("device `plc-1` is collected by this engine")
    ));
    assert!(matches!(
        refusal(own_device, Scope::Tenant(2)),
        Refused::Forbidden(m) if m.contains("belongs to another tenant")
    ));
    assert!(matches!(
        refusal(json!([{"type": "driver", "id": "modbus_tcp", "state": "online"}]), Scope::Tenant(1)),
        Refused::Conflict(m) if m.contains("a driver of this engine")
    ));
    // Tenant 2 runs no modbus_tcp here: an outside driver of that name is its own.
    assert!(
        renewals(
            &batch(json!([{"type": "driver", "id": "modbus_tcp", "state": "online"}])),
            sender(Scope::Tenant(2)),
            &Engine
        )
        .is_ok()
    );
    assert!(matches!(
        refusal(
            json!([{"type": "device", "id": "m", "parent": "d", "state": "online",
                    "productId": "P", "deviceNum": "1"}]),
            Scope::All
        ),
        Refused::Conflict(m) if m.contains("`P/1` is the MQTT identity of a device of this engine")
    ));
}

#[test]
fn every_mistake_is_named_with_its_heartbeat() {
    let cases = [
        (
            json!({"type": "sensor", "id": "a", "state": "online"}),
            "`type` is `sensor`",
        ),
        (
            json!({"type": "driver", "id": "", "state": "online"}),
            "`id` must be 1 to 128 bytes",
        ),
        (
            json!({"type": "driver", "id": "a/b", "state": "online"}),
            "may not hold `/`",
        ),
        (
            json!({"type": "driver", "id": "a", "state": "unknown"}),
            "`state` is `unknown`",
        ),
        (
            json!({"type": "device", "id": "a", "state": "online"}),
            "needs its driver in `parent`",
        ),
        (
            json!({"type": "driver", "id": "a", "parent": "b", "state": "online"}),
            "a driver has no `parent`",
        ),
        (
            json!({"type": "driver", "id": "a", "state": "online", "timeout": 0}),
            "a lease lasts 1 s",
        ),
        (
            json!({"type": "driver", "id": "a", "state": "online", "timeout": 8, "timeoutUnit": "d"}),
            "`timeoutUnit` is `d`",
        ),
        (
            json!({"type": "driver", "id": "a", "state": "online", "timeoutUnit": "s"}),
            "`timeoutUnit` without `timeout`",
        ),
        (
            json!({"type": "driver", "id": "a", "state": "online", "timeout": 200, "timeoutUnit": "h"}),
            "a lease lasts 1 s",
        ),
        (
            json!({"type": "device", "id": "a", "parent": "b", "state": "online", "productId": "P"}),
            "go together",
        ),
        (
            json!({"type": "driver", "id": "a", "state": "online", "productId": "P", "deviceNum": "2"}),
            "takes no `productId`",
        ),
    ];
    for (heartbeat, expected) in cases {
        let ok = json!({"type": "driver", "id": "fine", "state": "online"});
        let refused = refusal(json!([ok, heartbeat]), Scope::All);
        assert!(
            matches!(&refused, Refused::Invalid(m) if m.starts_with("heartbeats[1]: ") && m.contains(expected)),
            "{heartbeat}: {refused:?}"
        );
    }
    assert!(matches!(
        refusal(json!([]), Scope::All),
        Refused::Invalid(m) if m.contains("a batch takes 1 to 1000")
    ));
    let unknown_key = serde_json::from_value::<HeartbeatBatch>(
        json!({"heartbeats": [{"type": "driver", "id": "a", "state": "online", "color": 1}]}),
    );
    assert!(unknown_key.is_err());
}

#[test]
fn a_reported_row_is_announced_where_its_heartbeats_said() {
    let mut row = StateRow {
        entity_type: EntityType::Device,
        entity_id: "m-7".into(),
        parent_id: "opcua".into(),
        state: EntityState::Online,
        last_state: EntityState::Offline,
        last_heartbeat: 0,
        expire_time: 0,
        lease_version: 1,
        timeout_seconds: 90,
        timeout_source: TimeoutSource::Driver,
        extension: json!({}),
        tenant_id: 1,
        expired_state: EntityState::Offline,
    };
    assert_eq!(Announce::of_reported(&row), None, "the engine's own row");
    row.extension = json!({"reportedBy": "mqtt", "productId": "meter", "deviceNum": "7"});
    row.entity_type = EntityType::Device;
    assert_eq!(
        Announce::of_reported(&row),
        Some(Announce::device("meter", "7"))
    );
    row.extension = json!({"reportedBy": "mqtt"});
    assert_eq!(
        Announce::of_reported(&row),
        None,
        "a device reported with no identity"
    );
    row.entity_type = EntityType::Driver;
    row.tenant_id = 3;
    row.entity_id = "opcua".into();
    assert_eq!(
        Announce::of_reported(&row),
        Some(Announce::driver(3, "opcua"))
    );
}
