//! Who a request comes from: [`authorize`] lets it in by its route's access
//! class before its handler runs, and handlers take the caller as an extractor.

use axum::extract::{FromRequestParts, MatchedPath, Request, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::access::Access;
use super::reply::{RequestRefused, error};
use super::state::ApiState;
use super::tokens::Bearer;
use crate::model::Scope;

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
        (Access::Token | Access::Admin | Access::Node | Access::Reporter, Bearer::None) => {
            Err((StatusCode::UNAUTHORIZED, MISSING))
        }
        (Access::Token | Access::Admin | Access::Node | Access::Reporter, Bearer::Unknown) => {
            Err((StatusCode::UNAUTHORIZED, UNKNOWN))
        }
        (Access::Reporter, Bearer::Scoped(scope)) => Ok(Authorized::Scoped(*scope)),
        (Access::Reporter, Bearer::Node(node)) => Ok(Authorized::Node(node.clone())),
        (Access::Reporter, Bearer::Metrics) => Err((
            StatusCode::UNAUTHORIZED,
            "the metrics token reports nothing: use a node's, the admin's or a tenant's token",
        )),
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

fn authorized(parts: &Parts) -> Option<&Authorized> {
    parts.extensions.get::<Authorized>()
}

/// A refusal for a handler that finds no caller it may serve: its route was
/// let in under a class that does not give one (a mistake in the table).
fn not_let_in() -> RequestRefused {
    error(
        StatusCode::UNAUTHORIZED,
        "missing `Authorization: Bearer <token>`",
    )
    .into()
}

/// The scope of the admin's or a tenant's token.
#[derive(Debug, Clone, Copy)]
pub struct Caller(pub Scope);

impl FromRequestParts<ApiState> for Caller {
    type Rejection = RequestRefused;

    async fn from_request_parts(parts: &mut Parts, _: &ApiState) -> Result<Self, RequestRefused> {
        match authorized(parts) {
            Some(Authorized::Scoped(scope)) => Ok(Caller(*scope)),
            _ => Err(not_let_in()),
        }
    }
}

/// The scope of the caller's admin or tenant token, if it gave one (on a
/// route anyone may call).
#[derive(Debug, Clone, Copy)]
pub struct MaybeCaller(pub Option<Scope>);

impl FromRequestParts<ApiState> for MaybeCaller {
    type Rejection = RequestRefused;

    async fn from_request_parts(parts: &mut Parts, _: &ApiState) -> Result<Self, RequestRefused> {
        Ok(MaybeCaller(match authorized(parts) {
            Some(Authorized::Scoped(scope)) => Some(*scope),
            _ => None,
        }))
    }
}

/// A request carrying the operator's token.
#[derive(Debug, Clone, Copy)]
pub struct Admin;

impl FromRequestParts<ApiState> for Admin {
    type Rejection = RequestRefused;

    async fn from_request_parts(parts: &mut Parts, _: &ApiState) -> Result<Self, RequestRefused> {
        match authorized(parts) {
            Some(Authorized::Scoped(Scope::All)) => Ok(Admin),
            Some(Authorized::Scoped(Scope::Tenant(_))) => {
                Err(error(StatusCode::FORBIDDEN, "this needs the admin token").into())
            }
            _ => Err(not_let_in()),
        }
    }
}

/// Who reports heartbeats from outside: a node's token speaks for every tenant,
/// as the admin's does; a tenant's for its own.
#[derive(Debug, Clone, Copy)]
pub struct Reporter(pub Scope);

impl FromRequestParts<ApiState> for Reporter {
    type Rejection = RequestRefused;

    async fn from_request_parts(parts: &mut Parts, _: &ApiState) -> Result<Self, RequestRefused> {
        match authorized(parts) {
            Some(Authorized::Scoped(scope)) => Ok(Reporter(*scope)),
            Some(Authorized::Node(_)) => Ok(Reporter(Scope::All)),
            _ => Err(not_let_in()),
        }
    }
}

/// A request carrying a node token (`collector.http.nodeTokens`): it may claim
/// commands and report receipts for the node the token belongs to, whose id
/// this holds. The node id in a body proves nothing; the token does.
#[derive(Debug, Clone)]
pub struct NodeCaller(pub String);

impl FromRequestParts<ApiState> for NodeCaller {
    type Rejection = RequestRefused;

    async fn from_request_parts(parts: &mut Parts, _: &ApiState) -> Result<Self, RequestRefused> {
        match authorized(parts) {
            Some(Authorized::Node(node)) => Ok(NodeCaller(node.clone())),
            _ => Err(error(
                StatusCode::UNAUTHORIZED,
                "not a node token (`collector.http.nodeTokens`)",
            )
            .into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for reporter in [&tenant, &admin, &node] {
            assert_eq!(status(Access::Reporter, reporter, false), Ok(()));
        }
        for stranger in [&Bearer::None, &Bearer::Unknown, &Bearer::Metrics] {
            assert_eq!(
                status(Access::Reporter, stranger, false),
                Err(StatusCode::UNAUTHORIZED)
            );
        }
    }
}
