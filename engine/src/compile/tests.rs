//! The compiler: lease lengths, and compiles beside a quarantined sandbox.

use super::lease_length;
use crate::config::TagConfig;
use crate::config::tests::load_str;
use crate::model::TimeoutSource;
use std::sync::Arc;

const UNPOLLED_LEASE_SECONDS: u64 = 900;

#[test]
fn lease_length_priority_device_then_product_then_driver_then_polling() {
    let config = load_str(
        "t.yaml",
        "products:\n  - { productId: P, stateTimeout: 40 }\ndevices:\n  - deviceId: own\n    productId: P\n    deviceNum: A\n    stateTimeout: 7\n    channels:\n      - channelId: c\n        protocol: modbus-tcp\n        host: 127.0.0.1\n        tags: [{ key: t, address: '40001', dataType: INT16, periodMs: 1000 }]\n  - deviceId: product\n    productId: P\n    deviceNum: B\n    channels:\n      - channelId: c\n        protocol: modbus-tcp\n        host: 127.0.0.1\n        tags: [{ key: t, address: '40001', dataType: INT16, periodMs: 1000 }]\n  - deviceId: polled\n    productId: Q\n    deviceNum: C\n    channels:\n      - channelId: c\n        protocol: modbus-tcp\n        host: 127.0.0.1\n        tags: [{ key: t, address: '40001', dataType: INT16, periodMs: 500 }, { key: w, address: '40002', dataType: INT16, periodMs: 0, access: W }]\n  - deviceId: idle\n    productId: Q\n    deviceNum: D\n    channels:\n      - channelId: c\n        protocol: modbus-tcp\n        host: 127.0.0.1\n        tags: [{ key: w, address: '40002', dataType: INT16, periodMs: 0, access: W }]\n",
    )
    .expect("valid");
    let lengths = |id: &str, driver: Option<u64>| {
        let device = config.device(id).expect("device");
        let tags: Vec<&TagConfig> = device.tags().collect();
        let product = config
            .product(&device.product_id)
            .and_then(|p| p.state_timeout_s);
        lease_length(device, [product, driver], &tags, 3000)
    };
    let length = |id: &str| lengths(id, None);
    assert_eq!(length("own"), (7, TimeoutSource::Device));
    assert_eq!(lengths("own", Some(60)), (7, TimeoutSource::Device));
    assert_eq!(length("product"), (40, TimeoutSource::Profile));
    assert_eq!(lengths("product", Some(60)), (40, TimeoutSource::Profile));
    assert_eq!(lengths("polled", Some(60)), (60, TimeoutSource::Driver));
    assert_eq!(lengths("idle", Some(60)), (60, TimeoutSource::Driver));
    assert_eq!(
        length("polled"),
        (5, TimeoutSource::System),
        "3 x 500 ms + 3 s, rounded up"
    );
    assert_eq!(
        length("idle"),
        (UNPOLLED_LEASE_SECONDS, TimeoutSource::System)
    );
}

/// A tenant whose rules sandbox is quarantined does not stop a compile: a device
/// reload (the running sandboxes reused) does not call it, and a deployment
/// compiles in sandboxes of its own.
#[test]
fn a_quarantined_sandbox_does_not_stop_a_compile() {
    use super::{Loaded, Pools, build};
    use crate::model::SettingValue;
    use crate::pipeline::PipelineSet;
    use crate::runtime::{ComponentKind, Registry, Runtime, RuntimeConfig};

    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let registry = Registry::with_builtins(runtime).expect("registry");
    let hostile = std::fs::read(
        std::path::Path::new(env!("SLUICE_TEST_COMPONENTS")).join("hostile_rules.wasm"),
    )
    .expect("hostile_rules built for the tests");
    let component = registry
        .install(ComponentKind::Rules, "hostile_rules", "1", &hostile)
        .expect("install");
    let sandbox = registry
        .runtime()
        .rules_pool(
            &component,
            crate::runtime::Limits {
                quarantine_after: 1,
                ..crate::runtime::Limits::DEFAULT
            },
        )
        .expect("pool");
    let trap = crate::model::Setting {
        key: "mode".into(),
        value: SettingValue::Text("trap".into()),
    };
    let evaluator = sandbox
        .evaluator(&[trap], Arc::default())
        .expect("evaluator");
    assert!(evaluator.on_event("BOOM", 0, None).is_err(), "it traps");
    assert!(sandbox.quarantined());

    let config = load_str(
        "gw.yaml",
        "tenants:\n  - { tenantId: 1, name: careless, rules: hostile_rules }\n  - { tenantId: 2, name: careful }\ndevices:\n  - { deviceId: b, productId: P, deviceNum: B, tenantId: 2, channels: [ { channelId: c, protocol: modbus-tcp, host: 127.0.0.1, tags: [ { key: t, address: '40001', dataType: INT16 } ] } ] }\n",
    )
    .expect("valid");
    let loaded = || Loaded {
        file: "gw.yaml".into(),
        config: config.clone(),
        pipelines: PipelineSet::builtin().expect("builtin"),
        conflicts: Vec::new(),
    };
    let mut running = Pools::new();
    running.reuse_rules(1, std::sync::Arc::clone(&sandbox));
    let reload = build(loaded(), &registry, &mut running, &|_| true);
    assert!(reload.is_ok(), "{:?}", reload.err());
    let deployment = build(loaded(), &registry, &mut Pools::new(), &|_| true);
    assert!(deployment.is_ok(), "{:?}", deployment.err());
}
