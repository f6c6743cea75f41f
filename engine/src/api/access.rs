//! Who may call which route, decided before a handler runs (and so before a
//! body is read). Every route is classified in a table ([`API`], and the
//! console's own); a route nobody classified answers 500 rather than run
//! unguarded, and `GET /openapi.json` names each operation's class in
//! `x-sluice-access`, so a test can walk them all.
//!
//! | class | who |
//! |---|---|
//! | `open` | anyone (the console's page, `/health` as bare liveness, this document) |
//! | `metrics` | anyone, or the `collector.http.metricsToken` (or admin) when one is set |
//! | `token` | the admin token, or a tenant's token (the handler scopes what it shows) |
//! | `admin` | the admin token |
//! | `node` | a node token (`collector.http.nodeTokens`), acting for its node |

use std::collections::HashMap;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::reply::{Refused, error};
use super::state::ApiState;
use super::tokens::Bearer;
use crate::model::Scope;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Open,
    Metrics,
    Token,
    Admin,
    Node,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Open => "open",
            Access::Metrics => "metrics",
            Access::Token => "token",
            Access::Admin => "admin",
            Access::Node => "node",
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
    ("GET", "/drivers/{id}/state", Access::Token),
    ("GET", "/devices", Access::Token),
    ("GET", "/devices/{id}", Access::Token),
    ("PUT", "/devices/{id}/config", Access::Token),
    ("DELETE", "/devices/{id}/config", Access::Token),
    ("GET", "/alarms", Access::Token),
    ("GET", "/alarms/stats", Access::Token),
    ("GET", "/alarms/{id}", Access::Token),
    ("GET", "/alarms/{id}/actions", Access::Token),
    ("GET", "/alarms/{id}/chain", Access::Token),
    ("POST", "/alarms/{id}/{action}", Access::Token),
    ("POST", "/events", Access::Token),
    ("GET", "/components", Access::Admin),
    ("POST", "/reload", Access::Admin),
    ("PUT", "/components/{name}/{version}", Access::Admin),
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
    fn methods(&self, path: &str) -> Vec<&str> {
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

/// The caller a request was let in as, for the handler: set by [`authorize`].
#[derive(Debug, Clone)]
pub enum Authorized {
    /// No token, or one that the route did not need.
    Anyone,
    /// The admin's or a tenant's token.
    Scoped(Scope),
    /// A node's token, for this node.
    Node(String),
}

/// Checks the request's `Host` and token against the route's class before
/// anything else of it is read; lets it on with [`Authorized`] in its
/// extensions, or answers 421, 401, 403 (or 500 for a route nobody classified).
pub async fn authorize(
    State(state): State<ApiState>,
    matched: Option<MatchedPath>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Err(refused) = state.hosts.check(request.headers()) {
        return refused.into_response();
    }
    let path = matched.as_ref().map_or("", MatchedPath::as_str);
    let Some(access) = state.access.get(request.method().as_str(), path) else {
        let methods = state.access.methods(path);
        if !methods.is_empty() {
            // A method the path does not take: answered as the router would.
            let mut refused = error(
                StatusCode::METHOD_NOT_ALLOWED,
                format!("`{path}` takes {}", methods.join(", ")),
            );
            if let Ok(allow) = methods.join(", ").parse() {
                refused.headers_mut().insert(header::ALLOW, allow);
            }
            return refused;
        }
        tracing::error!(method = %request.method(), path, "a route no one classified is refused");
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "this route is not classified for access; it is refused",
        );
    };
    let bearer = state.tokens.bearer(request.headers());
    let authorized = match admit(access, &bearer, state.tokens.guards_metrics()) {
        Ok(authorized) => authorized,
        Err((status, message)) => return error(status, message),
    };
    request.extensions_mut().insert(authorized);
    next.run(request).await
}

