//! The API's JSON replies: a typed body with its status, or an error.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// What a handler answers.
pub type Reply = Response;

/// The body of every refusal.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What was wrong, for a person to read.
    pub error: String,
}

/// A refusal with its message.
pub fn error(status: StatusCode, message: impl Into<String>) -> Reply {
    (
        status,
        Json(ErrorBody {
            error: message.into(),
        }),
    )
        .into_response()
}

/// `body` as JSON, with `status`.
pub fn json(status: StatusCode, body: impl Serialize) -> Reply {
    (status, Json(body)).into_response()
}

/// `body` as JSON, 200.
pub fn ok(body: impl Serialize) -> Reply {
    json(StatusCode::OK, body)
}

/// A refusal carried in a `Result` until the handler answers with it (boxed:
/// a reply is large, and most results are not refusals).
#[derive(Debug)]
pub struct Refused(Box<Reply>);

impl From<Reply> for Refused {
    fn from(reply: Reply) -> Self {
        Self(Box::new(reply))
    }
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        *self.0
    }
}

/// What `answer` makes, run on one of tokio's blocking threads. For handlers that
/// read or write the store or render a large body: on the async workers they would
/// hold up devices' rounds meanwhile (with one worker, every device's).
pub async fn off_the_workers(answer: impl FnOnce() -> Reply + Send + 'static) -> Reply {
    tokio::task::spawn_blocking(answer)
        .await
        .unwrap_or_else(|e| error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}
