//! Who a downlink message comes from (SEC-3 and SEC-4 of `docs/security.md`),
//! checked before anything of it is used:
//! its signature (see [`crate::mqtt::signature`]) made with the operator's key
//! or with a key of the tenant whose device the topic names, over the topic and
//! the payload, with a `ts` inside the window. Unsigned messages are refused
//! unless `collector.downlink.requireSignature` is false (the operator vouches
//! for the broker's ACLs). A message signed wrongly is refused either way.

use std::collections::HashMap;

use serde_json::Value as Json;
use sha2::{Digest, Sha256};

use crate::config::{DownlinkConfig, GatewayConfig};
use crate::model::{Scope, Secret};
use crate::mqtt::limits::{MAX_REQUEST_ID, check_length};
use crate::mqtt::signature::{self, Signed};
use crate::store::{Seen, SeenRequests, StoreError};

/// Who a downlink message acts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authority {
    /// Signed with the operator's key: everything an admin token may do.
    Operator,
    /// Signed with a key of this tenant: what the tenant's token may do.
    Tenant(u32),
    /// Unsigned, from a broker the operator trusts (`requireSignature: false`):
    /// commands as before signatures, configurations that widen nothing.
    Broker,
}

impl Authority {
    /// Whose devices it reaches.
    pub fn scope(self) -> Scope {
        match self {
            Authority::Operator | Authority::Broker => Scope::All,
            Authority::Tenant(tenant) => Scope::Tenant(tenant),
        }
    }

    /// Who acted, for records and logs.
    pub fn actor(self) -> String {
        match self {
            Authority::Operator => "mqtt:operator".to_owned(),
            Authority::Tenant(tenant) => format!("mqtt:tenant:{tenant}"),
            Authority::Broker => "mqtt".to_owned(),
        }
    }
}

/// A downlink message let in.
#[derive(Debug, Clone)]
pub struct Admitted {
    pub authority: Authority,
    /// The payload without its signature: what to read.
    pub body: Vec<u8>,
    /// The signed message's `requestId` (none for an unsigned one).
    pub request_id: Option<String>,
    /// A digest of the topic and the body.
    pub digest: [u8; 32],
}

/// The downlink's keys and rules.
#[derive(Debug)]
pub struct DownlinkGuard {
    require_signature: bool,
    /// Sparkplug DCMD and NCMD are taken (they carry no signature).
    unsigned_sparkplug: bool,
    window_ms: i64,
    operator: Vec<Secret>,
    tenants: HashMap<u32, Vec<Secret>>,
    /// Signed messages handled, for those whose repeat must not act twice.
    seen: Option<SeenRequests>,
}

impl DownlinkGuard {
    /// The guard of `config`'s downlink; `seen` keeps what was handled.
    pub fn new(config: &GatewayConfig, seen: Option<SeenRequests>) -> Self {
        let downlink: &DownlinkConfig = &config.collector.downlink;
        Self {
            require_signature: downlink.require_signature,
            unsigned_sparkplug: downlink.takes_unsigned_sparkplug(),
            window_ms: i64::try_from(downlink.window_sec.saturating_mul(1000)).unwrap_or(i64::MAX),
            operator: downlink
                .operator_keys
                .as_ref()
                .map(|f| f.keys.clone())
                .unwrap_or_default(),
            tenants: config
                .tenants
                .iter()
                .filter_map(|t| {
                    t.downlink_keys
                        .as_ref()
                        .map(|f| (t.tenant_id, f.keys.clone()))
                })
                .collect(),
            seen,
        }
    }

    /// Whether Sparkplug DCMD and NCMD, which carry no signature, are taken
    /// (`trustedBroker`, or no signature required).
    pub fn takes_unsigned_sparkplug(&self) -> bool {
        self.unsigned_sparkplug
    }

    /// Says at start how the downlink is guarded.
    pub fn announce(&self) {
        if !self.require_signature {
            tracing::warn!(
                "collector.downlink.requireSignature is false: unsigned downlink messages \
                 (property/set, function/invoke, config/push, Sparkplug DCMD and NCMD) are \
                 accepted from anyone the broker lets publish; its ACLs are all that guards \
                 the devices"
            );
        } else if self.unsigned_sparkplug {
            tracing::warn!(
                "collector.downlink.trustedBroker is true: Sparkplug DCMD and NCMD, which \
                 carry no signature, are accepted from anyone the broker lets publish them"
            );
        }
        if self.require_signature && self.operator.is_empty() && self.tenants.is_empty() {
            tracing::warn!(
                "downlink messages must be signed, and no key is configured \
                 (collector.downlink.operatorKeyFile, tenants[].downlinkKeyFile): every \
                 downlink message over MQTT will be refused"
            );
        } else if self.require_signature {
            tracing::info!(
                tenants_with_keys = self.tenants.len(),
                operator_key = !self.operator.is_empty(),
                "downlink messages must be signed"
            );
        }
    }

