//! Who a request comes from, as [`super::access::authorize`] let it in before
//! its handler runs: handlers take it as an extractor.

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;

use super::access::Authorized;
use super::reply::{Refused, error};
use super::state::ApiState;
use crate::model::Scope;

fn authorized(parts: &Parts) -> Option<&Authorized> {
    parts.extensions.get::<Authorized>()
}

/// A refusal for a handler that finds no caller it may serve: its route was
/// let in under a class that does not give one (a mistake in the table).
fn not_let_in() -> Refused {
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
    type Rejection = Refused;

    async fn from_request_parts(parts: &mut Parts, _: &ApiState) -> Result<Self, Refused> {
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
    type Rejection = Refused;

    async fn from_request_parts(parts: &mut Parts, _: &ApiState) -> Result<Self, Refused> {
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
    type Rejection = Refused;

    async fn from_request_parts(parts: &mut Parts, _: &ApiState) -> Result<Self, Refused> {
        match authorized(parts) {
            Some(Authorized::Scoped(Scope::All)) => Ok(Admin),
            Some(Authorized::Scoped(Scope::Tenant(_))) => {
                Err(error(StatusCode::FORBIDDEN, "this needs the admin token").into())
            }
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
    type Rejection = Refused;

    async fn from_request_parts(parts: &mut Parts, _: &ApiState) -> Result<Self, Refused> {
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
