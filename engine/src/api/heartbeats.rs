//! `POST /heartbeats`: collectors outside the engine keep their drivers' and
//! devices' leases in it, as seed 000's drivers keep theirs (STATE-8 of
//! `docs/state.md`).

use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::Reporter;
use super::body::JsonBody;
use super::reply::{ApiReply, ErrorBody, error, ok};
use super::state::ApiState;
use crate::lease::reported::{self, HeartbeatBatch, Refused, Sender};

/// How many heartbeats were taken.
#[derive(Debug, Serialize, ToSchema)]
pub struct Accepted {
    accepted: usize,
}

/// `POST /heartbeats {"heartbeats":[{type, id, parent?, tenantId?, state,
/// timeout?, timeoutUnit?, productId?, deviceNum?}]}`: renews each entity's
/// lease, all of them or none.
#[utoipa::path(post, path = "/heartbeats", tag = "states", security(("bearer" = [])),
    request_body = HeartbeatBatch,
    responses(
        (status = 200, description = "Every heartbeat taken", body = Accepted),
        (status = 400, description = "A heartbeat the engine cannot take; the message names it", body = ErrorBody),
        (status = 401, description = "No token, an unknown one, or the metrics token", body = ErrorBody),
        (status = 403, description = "A heartbeat of another tenant than the token's", body = ErrorBody),
        (status = 409, description = "A device or driver whose lease the engine keeps itself", body = ErrorBody)))]
pub async fn post(
    State(state): State<ApiState>,
    Reporter(scope): Reporter,
    JsonBody(batch): JsonBody<HeartbeatBatch>,
) -> ApiReply {
    let sender = Sender {
        scope,
        tenant: scope.tenant().unwrap_or(0),
        via: "http",
    };
    match reported::renewals(&batch, sender, &*state.fleet) {
        Ok(renewals) => {
            let accepted = renewals.len();
            for renewal in renewals {
                state.leases.renew(renewal);
            }
            ok(Accepted { accepted })
        }
        Err(refused) => {
            let status = match &refused {
                Refused::Invalid(_) => StatusCode::BAD_REQUEST,
                Refused::Forbidden(_) => StatusCode::FORBIDDEN,
                Refused::Conflict(_) => StatusCode::CONFLICT,
            };
            error(status, refused.message())
        }
    }
}
