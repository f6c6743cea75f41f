//! The command API.
//!
//! - `POST /commands` `{deviceId, key, value, requestId?, realtime?, function?}`
//! - `GET /commands?deviceId&status&limit`: the newest commands
//! - `GET /commands/{id}`: the command, its history and its write record
//! - `POST /commands/{id}/cancel`
//! - `POST /commands/claim` `{nodeId, max}` (CMD-C1; node token)
//! - `POST /commands/{id}/receipt` `{nodeId, claimGeneration, result, resultCode,
//!   rawResultCode, rawAck, message?}` (CMD-C2; node token)

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::{Caller, NodeCaller};
use super::body::JsonBody;
use super::reply::{ApiReply, ErrorBody, RequestRefused, error, json, ok};
use super::state::ApiState;
use crate::clock::now_ms;
use crate::command::{
    Command, CommandError, CommandFilter, CommandRecord, CommandRequest, CommandStatus, Commands,
    CreateError, Created, Receipt, ReceiptOutcome, Rejection, WriteIntent, WriteRecord,
};
use crate::model::Scope;
use crate::mqtt::limits::{MAX_NAME, MAX_TEXT, check_length, clip};

const MAX_CLAIM: usize = 100;
const DEFAULT_LIST: usize = 100;
const MAX_LIST: usize = 1000;

fn actor(scope: Scope) -> String {
    match scope {
        Scope::All => "admin".to_owned(),
        Scope::Tenant(tenant) => format!("tenant:{tenant}"),
    }
}

/// A transition the command's status does not allow.
#[derive(Debug, Serialize, ToSchema)]
pub struct CommandRefusal {
    error: String,
    /// The command's status.
    status: CommandStatus,
    /// What its status allows.
    allowed: Vec<crate::command::CommandAction>,
}

fn command_error(e: &CommandError) -> ApiReply {
    match e {
        CommandError::NotFound(_) => error(StatusCode::NOT_FOUND, e.to_string()),
        CommandError::Refused(refused) => json(
            StatusCode::BAD_REQUEST,
            CommandRefusal {
                error: e.to_string(),
                status: refused.state,
                allowed: refused.allowed.clone(),
            },
        ),
        _ => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// Commands.
#[derive(Debug, Serialize, ToSchema)]
pub struct CommandList {
    commands: Vec<Command>,
}

/// A command with its history, its write record and its write intent.
#[derive(Debug, Serialize, ToSchema)]
pub struct CommandView {
    #[serde(flatten)]
    command: Command,
    /// Every change, oldest first.
    history: Vec<CommandRecord>,
    /// The write as carried out on the device, once it was.
    write: Option<WriteRecord>,
    /// The write as intended, recorded before it was sent.
    intent: Option<WriteIntent>,
}

/// The answer to a receipt: `accepted` (with the command), `duplicated` or
/// `rejected` (with the reason).
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum ReceiptReply {
    Accepted { command: Box<Command> },
    Duplicated,
    Rejected { reason: Rejection },
}

/// Runs a blocking call (redb) off the async workers.
async fn blocking<R: Send + 'static>(
    commands: &Arc<Commands>,
    call: impl FnOnce(&Arc<Commands>) -> R + Send + 'static,
) -> Result<R, RequestRefused> {
    let commands = Arc::clone(commands);
    tokio::task::spawn_blocking(move || call(&commands))
        .await
        .map_err(|e| error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into())
}

#[utoipa::path(post, path = "/commands", tag = "commands", security(("bearer" = [])),
    request_body = CommandRequest,
    responses(
        (status = 201, description = "Created, PENDING", body = Command),
        (status = 200, description = "The command created before with this request id", body = Command),
        (status = 400, description = "Invalid", body = ErrorBody),
        (status = 404, description = "No such device (for the caller)", body = ErrorBody)))]
