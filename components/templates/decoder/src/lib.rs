//! A custom decoder: messages of `key=value` pairs separated by `;`
//! (`temp=21.5;rh=40`), each tag's `address` the key its value is under. A
//! write publishes `key=value` on the channel's `commandTopic`.
//!
//! A decoder turns each message a device publishes into samples of its tags.
//! `create` checks the settings and the tags' addresses once; `decode` runs
//! for every message and says, for each tag it could not give a value, why;
//! `encode` makes the message of a write.
//!
//! Build: `cargo build --release --target wasm32-wasip2`; test:
//! `sluice test tests/cases.yaml`; upload: `PUT /components/NAME/VERSION?kind=decoder`
//! (README.md of this crate).
#![cfg_attr(not(test), no_std)]

extern crate alloc;

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use sluice_guest::columns::Columns;
use sluice_guest::decoder::{CommandTopic, Decoder, Field, Outgoing, Refusal, Written, typed};
use sluice_guest::numeric::{DataType, Number};
use sluice_guest::settings::unknown_key;
use sluice_guest::stages::{Issue, Settings};

/// The decoder and what `create` made of its settings and tags.
struct KeyValues {
    /// Each tag's key in a message, its type, whether a message carries it.
    fields: Vec<(String, DataType, bool)>,
    command_topic: CommandTopic,
}

impl Decoder for KeyValues {
    fn create(settings: &Settings<'_>, fields: &[Field<'_>]) -> Result<Self, Vec<Issue>> {
        let mut issues = Vec::new();
        // The engine hands every decoder its channel's `commandTopic`.
        let mut command_topic = CommandTopic::default();
        for (key, value) in settings {
            if !command_topic.take(key, value, &mut issues) {
                issues.push(Issue::new(None, key, unknown_key(key, &["commandTopic"])));
            }
        }
        for (i, field) in fields.iter().enumerate() {
            if field.address.is_empty() || field.address.contains(['=', ';']) {
                let message = format!("`{}` is not a key (no `=` or `;`)", field.address);
                issues.push(Issue::new(Some(i as u32), "address", message));
            }
            if field.tag.array_len.is_some() {
                issues.push(Issue::new(
                    Some(i as u32),
                    "length",
                    "arrays are not supported".into(),
                ));
            }
        }
        if !issues.is_empty() {
            return Err(issues);
        }
        Ok(KeyValues {
            fields: fields
                .iter()
                .map(|f| (f.address.to_string(), f.tag.data_type, f.readable))
                .collect(),
            command_topic,
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
        let Ok(text) = core::str::from_utf8(payload) else {
            refusals.push(Refusal {
                tag: None,
                message: "the message is not text".into(),
            });
            return;
        };
        let pairs: Vec<(&str, &str)> = text
            .split(';')
            .filter_map(|pair| pair.split_once('='))
            .map(|(key, value)| (key.trim(), value.trim()))
            .collect();
        for (i, (key, data_type, readable)) in self.fields.iter().enumerate() {
            if !readable {
                continue;
            }
            let tag = i as u32;
            let Some((_, value)) = pairs.iter().find(|(k, _)| k == key) else {
                refusals.push(Refusal {
                    tag: Some(tag),
                    message: format!("no `{key}` in the message"),
                });
                continue;
            };
            let number = match value.parse::<f64>() {
                Ok(number) => Number::Float(number),
                Err(_) => Number::Text(value.to_string()),
            };
            match typed(*data_type, &number) {
                Ok(number) => out.push_number(tag, number, ts_ms),
                Err(message) => refusals.push(Refusal {
                    tag: Some(tag),
                    message: format!("`{key}`: {message}"),
                }),
            }
        }
    }

    fn encode(&self, tag: u32, value: &Written) -> Result<Outgoing, String> {
        let (key, data_type, _) = self.fields.get(tag as usize).ok_or("no such tag")?;
        let topic = self.command_topic.topic()?;
        let Written::One(number) = value else {
            return Err("arrays are not supported".into());
        };
        let value = match typed(*data_type, number)? {
            Number::Bool(v) => format!("{}", u8::from(v)),
            Number::Int(v) => format!("{v}"),
            Number::Uint(v) => format!("{v}"),
            Number::Float(v) => format!("{v}"),
            Number::Text(v) => v,
        };
        Ok(Outgoing {
            topic,
            payload: format!("{key}={value}").into_bytes(),
        })
    }
}

sluice_guest::decoder_component!(KeyValues);
