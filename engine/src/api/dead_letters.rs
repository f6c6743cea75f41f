//! Messages set aside because they can never be sent (WAL-9 of
//! `docs/wal.md`), for the operator (admin token):
//! - `GET /dead-letters`: each one's topic, device, seq, size, why and when;
//! - `POST /dead-letters/{id}/resend`: send it again (after the broker's limit
//!   was raised, say); it leaves the list;
//! - `DELETE /dead-letters/{id}`: drop it for good.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::Admin;
use super::reply::{ApiReply, ErrorBody, error, off_the_workers, ok};
use super::state::ApiState;
use crate::wal::{DeadLetter, DeadLetterView, WalError};

/// The dead letters, oldest first.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetterList {
    dead_letters: Vec<DeadLetterView>,
}

#[utoipa::path(get, path = "/dead-letters", tag = "engine", security(("bearer" = [])),
    responses(
        (status = 200, body = DeadLetterList),
        (status = 403, description = "Not the admin token", body = ErrorBody)))]
pub async fn list(State(state): State<ApiState>, _admin: Admin) -> ApiReply {
    off_the_workers(move || match state.outbox.dead_letters() {
        Ok(letters) => ok(DeadLetterList {
            dead_letters: letters.iter().map(DeadLetter::view).collect(),
        }),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    })
    .await
}

#[utoipa::path(post, path = "/dead-letters/{id}/resend", tag = "engine", security(("bearer" = [])),
    params(("id" = u64, Path, description = "Dead letter id")),
    responses(
        (status = 200, description = "Sent again: what it was", body = DeadLetterView),
        (status = 404, description = "No such dead letter", body = ErrorBody)))]
pub async fn resend(State(state): State<ApiState>, _admin: Admin, Path(id): Path<u64>) -> ApiReply {
    off_the_workers(move || answer(id, state.outbox.resend_dead_letter(id))).await
}

#[utoipa::path(delete, path = "/dead-letters/{id}", tag = "engine", security(("bearer" = [])),
    params(("id" = u64, Path, description = "Dead letter id")),
    responses(
        (status = 200, description = "Dropped: what it was", body = DeadLetterView),
        (status = 404, description = "No such dead letter", body = ErrorBody)))]
pub async fn discard(
    State(state): State<ApiState>,
    _admin: Admin,
    Path(id): Path<u64>,
) -> ApiReply {
    off_the_workers(move || answer(id, state.outbox.discard_dead_letter(id))).await
}

fn answer(id: u64, taken: Result<Option<DeadLetter>, WalError>) -> ApiReply {
    match taken {
        Ok(Some(letter)) => ok(letter.view()),
        Ok(None) => error(StatusCode::NOT_FOUND, format!("no dead letter {id}")),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