pub async fn create(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    JsonBody(request): JsonBody<CommandRequest>,
) -> ApiReply {
    let Some(device) = request.device_id.clone() else {
        return error(StatusCode::BAD_REQUEST, "`deviceId` is required");
    };
    let created = blocking(&state.commands, move |c| {
        c.create(scope, &device, &request, "http", &actor(scope), now_ms())
    })
    .await;
    match created {
        Ok(Ok(Created::New(command))) => json(StatusCode::CREATED, command),
        Ok(Ok(Created::Existing(command))) => ok(command),
        Ok(Err(e @ (CreateError::UnknownDevice(_) | CreateError::UnknownIdentity { .. }))) => {
            error(StatusCode::NOT_FOUND, e.to_string())
        }
        Ok(Err(e @ (CreateError::Invalid(_) | CreateError::Unauthorized(_)))) => {
            error(StatusCode::BAD_REQUEST, e.to_string())
        }
        Ok(Err(CreateError::Store(e))) => command_error(&e),
        Err(refused) => refused.into_response(),
    }
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only this device's.
    device_id: Option<String>,
    /// Only in this status (`PENDING`, `CLAIMED`, ...).
    status: Option<String>,
    /// At most this many (default 100, at most 1000).
    limit: Option<usize>,
}

/// `GET /commands`: the newest commands the caller sees, filtered by device
/// and status.
#[utoipa::path(get, path = "/commands", tag = "commands", security(("bearer" = [])),
    params(ListQuery),
    responses(
        (status = 200, description = "Newest first", body = CommandList),
        (status = 400, description = "Unknown status", body = ErrorBody)))]
pub async fn list(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Query(query): Query<ListQuery>,
) -> ApiReply {
    let status = match query.status.as_deref() {
        None => None,
        Some(given) => match CommandStatus::parse(given) {
            Some(status) => Some(status),
            None => {
                let names: Vec<&str> = CommandStatus::ALL.iter().map(|s| s.as_str()).collect();
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("unknown status `{given}`; one of {}", names.join(", ")),
                );
            }
        },
    };
    let filter = CommandFilter {
        device_id: query.device_id,
        status,
    };
    let limit = query.limit.unwrap_or(DEFAULT_LIST).clamp(1, MAX_LIST);
    match blocking(&state.commands, move |c| {
        c.store().list(scope, &filter, limit)
    })
    .await
    {
        Ok(Ok(commands)) => ok(CommandList { commands }),
        Ok(Err(e)) => command_error(&e),
        Err(refused) => refused.into_response(),
    }
}

#[utoipa::path(get, path = "/commands/{id}", tag = "commands", security(("bearer" = [])),
    params(("id" = u64, Path, description = "Command id")),
    responses(
        (status = 200, body = CommandView),
        (status = 404, description = "No such command (for the caller)", body = ErrorBody)))]
pub async fn get(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<u64>,
) -> ApiReply {
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
        Ok(Ok((command, history, (write, intent)))) => ok(CommandView {
            command,
            history,
            write,
            intent,
        }),
        Ok(Err(e)) => command_error(&e),
        Err(refused) => refused.into_response(),
    }
}

#[utoipa::path(post, path = "/commands/{id}/cancel", tag = "commands", security(("bearer" = [])),
    params(("id" = u64, Path, description = "Command id")),
    responses(
        (status = 200, description = "CANCELLED", body = Command),
        (status = 400, description = "Its status does not allow a cancel", body = CommandRefusal),
        (status = 404, description = "No such command (for the caller)", body = ErrorBody)))]
pub async fn cancel(
    State(state): State<ApiState>,
    Caller(scope): Caller,
    Path(id): Path<u64>,
) -> ApiReply {
    match blocking(&state.commands, move |c| {
        c.cancel(id, scope, &actor(scope), now_ms())
    })
    .await
    {
        Ok(Ok(command)) => ok(command),
        Ok(Err(e)) => command_error(&e),
        Err(refused) => refused.into_response(),
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimBody {
    /// The claiming node; its receipts must name it.
    node_id: String,
    /// At most this many (default 10, at most 100).
    max: Option<usize>,
}

#[utoipa::path(post, path = "/commands/claim", tag = "commands", security(("bearer" = [])),
    request_body = ClaimBody,
    responses(
        (status = 200, description = "The commands now CLAIMED by the node", body = CommandList),
        (status = 401, description = "Not a node token", body = ErrorBody),
        (status = 403, description = "Another node's token", body = ErrorBody)))]
