//! Bounds on what the engine takes from outside (downlink messages, the API's
//! bodies) and on what it echoes back (SEC-1 of `docs/security.md`): each field
//! is checked before anything is stored, and a reply never carries more of the
//! input than these allow, so no message can grow a reply past what the broker
//! takes.

use std::borrow::Cow;

use serde_json::Value as Json;

/// The longest `requestId`, in bytes.
pub const MAX_REQUEST_ID: usize = 128;
/// The longest name (a tag's `key`, a `deviceId`, a node id), in bytes.
pub const MAX_NAME: usize = 128;
/// The longest string value a write may carry, in bytes (a STRING tag holds at
/// most 256 characters of up to 4 bytes).
pub const MAX_STRING_VALUE: usize = 1024;
/// The largest array value a write may carry (an array tag's elements), in
/// bytes of JSON: room for 2000 coils, and within [`MAX_COMMAND_BYTES`].
pub const MAX_ARRAY_VALUE: usize = 12 * 1024;
/// The largest `property/set` or `function/invoke` payload, in bytes.
pub const MAX_COMMAND_BYTES: usize = 16 * 1024;
/// The largest `config/push` payload (or `PUT /devices/{id}/config` body), in bytes.
pub const MAX_PUSH_BYTES: usize = 1024 * 1024;
/// The longest free text taken (a note, a message, a vendor's raw answer), in bytes.
pub const MAX_TEXT: usize = 4096;
/// The most of a refusal's message a reply carries, in bytes.
pub const MAX_REPLY_MESSAGE: usize = 512;
/// The most problems a push's reply lists (the rest are counted).
pub const MAX_REPLY_PROBLEMS: usize = 100;

/// `text` cut to at most `max` bytes at a character boundary, with `…` when cut.
pub fn clip(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &text[..end]))
}

/// A `requestId` as a reply may echo it: a string up to [`MAX_REQUEST_ID`]
/// bytes or a number; anything else (too long, an object) becomes null.
pub fn echoed_request_id(id: &Json) -> Json {
    match id {
        Json::String(text) if text.len() <= MAX_REQUEST_ID => id.clone(),
        Json::Number(_) => id.clone(),
        _ => Json::Null,
    }
}

/// Checks that `text`, the field `field`, is at most `max` bytes.
///
/// # Errors
/// A message naming the field, its length and the bound (never the text).
pub fn check_length(field: &str, text: &str, max: usize) -> Result<(), String> {
    if text.len() > max {
        return Err(format!(
            "`{field}` is {} bytes long; at most {max} are taken",
            text.len()
        ));
    }
    Ok(())
}

/// Checks a value a caller wants written: a string at most
/// [`MAX_STRING_VALUE`] bytes, a number or a boolean, an array at most
/// [`MAX_ARRAY_VALUE`] bytes once written as JSON, an object at most
/// [`MAX_STRING_VALUE`].
///
/// # Errors
/// A message saying what is too big (never the value).
pub fn check_value(value: &Json) -> Result<(), String> {
    match value {
        Json::String(text) => check_length("value", text, MAX_STRING_VALUE),
        Json::Null | Json::Bool(_) | Json::Number(_) => Ok(()),
        Json::Array(_) | Json::Object(_) => {
            let max = if value.is_array() {
                MAX_ARRAY_VALUE
            } else {
                MAX_STRING_VALUE
            };
            let size = value.to_string().len();
            if size > max {
                return Err(format!(
                    "`value` is {size} bytes of JSON; at most {max} are taken"
                ));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn clipping_keeps_whole_characters_and_marks_the_cut() {
        assert_eq!(clip("short", 10), "short");
        let long = "é".repeat(300);
        let clipped = clip(&long, 101);
        assert!(clipped.len() <= 101, "{}", clipped.len());
        assert!(clipped.ends_with('…'));
    }

    #[test]
    fn only_bounded_ids_are_echoed_and_messages_never_carry_the_input() {
        assert_eq!(echoed_request_id(&json!("r-1")), json!("r-1"));
        assert_eq!(echoed_request_id(&json!(42)), json!(42));
        assert_eq!(echoed_request_id(&json!("x".repeat(129))), Json::Null);
        assert_eq!(echoed_request_id(&json!({"a": 1})), Json::Null);
        let huge = "y".repeat(600_000);
        let refusal = check_value(&json!(huge)).expect_err("too long");
        assert!(refusal.len() < 100 && !refusal.contains("yyy"), "{refusal}");
        assert!(check_value(&json!([1, 2, 3])).is_ok());
        assert!(check_value(&json!(vec![1; 2000])).is_ok(), "2000 coils");
        assert!(check_value(&json!(vec![1.25; 3000])).is_err());
        let object: serde_json::Map<String, Json> =
            (0..200).map(|i| (format!("k{i}"), json!(i))).collect();
        assert!(check_value(&Json::Object(object)).is_err());
        assert!(check_length("key", "k", MAX_NAME).is_ok());
    }
}