    /// Lets in a message on `topic` for a device of `tenant` (none: a device
    /// the engine does not know, which only the operator can address), or says
    /// why not.
    ///
    /// # Errors
    /// The reason, for the reply: no signature where one is required, a
    /// misplaced or wrong one, a `ts` outside the window, no `requestId`.
    pub fn admit(
        &self,
        topic: &str,
        payload: &[u8],
        tenant: Option<u32>,
        now_ms: i64,
    ) -> Result<Admitted, String> {
        let signed = signature::split(payload).map_err(|e| e.to_string())?;
        let Some(signed) = signed else {
            if self.require_signature {
                return Err(
                    "unsigned: a downlink message must be signed with the operator's \
                            key or its device's tenant's key (see docs/security.md)"
                        .to_owned(),
                );
            }
            return Ok(Admitted {
                authority: Authority::Broker,
                digest: digest(topic, payload),
                body: payload.to_vec(),
                request_id: None,
            });
        };
        let authority = self
            .signer(topic, &signed, tenant)
            .ok_or_else(|| match tenant {
                Some(tenant) => {
                    format!("the signature matches no key of the operator or of tenant {tenant}")
                }
                None => "the signature matches no key of the operator".to_owned(),
            })?;
        let (request_id, ts) = stamp(&signed.body)?;
        if now_ms.abs_diff(ts) > self.window_ms.unsigned_abs() {
            return Err(format!(
                "`ts` is {} s away from the engine's clock; a signed message is taken within {} s \
                 of it (collector.downlink.windowSec)",
                now_ms.abs_diff(ts) / 1000,
                self.window_ms / 1000
            ));
        }
        Ok(Admitted {
            authority,
            digest: digest(topic, &signed.body),
            body: signed.body,
            request_id: Some(request_id),
        })
    }

    /// Whose key signed: the operator's, else the tenant's.
    fn signer(&self, topic: &str, signed: &Signed, tenant: Option<u32>) -> Option<Authority> {
        let verifies = |keys: &[Secret]| {
            keys.iter()
                .any(|key| signature::verify(key.expose().as_bytes(), topic, signed))
        };
        if verifies(&self.operator) {
            return Some(Authority::Operator);
        }
        let tenant = tenant?;
        verifies(self.tenants.get(&tenant)?).then_some(Authority::Tenant(tenant))
    }

    /// Whether a signed message was handled before (always [`Seen::New`] for
    /// an unsigned one, or without a store).
    ///
    /// # Errors
    /// A database failure.
    pub fn seen(&self, topic: &str, admitted: &Admitted) -> Result<Seen, StoreError> {
        match (&self.seen, &admitted.request_id) {
            (Some(seen), Some(request_id)) => seen.check(topic, request_id, &admitted.digest),
            _ => Ok(Seen::New),
        }
    }

    /// Remembers a signed message as handled, for as long as its signature
    /// could be accepted.
    ///
    /// # Errors
    /// A database failure.
    pub fn remember(
        &self,
        topic: &str,
        admitted: &Admitted,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        match (&self.seen, &admitted.request_id) {
            (Some(seen), Some(request_id)) => seen.remember(
                topic,
                request_id,
                &admitted.digest,
                now_ms.saturating_add(self.window_ms.saturating_mul(2)),
                now_ms,
            ),
            _ => Ok(()),
        }
    }
}

/// The `requestId` and `ts` a signed body must carry.
fn stamp(body: &[u8]) -> Result<(String, i64), String> {
    let json: Json =
        serde_json::from_slice(body).map_err(|e| format!("the signed payload is not JSON: {e}"))?;
    let request_id = match json.get("requestId") {
        Some(Json::String(id)) if !id.is_empty() => id.clone(),
        _ => return Err("a signed message needs a `requestId` (a non-empty string)".to_owned()),
    };
    check_length("requestId", &request_id, MAX_REQUEST_ID)?;
    let ts = json
        .get("ts")
        .and_then(Json::as_i64)
        .ok_or("a signed message needs `ts`: when it was signed, ms since the Unix epoch")?;
    Ok((request_id, ts))
}

