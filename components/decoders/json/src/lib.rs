//! Decoder `json`: a message is a JSON document, and each tag's `address` is a
//! JSON Pointer (RFC 6901) to its value in it: `/temp`, `/sensors/0/temp`,
//! `/a~1b` for the member `a/b`. A value is taken as the tag's `dataType`
//! (numbers, booleans, and strings holding either; any value for a STRING
//! tag), checked against its range, and goes through the device's pipeline
//! (factor, offset, deadband, ...) as a register's would; an array tag takes a
//! JSON array of exactly `length` values. A message that is not JSON refuses
//! every tag; a tag whose pointer finds nothing, `null`, or a value not of its
//! type is refused with the reason.
//!
//! A write publishes `{...}` holding the value at the tag's pointer (each
//! reference token a member: `/set/temp` -> `{"set":{"temp":21.5}}`) on the
//! channel's `commandTopic`. Settings: `commandTopic` (the engine fills it
//! in) and `timestamp`, a JSON Pointer to when the values were measured (ms
//! since the Unix epoch; a message without a number there is stamped when it
//! arrived).
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use find::{Pointers, unescape};
use serde_json::{Map, Value as Json};
use sluice_guest::columns::Columns;
use sluice_guest::decoder::{CommandTopic, Decoder, Field, Outgoing, Refusal, Written, typed};
use sluice_guest::numeric::{DataType, Number};
use sluice_guest::settings::{SettingValue, unknown_key, wrong_type};
use sluice_guest::stages::{Issue, Settings};

mod find;

sluice_guest::builtin_decoder_component!(JsonDecoder);

/// The `json` decoder of one device.
pub struct JsonDecoder {
    fields: Vec<JsonField>,
    command_topic: CommandTopic,
    /// The fields' pointers and the timestamp's, found in one pass.
    pointers: Pointers,
    /// The slot of where a message says when its values were measured.
    timestamp: Option<usize>,
}

struct JsonField {
    pointer: String,
    /// Where [`Pointers::find`] puts the value at `pointer`.
    slot: usize,
    data_type: DataType,
    array_len: Option<u32>,
    readable: bool,
    writable: bool,
}

impl Decoder for JsonDecoder {
    fn create(settings: &Settings<'_>, fields: &[Field<'_>]) -> Result<Self, Vec<Issue>> {
        let mut issues = Vec::new();
        let mut command_topic = CommandTopic::default();
        let mut timestamp = None;
        for (key, value) in settings {
            if command_topic.take(key, value, &mut issues) {
                continue;
            }
            match (*key, value) {
                ("timestamp", SettingValue::Text(pointer)) => match check_pointer(pointer) {
                    Ok(()) => timestamp = Some(pointer.to_string()),
                    Err(message) => issues.push(Issue::new(None, key, message)),
                },
                ("timestamp", other) => {
                    issues.push(Issue::new(None, key, wrong_type(key, "text", other)))
                }
                _ => issues.push(Issue::new(
                    None,
                    key,
                    unknown_key(key, &["commandTopic", "timestamp"]),
                )),
            }
        }
        for (i, field) in fields.iter().enumerate() {
            if let Err(message) = check_pointer(field.address) {
                issues.push(Issue::new(Some(i as u32), "address", message));
            }
        }
        if !issues.is_empty() {
            return Err(issues);
        }
        let (pointers, slots) =
            Pointers::new(fields.iter().map(|f| f.address).chain(timestamp.as_deref()));
        Ok(Self {
            fields: fields
                .iter()
                .zip(&slots)
                .map(|(field, &slot)| JsonField {
                    pointer: field.address.to_string(),
                    slot,
                    data_type: field.tag.data_type,
                    array_len: field.tag.array_len,
                    readable: field.readable,
                    writable: field.writable,
                })
                .collect(),
            command_topic,
            pointers,
            // The timestamp's pointer came after the fields'.
            timestamp: timestamp.and(slots.get(fields.len()).copied()),
        })
    }

    fn decode(
        &self,
        _topic: &str,
        payload: &[u8],
        ts_ms: i64,
        out: &mut Columns,
        refusals: &mut Vec<Refusal>,
    ) {
        let found = match core::str::from_utf8(payload) {
            Ok(text) => self.pointers.find(text).map_err(|e| e.to_string()),
            Err(error) => Err(format!("it is not UTF-8 text ({error})")),
        };
        let found = match found {
            Ok(found) => found,
            Err(error) => {
                refusals.push(Refusal {
                    tag: None,
                    message: format!("the message is not JSON: {error}"),
                });
                return;
            }
        };
        let ts_ms = self
            .timestamp
            .and_then(|slot| found[slot].as_ref())
            .and_then(Json::as_i64)
            .unwrap_or(ts_ms);
        for (i, field) in self.fields.iter().enumerate() {
            if !field.readable {
                continue;
            }
            let tag = i as u32;
            let taken = match &found[field.slot] {
                None => Err(format!("no `{}` in the message", field.pointer)),
                Some(Json::Null) => Err(format!("`{}` is null", field.pointer)),
                Some(found) => field.take(found),
            };
            match taken {
                Ok(Written::One(number)) => out.push_number(tag, number, ts_ms),
                Ok(Written::Array(numbers)) => out.push_array(tag, numbers, ts_ms),
                Err(message) => refusals.push(Refusal {
                    tag: Some(tag),
                    message: format!("`{}`: {message}", field.pointer),
                }),
            }
        }
    }

    fn encode(&self, tag: u32, value: &Written) -> Result<Outgoing, String> {
        let field = self
            .fields
            .get(tag as usize)
            .filter(|f| f.writable)
            .ok_or("the tag is not writable")?;
        let topic = self.command_topic.topic()?;
        let json = match (value, field.array_len) {
            (Written::One(number), None) => to_json(&typed(field.data_type, number)?)?,
            (Written::Array(numbers), Some(len)) if numbers.len() == len as usize => Json::Array(
                numbers
                    .iter()
                    .map(|n| typed(field.data_type, n).and_then(|n| to_json(&n)))
                    .collect::<Result<_, _>>()?,
            ),
            (Written::Array(_), None) => return Err("the tag holds one value, not an array".into()),
            (_, Some(len)) => return Err(format!("the tag is an array of {len} values")),
        };
        let payload = nest(&field.pointer, json);
        Ok(Outgoing {
            topic,
            payload: serde_json::to_vec(&payload).map_err(|e| e.to_string())?,
        })
    }
}

