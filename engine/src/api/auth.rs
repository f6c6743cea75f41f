//! Who a request comes from, checked before its handler runs.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};

use super::reply::{Refused, error};
use super::state::ApiState;
use crate::model::Scope;

/// The scope of a request's bearer token; a request without a known token is
/// answered 401 before the handler runs.
#[derive(Debug, Clone, Copy)]
pub struct Caller(pub Scope);

impl FromRequestParts<ApiState> for Caller {
    type Rejection = Refused;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, Refused> {
        state.tokens.require(&parts.headers).map(Caller)
    }
}

/// A request carrying the operator's token (`collector.http.adminToken`).
#[derive(Debug, Clone, Copy)]
pub struct Admin;

impl FromRequestParts<ApiState> for Admin {
    type Rejection = Refused;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, Refused> {
        match state.tokens.require(&parts.headers)? {
            Scope::All => Ok(Admin),
            Scope::Tenant(_) => {
                Err(error(StatusCode::FORBIDDEN, "this needs the admin token").into())
            }
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

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Self, Refused> {
        let given = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let Some(given) = given else {
            return Err(error(
                StatusCode::UNAUTHORIZED,
                "missing `Authorization: Bearer <node token>`",
            )
            .into());
        };
        if let Some(node) = state.tokens.node(given) {
            Ok(NodeCaller(node.to_owned()))
        } else {
            Err(error(
                StatusCode::UNAUTHORIZED,
                "not a node token (`collector.http.nodeTokens`)",
            )
            .into())
        }
    }
}