fn digest(topic: &str, body: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(topic.as_bytes());
    hasher.update(b"\n");
    hasher.update(body);
    hasher.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{KeyFile, TenantConfig};

    const OPERATOR: &str = "operator-key-0123456789";
    const TENANT: &str = "tenant-one-key-012345678";
    const TOPIC: &str = "P/D1/property/set";
    const NOW: i64 = 1_800_000_000_000;

    fn keys(key: &str) -> Option<KeyFile> {
        Some(KeyFile {
            source: crate::config::KeySource::File("k".into()),
            pos: crate::yaml::Pos::default(),
            keys: vec![Secret::new(key)],
        })
    }

    fn guard(require_signature: bool) -> DownlinkGuard {
        let mut config = GatewayConfig::default();
        config.collector.downlink.require_signature = require_signature;
        config.collector.downlink.operator_keys = keys(OPERATOR);
        let text = "tenants:\n  - { tenantId: 1, name: t }\n";
        let mut tenant: TenantConfig = crate::config::tests::load_str("t.yaml", text)
            .expect("a tenant")
            .tenants
            .remove(0);
        tenant.downlink_keys = keys(TENANT);
        config.tenants.push(tenant);
        DownlinkGuard::new(&config, None)
    }

    fn signed(key: &str, topic: &str, ts: i64) -> Vec<u8> {
        let body = format!(r#"{{"requestId":"r1","ts":{ts},"key":"sp","value":1}}"#);
        signature::sign(key.as_bytes(), topic, &body)
            .expect("signs")
            .into_bytes()
    }

    #[test]
    fn the_key_that_signed_says_who_acts() {
        let guard = guard(true);
        let by_operator = guard
            .admit(TOPIC, &signed(OPERATOR, TOPIC, NOW), Some(1), NOW)
            .expect("the operator's");
        assert_eq!(by_operator.authority, Authority::Operator);
        assert_eq!(by_operator.request_id.as_deref(), Some("r1"));
        let by_tenant = guard
            .admit(TOPIC, &signed(TENANT, TOPIC, NOW), Some(1), NOW)
            .expect("the tenant's");
        assert_eq!(by_tenant.authority, Authority::Tenant(1));
        assert_eq!(by_tenant.authority.scope(), Scope::Tenant(1));
        // A tenant's key does nothing for another tenant's device, or an unknown one.
        assert!(
            guard
                .admit(TOPIC, &signed(TENANT, TOPIC, NOW), Some(2), NOW)
                .is_err()
        );
        assert!(
            guard
                .admit(TOPIC, &signed(TENANT, TOPIC, NOW), None, NOW)
                .is_err()
        );
    }

    #[test]
    fn unsigned_moved_stale_and_idless_messages_are_refused() {
        let guard = guard(true);
        let unsigned = br#"{"requestId":"r1","key":"sp","value":1}"#;
        let refusal = guard
            .admit(TOPIC, unsigned, Some(1), NOW)
            .expect_err("unsigned");
        assert!(refusal.starts_with("unsigned"), "{refusal}");
        let moved = signed(OPERATOR, "P/D2/property/set", NOW);
        assert!(guard.admit(TOPIC, &moved, Some(1), NOW).is_err());
        let stale = signed(OPERATOR, TOPIC, NOW - 301_000);
        let refusal = guard.admit(TOPIC, &stale, Some(1), NOW).expect_err("stale");
        assert!(refusal.contains("301 s"), "{refusal}");
        let early = signed(OPERATOR, TOPIC, NOW + 299_000);
        assert!(guard.admit(TOPIC, &early, Some(1), NOW).is_ok());
        let idless = signature::sign(OPERATOR.as_bytes(), TOPIC, &format!(r#"{{"ts":{NOW}}}"#))
            .expect("signs");
        assert!(guard.admit(TOPIC, idless.as_bytes(), Some(1), NOW).is_err());
    }

    #[test]
    fn a_trusted_broker_lets_unsigned_messages_in_but_never_bad_signatures() {
        let guard = guard(false);
        let unsigned = br#"{"requestId":"r1","key":"sp","value":1}"#;
        let admitted = guard.admit(TOPIC, unsigned, Some(1), NOW).expect("trusted");
        assert_eq!(admitted.authority, Authority::Broker);
        assert_eq!(admitted.body, unsigned);
        let forged = signed("not-a-key-of-anyone-here", TOPIC, NOW);
        assert!(guard.admit(TOPIC, &forged, Some(1), NOW).is_err());
    }
}
