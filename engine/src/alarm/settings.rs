//! How alarms are delivered, as the configuration describes it.

use super::delivery::{DeliverySettings, QuietHours, Recipient};
use crate::config::GatewayConfig;
use crate::uplink::Uplink;

/// How alarms are delivered: the alarm topic under the uplink's prefix, the
/// escalation delay, and each tenant's recipients with their quiet hours.
pub fn delivery_settings(config: &GatewayConfig, uplink: &Uplink) -> DeliverySettings {
    let alarms = &config.collector.alarms;
    let recipients = config
        .tenants
        .iter()
        .map(|tenant| {
            let list = tenant
                .recipients
                .iter()
                .map(|r| Recipient {
                    name: r.name.clone(),
                    quiet_hours: r.quiet_hours.map(|(start, end)| QuietHours {
                        start,
                        end,
                        utc_offset_min: r.utc_offset_min.unwrap_or(alarms.utc_offset_min),
                    }),
                })
                .collect();
            (tenant.tenant_id, list)
        })
        .collect();
    DeliverySettings {
        topic: uplink.topics().under_prefix(&alarms.topic),
        escalate_after_ms: (alarms.escalate_after_sec > 0).then(|| {
            i64::try_from(alarms.escalate_after_sec.saturating_mul(1000)).unwrap_or(i64::MAX)
        }),
        recipients,
    }
}