impl JsonField {
    /// The value `found` gives the tag, or why it gives none.
    fn take(&self, found: &Json) -> Result<Written, String> {
        match (self.array_len, found) {
            (None, Json::Array(_)) => Err("an array, for a tag of one value".into()),
            (None, one) => Ok(Written::One(self.typed(one)?)),
            (Some(len), Json::Array(items)) if items.len() == len as usize => items
                .iter()
                .map(|item| self.typed(item))
                .collect::<Result<_, _>>()
                .map(Written::Array),
            (Some(len), Json::Array(items)) => Err(format!(
                "an array of {} values, for an array tag of {len}",
                items.len()
            )),
            (Some(len), _) => Err(format!("not an array, for an array tag of {len}")),
        }
    }

    fn typed(&self, value: &Json) -> Result<Number, String> {
        let number = match (self.data_type, value) {
            (DataType::String(_), Json::String(text)) => Number::Text(text.clone()),
            (DataType::String(_), Json::Number(n)) => Number::Text(n.to_string()),
            (DataType::String(_), Json::Bool(b)) => Number::Text(b.to_string()),
            (_, Json::Bool(b)) => Number::Bool(*b),
            (_, Json::Number(n)) => number(n),
            (_, Json::String(text)) => {
                parse(text).ok_or_else(|| format!("{text:?} is not a number"))?
            }
            (_, _) => return Err("an object or an array, not a value".into()),
        };
        typed(self.data_type, &number)
    }
}

fn number(n: &serde_json::Number) -> Number {
    if let Some(v) = n.as_i64() {
        Number::Int(v)
    } else if let Some(v) = n.as_u64() {
        Number::Uint(v)
    } else {
        Number::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// A number or boolean written as text (`"21.5"`, `"true"`).
fn parse(text: &str) -> Option<Number> {
    let text = text.trim();
    match text {
        "true" => return Some(Number::Bool(true)),
        "false" => return Some(Number::Bool(false)),
        _ => {}
    }
    text.parse::<i64>()
        .map(Number::Int)
        .or_else(|_| text.parse::<u64>().map(Number::Uint))
        .or_else(|_| text.parse::<f64>().map(Number::Float))
        .ok()
}

fn to_json(number: &Number) -> Result<Json, String> {
    Ok(match number {
        Number::Bool(v) => Json::Bool(*v),
        Number::Int(v) => Json::from(*v),
        Number::Uint(v) => Json::from(*v),
        Number::Float(v) => serde_json::Number::from_f64(*v)
            .map(Json::Number)
            .ok_or_else(|| format!("{v} has no JSON form"))?,
        Number::Text(v) => Json::String(v.clone()),
    })
}

/// `value` at `pointer` in an otherwise empty document, each reference token
/// a member.
fn nest(pointer: &str, value: Json) -> Json {
    let tokens: Vec<String> = pointer.split('/').skip(1).map(unescape).collect();
    tokens.into_iter().rev().fold(value, |inner, token| {
        let mut object = Map::new();
        object.insert(token, inner);
        Json::Object(object)
    })
}

/// An RFC 6901 pointer: empty (the whole document) or `/`-separated reference
/// tokens, `~` only as `~0` or `~1`.
fn check_pointer(pointer: &str) -> Result<(), String> {
    if !pointer.is_empty() && !pointer.starts_with('/') {
        return Err(format!(
            "`{pointer}` is not a JSON Pointer: it starts with `/` (`/{pointer}`)"
        ));
    }
    let mut chars = pointer.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
            return Err(format!(
                "`{pointer}`: `~` is written `~0` in a JSON Pointer, `/` in a member `~1`"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
