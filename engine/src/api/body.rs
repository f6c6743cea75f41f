//! JSON request bodies, read after the caller was let in: a body that is not
//! what the route takes is answered 400 with serde's reason, clipped, so an
//! answer never carries more of the input than a few hundred bytes.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use super::reply::{RequestRefused, error};
use crate::mqtt::limits::{MAX_REPLY_MESSAGE, clip};

/// A JSON body of type `T`.
#[derive(Debug, Clone)]
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = RequestRefused;

    async fn from_request(request: Request, state: &S) -> Result<Self, RequestRefused> {
        let bytes = Bytes::from_request(request, state).await.map_err(|e| {
            RequestRefused::from(error(e.status(), clip(&e.body_text(), MAX_REPLY_MESSAGE)))
        })?;
        serde_json::from_slice(&bytes).map(JsonBody).map_err(|e| {
            let reason = e.to_string();
            error(
                StatusCode::BAD_REQUEST,
                format!(
                    "the body is not what this route takes: {}",
                    clip(&reason, MAX_REPLY_MESSAGE)
                ),
            )
            .into()
        })
    }
}
