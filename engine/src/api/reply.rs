//! The API's JSON replies: a typed body with its status, or an error.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// What a handler of the HTTP API answers.
pub type ApiReply = Response;

/// The body of every refusal.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What was wrong, for a person to read.
    pub error: String,
}

/// A refusal with its message.
pub fn error(status: StatusCode, message: impl Into<String>) -> ApiReply {
    (
        status,
        Json(ErrorBody {
            error: message.into(),
        }),
    )
        .into_response()
}

/// `body` as JSON, with `status`.
pub fn json(status: StatusCode, body: impl Serialize) -> ApiReply {
    (status, Json(body)).into_response()
}

/// `body` as JSON, 200.
pub fn ok(body: impl Serialize) -> ApiReply {
    json(StatusCode::OK, body)
}

/// A request refused: the reply that refuses it, carried in a `Result` until the
/// handler answers with it (boxed: a reply is large, and most results are not
/// refusals).
#[derive(Debug)]
pub struct RequestRefused(Box<ApiReply>);

impl From<ApiReply> for RequestRefused {
    fn from(reply: ApiReply) -> Self {
        Self(Box::new(reply))
    }
}

impl IntoResponse for RequestRefused {
    fn into_response(self) -> Response {
        *self.0
    }
}

/// What `answer` makes, run on one of tokio's blocking threads. For handlers that
/// read or write the store or render a large body: on the async workers they would
/// hold up devices' rounds meanwhile (with one worker, every device's).
pub async fn off_the_workers(answer: impl FnOnce() -> ApiReply + Send + 'static) -> ApiReply {
    tokio::task::spawn_blocking(answer)
        .await
        .unwrap_or_else(|e| error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}
