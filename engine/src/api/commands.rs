//! The command API.
//!
//! - `POST /commands` `{deviceId, key, value, requestId?, realtime?, function?}`
//! - `GET /commands/{id}`: the command, its history and its write record
//! - `POST /commands/{id}/cancel`
//! - `POST /commands/claim` `{nodeId, max}` (I-18; node token)
//! - `POST /commands/{id}/receipt` `{nodeId, claimGeneration, result, resultCode,
//!   rawResultCode, rawAck, message?}` (I-05; node token)

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::{Caller, NodeCaller};
use super::reply::{Reply, error};
use super::state::ApiState;
use crate::clock::now_ms;
use crate::command::{
    CommandError, CommandRequest, Commands, CreateError, Created, Receipt, ReceiptOutcome,
    Rejection,
};
use crate::model::Scope;

const MAX_CLAIM: usize = 100;

fn actor(scope: Scope) -> String {
    match scope {
        Scope::All => "admin".to_owned(),
        Scope::Tenant(tenant) => format!("tenant:{tenant}"),
    }
}

fn command_error(e: &CommandError) -> Reply {
    match e {
        CommandError::NotFound(_) => error(StatusCode::NOT_FOUND, e.to_string()),
        CommandError::Refused(refused) => (
            StatusCode::BAD_REQUEST,
            Json(json!({
                "error": e.to_string(),
                "status": refused.state,
                "allowed": refused.allowed,
            })),
        ),
        _ => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// Runs a blocking call (redb) off the async workers.
async fn blocking<R: Send + 'static>(
    commands: &Arc<Commands>,
    call: impl FnOnce(&Arc<Commands>) -> R + Send + 'static,
) -> Result<R, Reply> {
    let commands = Arc::clone(commands);
    tokio::task::spawn_blocking(move || call(&commands))
        .await
        .map_err(|e| error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

pub async fn create(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Json(request): Json<CommandRequest>,
) -> Reply {
    let Some(device) = request.device_id.clone() else {
        return error(StatusCode::BAD_REQUEST, "`deviceId` is required");
    };
    let created = blocking(&state.commands, move |c| {
        c.create(scope, &device, &request, "http", &actor(scope), now_ms())
    })
    .await;
    match created {
        Ok(Ok(Created::New(command))) => (StatusCode::CREATED, Json(json!(command))),
        Ok(Ok(Created::Existing(command))) => (StatusCode::OK, Json(json!(command))),
        Ok(Err(e @ (CreateError::UnknownDevice(_) | CreateError::UnknownIdentity { .. }))) => {
            error(StatusCode::NOT_FOUND, e.to_string())
        }
        Ok(Err(e @ CreateError::Invalid(_))) => error(StatusCode::BAD_REQUEST, e.to_string()),
        Ok(Err(CreateError::Store(e))) => command_error(&e),
        Err(reply) => reply,
    }
}

pub async fn get(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<u64>,
) -> Reply {
    let found = blocking(&state.commands, move |c| {
        let command = c
            .store()
            .get(id, scope)?
            .ok_or(CommandError::NotFound(id))?;
        let history = c.store().history(id)?;
        let (tenant, request) = (command.tenant_id, command.request_id.as_str());
        let write = c.store().recorded(tenant, request)?;
        let intent = c.store().intent(tenant, request)?;
        Ok::<_, CommandError>((command, history, (write, intent)))
    })
    .await;
    match found {
        Ok(Ok((command, history, (write, intent)))) => {
            let mut view = json!(command);
            view["history"] = json!(history);
            view["write"] = json!(write);
            view["intent"] = json!(intent);
            (StatusCode::OK, Json(view))
        }
        Ok(Err(e)) => command_error(&e),
        Err(reply) => reply,
    }
}

pub async fn cancel(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<u64>,
) -> Reply {
    match blocking(&state.commands, move |c| {
        c.cancel(id, scope, &actor(scope), now_ms())
    })
    .await
    {
        Ok(Ok(command)) => (StatusCode::OK, Json(json!(command))),
        Ok(Err(e)) => command_error(&e),
        Err(reply) => reply,
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimBody {
    node_id: String,
    max: Option<usize>,
}

pub async fn claim(
    State(state): State<ApiState>,
    _node: NodeCaller,
    Json(body): Json<ClaimBody>,
) -> Reply {
    if body.node_id.trim().is_empty() {
        return error(StatusCode::BAD_REQUEST, "`nodeId` must not be empty");
    }
    let max = body.max.unwrap_or(10).clamp(1, MAX_CLAIM);
    let claimed = blocking(&state.commands, move |c| {
        c.store().claim(&body.node_id, max, None, now_ms())
    })
    .await;
    match claimed {
        Ok(Ok(commands)) => (StatusCode::OK, Json(json!({ "commands": commands }))),
        Ok(Err(e)) => command_error(&e),
        Err(reply) => reply,
    }
}

pub async fn receipt(
    State(state): State<ApiState>,
    _node: NodeCaller,
    Path(id): Path<u64>,
    Json(receipt): Json<Receipt>,
) -> Reply {
    match blocking(&state.commands, move |c| c.receipt(id, &receipt, now_ms())).await {
        Ok(Ok(outcome)) => receipt_reply(&outcome),
        Ok(Err(e)) => command_error(&e),
        Err(reply) => reply,
    }
}

fn receipt_reply(outcome: &ReceiptOutcome) -> Reply {
    match outcome {
        ReceiptOutcome::Accepted(command) => (
            StatusCode::OK,
            Json(json!({ "outcome": "accepted", "command": command })),
        ),
        ReceiptOutcome::Duplicated => (StatusCode::OK, Json(json!({ "outcome": "duplicated" }))),
        ReceiptOutcome::Rejected(reason) => {
            let status = match reason {
                Rejection::ClaimGenerationRequired | Rejection::ResultCodeRequired => {
                    StatusCode::BAD_REQUEST
                }
                Rejection::NodeMismatch | Rejection::NodeUnknown => StatusCode::CONFLICT,
            };
            let body: Value = json!({ "outcome": "rejected", "reason": reason });
            (status, Json(body))
        }
    }
}
