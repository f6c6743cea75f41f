//! The compiler's own rules, without components: lease lengths.

use super::lease_length;
use crate::config::{TagConfig, load_str};
use crate::model::TimeoutSource;

const UNPOLLED_LEASE_SECONDS: u64 = 900;

#[test]
fn lease_length_priority_device_then_product_then_polling() {
    let config = load_str(
        "t.yaml",
        "products:\n  - { productId: P, stateTimeout: 40 }\ndevices:\n  - deviceId: own\n    productId: P\n    deviceNum: A\n    stateTimeout: 7\n    channels:\n      - channelId: c\n        protocol: modbus-tcp\n        host: 127.0.0.1\n        tags: [{ key: t, address: '40001', dataType: INT16, periodMs: 1000 }]\n  - deviceId: product\n    productId: P\n    deviceNum: B\n    channels:\n      - channelId: c\n        protocol: modbus-tcp\n        host: 127.0.0.1\n        tags: [{ key: t, address: '40001', dataType: INT16, periodMs: 1000 }]\n  - deviceId: polled\n    productId: Q\n    deviceNum: C\n    channels:\n      - channelId: c\n        protocol: modbus-tcp\n        host: 127.0.0.1\n        tags: [{ key: t, address: '40001', dataType: INT16, periodMs: 500 }, { key: w, address: '40002', dataType: INT16, periodMs: 0, access: W }]\n  - deviceId: idle\n    productId: Q\n    deviceNum: D\n    channels:\n      - channelId: c\n        protocol: modbus-tcp\n        host: 127.0.0.1\n        tags: [{ key: w, address: '40002', dataType: INT16, periodMs: 0, access: W }]\n",
    )
    .expect("valid");
    let length = |id: &str| {
        let device = config.device(id).expect("device");
        let tags: Vec<&TagConfig> = device.tags().collect();
        let product = config
            .product(&device.product_id)
            .and_then(|p| p.state_timeout_s);
        lease_length(device, product, &tags, 3000)
    };
    assert_eq!(length("own"), (7, TimeoutSource::Device));
    assert_eq!(length("product"), (40, TimeoutSource::Profile));
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