pub async fn claim(
    State(state): State<ApiState>,
    NodeCaller(node): NodeCaller,
    JsonBody(body): JsonBody<ClaimBody>,
) -> ApiReply {
    if let Err(refused) = same_node(&node, &body.node_id) {
        return refused.into_response();
    }
    let max = body.max.unwrap_or(10).clamp(1, MAX_CLAIM);
    let claimed = blocking(&state.commands, move |c| {
        c.store().claim(&body.node_id, max, None, now_ms())
    })
    .await;
    match claimed {
        Ok(Ok(commands)) => ok(CommandList { commands }),
        Ok(Err(e)) => command_error(&e),
        Err(refused) => refused.into_response(),
    }
}

#[utoipa::path(post, path = "/commands/{id}/receipt", tag = "commands", security(("bearer" = [])),
    params(("id" = u64, Path, description = "Command id")),
    request_body = Receipt,
    responses(
        (status = 200, description = "Accepted or a duplicate", body = ReceiptReply),
        (status = 400, description = "Rejected: a field is missing", body = ReceiptReply),
        (status = 403, description = "Another node's token", body = ErrorBody),
        (status = 409, description = "Rejected: another node's claim", body = ReceiptReply)))]
pub async fn receipt(
    State(state): State<ApiState>,
    NodeCaller(node): NodeCaller,
    Path(id): Path<u64>,
    JsonBody(receipt): JsonBody<Receipt>,
) -> ApiReply {
    if let Err(refused) = same_node(&node, &receipt.node_id) {
        return refused.into_response();
    }
    let raw = |value: &Option<serde_json::Value>| value.as_ref().map_or(0, |v| v.to_string().len());
    let bounded = check_length(
        "message",
        receipt.message.as_deref().unwrap_or_default(),
        MAX_TEXT,
    )
    .and_then(|()| {
        if raw(&receipt.raw_ack) + raw(&receipt.raw_result_code) > MAX_TEXT {
            return Err(format!(
                "`rawAck` and `rawResultCode` take at most {MAX_TEXT} bytes of JSON"
            ));
        }
        Ok(())
    });
    if let Err(message) = bounded {
        return error(StatusCode::BAD_REQUEST, message);
    }
    match blocking(&state.commands, move |c| c.receipt(id, &receipt, now_ms())).await {
        Ok(Ok(outcome)) => receipt_reply(outcome),
        Ok(Err(e)) => command_error(&e),
        Err(refused) => refused.into_response(),
    }
}

/// A node token acts for its own node only: the body must name that node.
fn same_node(token_node: &str, body_node: &str) -> Result<(), RequestRefused> {
    if token_node == body_node {
        return Ok(());
    }
    Err(RequestRefused::from(error(
        StatusCode::FORBIDDEN,
        format!(
            "this node token belongs to node `{token_node}`; it cannot act for `{}`",
            clip(body_node, MAX_NAME)
        ),
    )))
}

fn receipt_reply(outcome: ReceiptOutcome) -> ApiReply {
    match outcome {
        ReceiptOutcome::Accepted(command) => ok(ReceiptReply::Accepted { command }),
        ReceiptOutcome::Duplicated => ok(ReceiptReply::Duplicated),
        ReceiptOutcome::Rejected(reason) => {
            let status = match reason {
                Rejection::ClaimGenerationRequired | Rejection::ResultCodeRequired => {
                    StatusCode::BAD_REQUEST
                }
                Rejection::NodeMismatch | Rejection::NodeUnknown => StatusCode::CONFLICT,
            };
            json(status, ReceiptReply::Rejected { reason })
        }
    }
}
