//! Bearer tokens: the operator's `collector.http.adminToken` sees every tenant; a
//! token of `tenants[].tokens` sees that tenant's devices and alarms only; a node
//! token (`collector.http.nodeTokens`) may claim commands and report receipts
//! for its own node.

use axum::http::{HeaderMap, StatusCode, header};

use super::reply::{Refused, error};
use crate::config::GatewayConfig;
use crate::model::Scope;

/// Every token the API accepts.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    admin: Option<String>,
    tenants: Vec<(String, u32)>,
    /// Each node's token and its node id.
    nodes: Vec<(String, String)>,
}

impl Tokens {
    pub fn of(config: &GatewayConfig) -> Self {
        Self {
            admin: config
                .collector
                .http
                .as_ref()
                .and_then(|http| http.admin_token.clone()),
            tenants: config
                .tenants
                .iter()
                .flat_map(|t| t.tokens.iter().map(|token| (token.clone(), t.tenant_id)))
                .collect(),
            nodes: config
                .collector
                .http
                .as_ref()
                .map(|http| {
                    http.node_tokens
                        .iter()
                        .map(|n| (n.token.clone(), n.node_id.clone()))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    pub fn has_admin(&self) -> bool {
        self.admin.is_some()
    }

    /// Whose token the request carries, if a known one.
    pub fn scope(&self, headers: &HeaderMap) -> Option<Scope> {
        let given = headers
            .get(header::AUTHORIZATION)?
            .to_str()
            .ok()?
            .strip_prefix("Bearer ")?
            .trim();
        // Every token is compared, each in full, so timing tells nothing.
        let mut scope = None;
        if let Some(admin) = &self.admin
            && same(admin, given)
        {
            scope = Some(Scope::All);
        }
        for (token, tenant) in &self.tenants {
            if same(token, given) && scope.is_none() {
                scope = Some(Scope::Tenant(*tenant));
            }
        }
        scope
    }

    /// The node whose token `given` is; every token is compared in full.
    pub fn node(&self, given: &str) -> Option<&str> {
        let mut node = None;
        for (token, node_id) in &self.nodes {
            if same(token, given) && node.is_none() {
                node = Some(node_id.as_str());
            }
        }
        node
    }

    /// The caller's scope, or the 401 reply.
    ///
    /// # Errors
    /// No `Authorization: Bearer` header, or a token nobody has.
    pub fn require(&self, headers: &HeaderMap) -> Result<Scope, Refused> {
        if headers.get(header::AUTHORIZATION).is_none() {
            return Err(error(
                StatusCode::UNAUTHORIZED,
                "missing `Authorization: Bearer <token>`",
            )
            .into());
        }
        self.scope(headers)
            .ok_or_else(|| error(StatusCode::UNAUTHORIZED, "unknown token").into())
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
    fn admin_and_tenant_tokens() {
        let tokens = Tokens {
            admin: Some("root".into()),
            tenants: vec![("t1".into(), 1), ("t2".into(), 2)],
            nodes: vec![("n1".into(), "edge-1".into())],
        };
        assert_eq!(tokens.node("n1"), Some("edge-1"));
        assert_eq!(tokens.node("root"), None);
        assert_eq!(tokens.scope(&headers("Bearer root")), Some(Scope::All));
        assert_eq!(tokens.scope(&headers("Bearer t2")), Some(Scope::Tenant(2)));
        assert_eq!(tokens.scope(&headers("Bearer t")), None);
        assert_eq!(tokens.scope(&headers("Bearer roo")), None);
        assert_eq!(tokens.scope(&headers("Basic root")), None);
        assert!(tokens.require(&HeaderMap::new()).is_err());
    }
}
