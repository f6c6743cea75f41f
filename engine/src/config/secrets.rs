//! The configuration's secrets read and checked together: the key files read
//! (see `keyfile.rs`), and the tokens and keys compared.
//!
//! One secret must not stand for two parties (SEC-8 of `docs/security.md`):
//! the admin token, the tenants' tokens, the node tokens and the metrics token
//! are all different, and so are the operator's and the tenants' keys (a
//! tenant holding the operator's secret would have the operator's rights).

use std::collections::HashMap;
use std::path::Path;

use super::collector::CollectorConfig;
use super::tenant::TenantConfig;
use crate::yaml::Diagnostics;

/// Reads every key file of the `collector` and `tenants` sections (relative
/// paths from `base`) and checks that no secret stands for two parties.
pub(super) fn load(
    collector: &mut CollectorConfig,
    tenants: &mut [TenantConfig],
    base: &Path,
    errors: &mut Diagnostics,
) {
    let files = collector
        .downlink
        .operator_keys
        .iter_mut()
        .chain(tenants.iter_mut().filter_map(|t| t.downlink_keys.as_mut()));
    for file in files {
        file.load(base, errors);
    }
    distinct_keys(collector, tenants, errors);
    distinct_tokens(collector, tenants, errors);
}

/// The operator's and each tenant's keys are all different.
fn distinct_keys(collector: &CollectorConfig, tenants: &[TenantConfig], errors: &mut Diagnostics) {
    let mut owners: HashMap<&str, String> = HashMap::new();
    let operator = collector
        .downlink
        .operator_keys
        .iter()
        .map(|f| ("the operator".to_owned(), f));
    let tenant_keys = tenants.iter().filter_map(|t| {
        t.downlink_keys
            .as_ref()
            .map(|f| (format!("tenant {}", t.tenant_id), f))
    });
    for (owner, file) in operator.chain(tenant_keys) {
        for key in &file.keys {
            match owners.get(key.expose()) {
                Some(first) if *first != owner => errors.push(
                    file.pos,
                    format!(
                        "a key of this file is also {first}'s: each party needs keys of its own"
                    ),
                ),
                _ => {
                    owners.insert(key.expose(), owner.clone());
                }
            }
        }
    }
}

/// The admin token, the tenants' tokens, the node tokens and the metrics token
/// are all different (tenants' tokens among themselves, and node tokens among
/// themselves, are checked where they are read).
fn distinct_tokens(
    collector: &CollectorConfig,
    tenants: &[TenantConfig],
    errors: &mut Diagnostics,
) {
    let Some(http) = &collector.http else {
        return;
    };
    let tenant_of = |token: &str| {
        tenants
            .iter()
            .find(|t| t.tokens.iter().any(|own| own == token))
            .map(|t| t.tenant_id)
    };
    if let Some(admin) = &http.admin_token {
        if let Some(tenant) = tenant_of(admin) {
            errors.push(
                http.admin_token_pos,
                format!("`adminToken` is also a token of tenant {tenant}, which would have the admin's rights"),
            );
        }
        if http.node_tokens.iter().any(|n| n.token == *admin) {
            errors.push(
                http.admin_token_pos,
                "`adminToken` is also a node token: give the nodes tokens of their own",
            );
        }
    }
    for node in &http.node_tokens {
        if let Some(tenant) = tenant_of(&node.token) {
            errors.push(
                node.pos,
                format!(
                    "the token of node `{}` is also a token of tenant {tenant}",
                    node.node_id
                ),
            );
        }
    }
    if let Some(metrics) = &http.metrics_token {
        let taken = http.admin_token.as_ref() == Some(metrics)
            || tenant_of(metrics).is_some()
            || http.node_tokens.iter().any(|n| n.token == *metrics);
        if taken {
            errors.push(
                http.metrics_token_pos,
                "`metricsToken` is also another token: it may only read /metrics, so it must be its own",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::tests::load_str;

    #[test]
    fn a_token_or_a_key_standing_for_two_parties_is_refused() {
        let tokens = "collector:\n  http: { adminToken: shared, nodeTokens: [{ nodeId: edge, token: node }], metricsToken: node }\ntenants:\n  - { tenantId: 1, name: t, tokens: [shared] }\n";
        let errors = load_str("gw.yaml", tokens)
            .expect_err("clashes")
            .to_string();
        assert!(
            errors.contains("gw.yaml:2:23: `adminToken` is also a token of tenant 1"),
            "{errors}"
        );
        assert!(
            errors.contains("`metricsToken` is also another token"),
            "{errors}"
        );
        assert!(!errors.contains("shared"), "no secret is shown: {errors}");

        let dir = std::env::temp_dir().join(format!("sluice-secrets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("a.key"), "the-one-key-0123456789\n").expect("key");
        std::fs::write(
            dir.join("b.key"),
            "another-key-0123456789\nthe-one-key-0123456789\n",
        )
        .expect("key");
        let file = dir.join("gw.yaml");
        let keys = "collector:\n  downlink: { operatorKeyFile: a.key }\ntenants:\n  - { tenantId: 1, name: t, downlinkKeyFile: b.key }\n  - { tenantId: 2, name: u, downlinkKeyFile: missing.key }\n";
        let errors = load_str(&file.display().to_string(), keys)
            .expect_err("shared key")
            .to_string();
        assert!(errors.contains("also the operator's"), "{errors}");
        assert!(errors.contains("cannot read the key file"), "{errors}");
        assert!(!errors.contains("the-one-key"), "no key is shown: {errors}");
        std::fs::remove_file(dir.join("b.key")).expect("remove");
        std::fs::write(dir.join("b.key"), "another-key-0123456789\n").expect("key");
        let config = load_str(
            &file.display().to_string(),
            &keys.replace("missing.key", "c.key"),
        );
        assert!(config.is_err(), "c.key is missing too");
        std::fs::write(dir.join("c.key"), "a-third-key-0123456789\n").expect("key");
        let config = load_str(
            &file.display().to_string(),
            &keys.replace("missing.key", "c.key"),
        )
        .expect("three parties, three keys");
        assert_eq!(
            config.tenants[1]
                .downlink_keys
                .as_ref()
                .map(|f| f.keys.len()),
            Some(1)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
