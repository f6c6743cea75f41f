//! The JSON bodies the HTTP API reads. Byte 0 picks the endpoint, the rest is
//! the body; axum's `Json` extractor reads it with serde_json, as here, and
//! answers 400 or 422 with serde's message.

use serde::de::DeserializeOwned;
use sluice::api::{ClaimBody, EventBody, SetState};
use sluice::command::{CommandRequest, Receipt};

fn read<T: DeserializeOwned>(body: &[u8]) {
    if let Err(error) = serde_json::from_slice::<T>(body) {
        assert!(
            !error.to_string().is_empty(),
            "a body refused without a reason"
        );
    }
}

pub fn body(data: &[u8]) {
    let Some((&endpoint, body)) = data.split_first() else {
        return;
    };
    match endpoint % 5 {
        0 => read::<CommandRequest>(body),
        1 => read::<ClaimBody>(body),
        2 => read::<Receipt>(body),
        3 => read::<EventBody>(body),
        _ => read::<SetState>(body),
    }
}