/// Who the bearer is let in as on a route of class `access`, or the refusal;
/// `metrics_guarded`: a metrics token is configured.
fn admit(
    access: Access,
    bearer: &Bearer,
    metrics_guarded: bool,
) -> Result<Authorized, (StatusCode, &'static str)> {
    const MISSING: &str = "missing `Authorization: Bearer <token>`";
    const UNKNOWN: &str = "unknown token";
    match (access, bearer) {
        (Access::Open, Bearer::Scoped(scope)) => Ok(Authorized::Scoped(*scope)),
        (Access::Open, _) => Ok(Authorized::Anyone),
        (Access::Metrics, Bearer::Metrics | Bearer::Scoped(Scope::All)) => Ok(Authorized::Anyone),
        (Access::Metrics, _) if !metrics_guarded => Ok(Authorized::Anyone),
        (Access::Metrics, Bearer::None) => Err((StatusCode::UNAUTHORIZED, MISSING)),
        (Access::Metrics, _) => Err((
            StatusCode::UNAUTHORIZED,
            "not the metrics token (`collector.http.metricsToken`) or the admin token",
        )),
        (Access::Token | Access::Admin | Access::Node, Bearer::None) => {
            Err((StatusCode::UNAUTHORIZED, MISSING))
        }
        (Access::Token | Access::Admin | Access::Node, Bearer::Unknown) => {
            Err((StatusCode::UNAUTHORIZED, UNKNOWN))
        }
        (Access::Token, Bearer::Scoped(scope)) => Ok(Authorized::Scoped(*scope)),
        (Access::Admin, Bearer::Scoped(Scope::All)) => Ok(Authorized::Scoped(Scope::All)),
        (Access::Admin, Bearer::Scoped(Scope::Tenant(_))) => {
            Err((StatusCode::FORBIDDEN, "this needs the admin token"))
        }
        (Access::Node, Bearer::Node(node)) => Ok(Authorized::Node(node.clone())),
        (Access::Node, _) => Err((
            StatusCode::UNAUTHORIZED,
            "not a node token (`collector.http.nodeTokens`)",
        )),
        (Access::Token | Access::Admin, Bearer::Node(_) | Bearer::Metrics) => Err((
            StatusCode::UNAUTHORIZED,
            "a node or metrics token is not the admin's or a tenant's",
        )),
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
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Refused> {
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

    #[test]
    fn each_class_lets_in_whom_it_should() {
        let tenant = Bearer::Scoped(Scope::Tenant(1));
        let admin = Bearer::Scoped(Scope::All);
        let node = Bearer::Node("edge".into());
        let status = |access, bearer: &Bearer, guarded| {
            admit(access, bearer, guarded).map(drop).map_err(|e| e.0)
        };
        assert_eq!(status(Access::Open, &Bearer::None, true), Ok(()));
        assert_eq!(status(Access::Metrics, &Bearer::None, false), Ok(()));
        assert_eq!(
            status(Access::Metrics, &Bearer::None, true),
            Err(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(
            status(Access::Metrics, &tenant, true),
            Err(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(status(Access::Metrics, &Bearer::Metrics, true), Ok(()));
        assert_eq!(status(Access::Metrics, &admin, true), Ok(()));
        assert_eq!(status(Access::Token, &tenant, false), Ok(()));
        assert_eq!(
            status(Access::Token, &Bearer::None, false),
            Err(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(
            status(Access::Token, &Bearer::Unknown, false),
            Err(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(
            status(Access::Admin, &tenant, false),
            Err(StatusCode::FORBIDDEN)
        );
        assert_eq!(status(Access::Admin, &admin, false), Ok(()));
        assert!(matches!(
            admit(Access::Node, &node, false),
            Ok(Authorized::Node(n)) if n == "edge"
        ));
        assert_eq!(
            status(Access::Node, &admin, false),
            Err(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(
            status(Access::Token, &node, false),
            Err(StatusCode::UNAUTHORIZED)
        );
    }
}
