//! Who may call which route (SEC-7 of `docs/security.md`), decided before a
//! handler runs (and so before a body is read). Every route is classified in a table ([`API`], and the
//! console's own); a route nobody classified answers 500 rather than run
//! unguarded (`auth::authorize`), and `GET /openapi.json` names each
//! operation's class in `x-sluice-access`, so a test can walk them all.
//!
//! | class | who |
//! |---|---|
//! | `open` | anyone (the console's page, `/health` as bare liveness, this document) |
//! | `metrics` | anyone, or the `collector.http.metricsToken` (or admin) when one is set |
//! | `token` | the admin token, or a tenant's token (the handler scopes what it shows) |
//! | `admin` | the admin token |
//! | `node` | a node token (`collector.http.nodeTokens`), acting for its node |
//! | `reporter` | a node token, or the admin's or a tenant's token (heartbeats from outside) |

use std::collections::HashMap;

use axum::http::{HeaderMap, StatusCode, header};

use super::reply::{RequestRefused, error};

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Open,
    Metrics,
    Token,
    Admin,
    Node,
    Reporter,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Open => "open",
            Access::Metrics => "metrics",
            Access::Token => "token",
            Access::Admin => "admin",
            Access::Node => "node",
            Access::Reporter => "reporter",
        }
    }
}

/// A route and who may call it: method, path as routed, class.
pub type Route = (&'static str, &'static str, Access);

/// The API's routes.
pub const API: &[Route] = &[
    ("GET", "/health", Access::Open),
    ("GET", "/metrics", Access::Metrics),
    ("GET", "/openapi.json", Access::Open),
    ("GET", "/states", Access::Token),
    ("GET", "/devices/{id}/state", Access::Token),
    ("PUT", "/devices/{id}/state", Access::Admin),
    ("PUT", "/drivers/{id}/state", Access::Admin),
    ("GET", "/drivers/{id}/state", Access::Token),
    ("GET", "/devices", Access::Token),
    ("GET", "/devices/{id}", Access::Token),
    ("GET", "/devices/{id}/trend", Access::Token),
    ("PUT", "/devices/{id}/config", Access::Token),
    ("DELETE", "/devices/{id}/config", Access::Token),
    ("GET", "/alarms", Access::Token),
    ("GET", "/alarms/stats", Access::Token),
    ("GET", "/alarms/{id}", Access::Token),
    ("GET", "/alarms/{id}/actions", Access::Token),
    ("GET", "/alarms/{id}/chain", Access::Token),
    ("POST", "/alarms/{id}/{action}", Access::Token),
    ("POST", "/events", Access::Token),
    ("POST", "/heartbeats", Access::Reporter),
    ("GET", "/components", Access::Admin),
    ("POST", "/reload", Access::Admin),
    ("PUT", "/components/{name}/{version}", Access::Admin),
    ("DELETE", "/components/{name}/{version}", Access::Admin),
    (
        "POST",
        "/components/{name}/{version}/activate",
        Access::Admin,
    ),
    ("GET", "/commands", Access::Token),
    ("POST", "/commands", Access::Token),
    ("POST", "/commands/claim", Access::Node),
    ("GET", "/commands/{id}", Access::Token),
    ("POST", "/commands/{id}/cancel", Access::Token),
    ("POST", "/commands/{id}/receipt", Access::Node),
    ("GET", "/dead-letters", Access::Admin),
    ("POST", "/dead-letters/{id}/resend", Access::Admin),
    ("DELETE", "/dead-letters/{id}", Access::Admin),
];

/// Every classified route, by method and path.
#[derive(Debug, Default, Clone)]
pub struct AccessTable(HashMap<(String, &'static str), Access>);

impl AccessTable {
    /// The routes of `tables` together.
    pub fn of(tables: &[&[Route]]) -> Self {
        Self(
            tables
                .iter()
                .flat_map(|t| t.iter())
                .map(|(method, path, access)| ((method.to_string(), *path), *access))
                .collect(),
        )
    }

    /// Who may call `method` `path` (as routed); `None`: nobody classified it.
    pub fn get(&self, method: &str, path: &str) -> Option<Access> {
        self.0
            .iter()
            .find(|((m, p), _)| m == method && *p == path)
            .map(|(_, access)| *access)
    }

    /// The methods classified for `path`.
    pub(super) fn methods(&self, path: &str) -> Vec<&str> {
        let mut methods: Vec<&str> = self
            .0
            .keys()
            .filter(|(_, p)| *p == path)
            .map(|(m, _)| m.as_str())
            .collect();
        methods.sort_unstable();
        methods
    }
}

/// The `Host` names the API answers to: any IP address, `localhost`, and
/// `collector.http.allowedHosts`. A name the operator did not list is refused,
/// so a page that rebinds its own name to the gateway's address (DNS
/// rebinding) reaches nothing.
#[derive(Debug, Default, Clone)]
pub struct AllowedHosts(Vec<String>);

impl AllowedHosts {
    pub fn new(names: &[String]) -> Self {
        Self(names.iter().map(|n| n.to_ascii_lowercase()).collect())
    }

    /// # Errors
    /// The 421 answer for a missing or unknown `Host`.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), RequestRefused> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        if self.allows(host) {
            return Ok(());
        }
        Err(error(
            StatusCode::MISDIRECTED_REQUEST,
            "this gateway does not answer to that `Host`: use its address, or add the name to \
             `collector.http.allowedHosts`",
        )
        .into())
    }

    fn allows(&self, host: &str) -> bool {
        let name = match host.strip_prefix('[') {
            // [v6]:port
            Some(rest) => rest.split(']').next().unwrap_or_default(),
            None => host.rsplit_once(':').map_or(host, |(name, port)| {
                if port.chars().all(|c| c.is_ascii_digit()) {
                    name
                } else {
                    host
                }
            }),
        };
        if name.is_empty() {
            return false;
        }
        name.parse::<std::net::IpAddr>().is_ok()
            || name.eq_ignore_ascii_case("localhost")
            || self
                .0
                .iter()
                .any(|allowed| name.eq_ignore_ascii_case(allowed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_addresses_localhost_or_listed_names() {
        let hosts = AllowedHosts::new(&["gw.plant.local".to_owned()]);
        for allowed in [
            "127.0.0.1:8080",
            "10.1.2.3",
            "[::1]:8080",
            "localhost:8080",
            "GW.plant.local",
            "gw.plant.local:443",
        ] {
            assert!(hosts.allows(allowed), "{allowed}");
        }
        for refused in [
            "evil.example",
            "evil.example:8080",
            "",
            "gw.plant.local.evil.example",
        ] {
            assert!(!hosts.allows(refused), "{refused}");
        }
    }
}
