//! Bearer tokens: the operator's admin token sees every tenant; a token of
//! `tenants[].tokens` sees that tenant's devices and alarms only; a node token
//! (`collector.http.nodeTokens`) may claim commands and report receipts for
//! its own node; the metrics token (`collector.http.metricsToken`) may read
//! `/metrics`. Every comparison runs over every token in full, so timing tells
//! nothing of them.

use axum::http::{HeaderMap, header};

use crate::config::GatewayConfig;
use crate::model::Scope;

/// Every token the API accepts.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    admin: Option<String>,
    tenants: Vec<(String, u32)>,
    /// Each node's token and its node id.
    nodes: Vec<(String, String)>,
    metrics: Option<String>,
}

/// Who a request's bearer token says the caller is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bearer {
    /// No `Authorization: Bearer` header.
    None,
    /// A token nobody has.
    Unknown,
    /// The admin's (every tenant) or a tenant's.
    Scoped(Scope),
    /// A node's, for this node.
    Node(String),
    /// The metrics token.
    Metrics,
}

impl Tokens {
    /// The tokens of `config`, with `admin` as the admin token (the configured
    /// one, or the one the engine made for its data directory).
    pub fn of(config: &GatewayConfig, admin: Option<String>) -> Self {
        let http = config.collector.http.as_ref();
        Self {
            admin,
            tenants: config
                .tenants
                .iter()
                .flat_map(|t| t.tokens.iter().map(|token| (token.clone(), t.tenant_id)))
                .collect(),
            nodes: http
                .map(|http| {
                    http.node_tokens
                        .iter()
                        .map(|n| (n.token.clone(), n.node_id.clone()))
                        .collect()
                })
                .unwrap_or_default(),
            metrics: http.and_then(|http| http.metrics_token.clone()),
        }
    }

    /// Whether `/metrics` needs a token.
    pub fn guards_metrics(&self) -> bool {
        self.metrics.is_some()
    }

    /// Who the request's bearer is.
    pub fn bearer(&self, headers: &HeaderMap) -> Bearer {
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return Bearer::None;
        };
        let Some(given) = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
        else {
            return Bearer::Unknown;
        };
        // Every token is compared, each in full; the first match counts.
        let mut found = None;
        let mut keep = |matched: bool, who: Bearer| {
            if matched && found.is_none() {
                found = Some(who);
            }
        };
        if let Some(admin) = &self.admin {
            keep(same(admin, given), Bearer::Scoped(Scope::All));
        }
        for (token, tenant) in &self.tenants {
            keep(same(token, given), Bearer::Scoped(Scope::Tenant(*tenant)));
        }
        for (token, node) in &self.nodes {
            keep(same(token, given), Bearer::Node(node.clone()));
        }
        if let Some(metrics) = &self.metrics {
            keep(same(metrics, given), Bearer::Metrics);
        }
        found.unwrap_or(Bearer::Unknown)
    }

    /// The scope of the request's admin or tenant token, if it carries one.
    pub fn scope(&self, headers: &HeaderMap) -> Option<Scope> {
        match self.bearer(headers) {
            Bearer::Scoped(scope) => Some(scope),
            _ => None,
        }
    }
}

/// Equal strings, compared without stopping at the first difference.
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut diff = u8::from(a.len() != b.len());
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, value.parse().expect("ascii"));
        headers
    }

    #[test]
    fn each_token_says_who_the_caller_is() {
        let tokens = Tokens {
            admin: Some("root".into()),
            tenants: vec![("t1".into(), 1), ("t2".into(), 2)],
            nodes: vec![("n1".into(), "edge-1".into())],
            metrics: Some("m".into()),
        };
        let who = |value: &str| tokens.bearer(&headers(value));
        assert_eq!(who("Bearer root"), Bearer::Scoped(Scope::All));
        assert_eq!(who("Bearer t2"), Bearer::Scoped(Scope::Tenant(2)));
        assert_eq!(who("Bearer n1"), Bearer::Node("edge-1".into()));
        assert_eq!(who("Bearer m"), Bearer::Metrics);
        assert_eq!(who("Bearer t"), Bearer::Unknown);
        assert_eq!(who("Bearer roo"), Bearer::Unknown);
        assert_eq!(who("Basic root"), Bearer::Unknown);
        assert_eq!(tokens.bearer(&HeaderMap::new()), Bearer::None);
        assert_eq!(tokens.scope(&headers("Bearer t1")), Some(Scope::Tenant(1)));
        assert_eq!(tokens.scope(&headers("Bearer n1")), None);
    }
}
