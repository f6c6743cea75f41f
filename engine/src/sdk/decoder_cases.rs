//! Decoder test cases, run by `sluice test`: what a decoder makes of a message
//! (its samples, the tags it refuses) and of a write (the topic and payload).
//!
//! ```yaml
//! decoder: target/wasm32-wasip2/release/kv.wasm   # beside this file, or a built-in (json, binary)
//! settings: { commandTopic: sensors/7/set }       # the channel's decoder settings
//! tags:
//!   - { key: temp, address: temp, dataType: FLOAT32 }
//!   - { key: rh, address: rh, dataType: UINT16, access: RW }
//! cases:
//!   - name: a whole message
//!     topic: sensors/7/up        # optional
//!     message: temp=21.5;rh=40   # the payload as text, or `hex: 01 02 ...`
//!     expect: [ { tag: temp, value: 21.5 }, { tag: rh, value: 40 } ]
//!     refused: [ rh ]            # tags it refuses (`message`: the whole message)
//!   - name: a write
//!     write: { tag: rh, value: 45 }
//!     publish: { topic: sensors/7/set, message: rh=45 }  # or `refused: [rh]`
//! ```

use std::path::Path;
use std::sync::Arc;

use super::{load, read_tag};
use crate::model::{Setting, SettingValue, TagSpec, Value};
use crate::pipeline::{Expected, check_expected, hex, read_expected, value_of};
use crate::runtime::{ComponentKind, Limits, PayloadDecoder, Registry};
use crate::yaml::{Diagnostics, Fields, FromNode, Kind, Node, Pos};

/// What a case hands the decoder.
enum Input {
    /// A message on a topic.
    Message { topic: String, payload: Vec<u8> },
    /// A write of a value to a tag.
    Write { tag: u32, value: Value },
}

/// What a write case expects.
struct Published {
    topic: String,
    payload: Vec<u8>,
    pos: Pos,
}

/// One entry of `cases`.
struct Case {
    name: String,
    pos: Pos,
    input: Input,
    expect: Vec<Expected>,
    /// Tags it must refuse (`None` in the list: the whole message), and where.
    refused: Option<(Vec<Option<u32>>, Pos)>,
    publish: Option<Published>,
}

/// Runs the cases of the file `root` (read from `file`): how many passed, or
/// every problem and failure at its FILE:LINE:COL.
///
/// # Errors
/// The file's problems, a decoder that does not load or refuses the settings
/// and tags, a case that failed.
pub fn run(file: &Path, root: &Node, registry: &Registry) -> Result<usize, Diagnostics> {
    let mut errors = Diagnostics::new(file.display().to_string());
    let Some(mut f) = Fields::of(root, "decoder test file", &mut errors) else {
        return Err(errors);
    };
    let decoder = f.required::<String>("decoder", &mut errors);
    let decoder_pos = f.node("decoder").map_or(root.pos, |n| n.pos);
    let settings = f
        .node("settings")
        .map(|n| read_settings(n, &mut errors))
        .unwrap_or_default();
    let tags: Vec<TagSpec> = match f.node("tags").and_then(Node::as_seq) {
        Some(items) => items
            .iter()
            .filter_map(|n| read_tag(n, &mut errors))
            .collect(),
        None => {
            errors.push(root.pos, "`tags`: expected a list of tags");
            Vec::new()
        }
    };
    let cases: Vec<Case> = match f.node("cases").and_then(Node::as_seq) {
        Some(items) => items
            .iter()
            .filter_map(|n| read_case(n, &tags, &mut errors))
            .collect(),
        None => {
            errors.push(root.pos, "`cases`: expected a list of test cases");
            Vec::new()
        }
    };
    f.finish(&mut errors);
    let Some(decoder) = decoder else {
        return Err(errors);
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    let made = load(file, &decoder, ComponentKind::Decoder, registry).and_then(|component| {
        let pool = registry
            .runtime()
            .decoder_pool(&component, Limits::default())
            .map_err(|e| e.to_string())?;
        pool.decoder(&settings, Arc::from(tags.as_slice()), true)
            .map_err(|e| format!("the decoder refuses the settings or tags: {e}"))
    });
    let decoder = match made {
        Ok(decoder) => decoder,
        Err(problem) => {
            errors.push(decoder_pos, problem);
            return Err(errors);
        }
    };
    let count = cases.len();
    for case in cases {
        run_case(&decoder, case, &tags, &mut errors);
    }
    errors.into_result(count)
}

fn run_case(decoder: &PayloadDecoder, case: Case, tags: &[TagSpec], errors: &mut Diagnostics) {
    let label = format!("case `{}`", case.name);
    let fail = |errors: &mut Diagnostics, pos: Pos, message: String| {
        errors.push(pos, format!("{label}: {message}"));
    };
    match case.input {
        Input::Message { topic, payload } => {
            let decoded = match decoder.decode(&topic, &payload, 0) {
                Ok(decoded) => decoded,
                Err(failure) => return fail(errors, case.pos, failure.to_string()),
            };
            check_expected(&case.expect, &decoded.samples, tags, &label, errors);
            let mut refused: Vec<Option<u32>> = decoded.refusals.iter().map(|r| r.tag).collect();
            refused.sort_unstable();
            refused.dedup();
            let (mut wanted, pos) = case.refused.unwrap_or((Vec::new(), case.pos));
            wanted.sort_unstable();
            if refused != wanted {
                let said: Vec<String> = decoded
                    .refusals
                    .iter()
                    .map(|r| match r.tag.and_then(|t| tags.get(t as usize)) {
                        Some(tag) => format!("{}: {}", tag.key, r.message),
                        None => format!("the message: {}", r.message),
                    })
                    .collect();
                let said = if said.is_empty() {
                    "nothing".to_owned()
                } else {
                    said.join("; ")
                };
                fail(errors, pos, format!("the decoder refuses {said}"));
            }
        }
        Input::Write { tag, value } => {
            let encoded = match decoder.encode(tag, value) {
                Ok(encoded) => encoded,
                Err(failure) => return fail(errors, case.pos, failure.to_string()),
            };
            match (encoded, case.publish, case.refused) {
                (Ok(out), Some(wanted), None) => {
                    if out.topic != wanted.topic || out.payload != wanted.payload {
                        let shown = String::from_utf8_lossy(&out.payload).into_owned();
                        fail(
                            errors,
                            wanted.pos,
                            format!("the decoder publishes {shown:?} on `{}`", out.topic),
                        );
                    }
                }
                (Err(_), None, Some(_)) => {}
                (Ok(out), None, Some((_, pos))) => fail(
                    errors,
                    pos,
                    format!("the decoder writes it (on `{}`)", out.topic),
                ),
                (Err(refusal), _, _) => {
                    fail(
                        errors,
                        case.pos,
                        format!("the decoder refuses the write: {refusal}"),
                    );
                }
                (Ok(_), _, _) => fail(
                    errors,
                    case.pos,
                    "a write case says what is published (`publish`) or that it is refused".into(),
                ),
            }
        }
    }
}

/// The decoder's settings: a mapping of single values.
fn read_settings(node: &Node, errors: &mut Diagnostics) -> Vec<Setting> {
    let Some(entries) = node.as_map() else {
        errors.push(node.pos, "`settings`: expected a mapping");
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|(key, value)| {
            let value = match &value.kind {
                Kind::Bool(v) => SettingValue::Bool(*v),
                Kind::Int(v) => SettingValue::Int(*v),
                Kind::Float(v) => SettingValue::Float(*v),
                Kind::Str(v) => SettingValue::Text(v.clone()),
                other => {
                    errors.push(
                        value.pos,
                        format!(
                            "`{}`: expected one value, found {}",
                            key.name,
                            other.describe()
                        ),
                    );
                    return None;
                }
            };
            Some(Setting {
                key: key.name.clone(),
                value,
            })
        })
        .collect()
}

/// The payload of a message: `message` (text) or `hex` (bytes) in `f`.
fn payload(f: &mut Fields<'_>, errors: &mut Diagnostics) -> Option<Vec<u8>> {
    let text = f.optional::<String>("message", errors);
    let bytes = f.optional_with("hex", errors, |n| {
        String::from_node(n).and_then(|s| hex(&s))
    });
    match (text, bytes) {
        (Some(text), None) => Some(text.into_bytes()),
        (None, Some(bytes)) => Some(bytes),
        _ => {
            errors.push(
                f.pos(),
                "give the payload as `message` (text) or `hex` (bytes), one of them",
            );
            None
        }
    }
}

fn tag_of(tags: &[TagSpec], node: &Node) -> Result<u32, String> {
    let key = String::from_node(node)?;
    tags.iter()
        .position(|t| t.key == key)
        .map(|i| i as u32)
        .ok_or_else(|| format!("no tag `{key}` in `tags`"))
}

fn read_case(node: &Node, tags: &[TagSpec], errors: &mut Diagnostics) -> Option<Case> {
    let mut f = Fields::of(node, "case", errors)?;
    let name = f.required::<String>("name", errors).unwrap_or_default();
    let input = match f.node("write") {
        Some(write) => {
            let mut w = Fields::of(write, "write", errors)?;
            let tag = w.required_with("tag", errors, |n| tag_of(tags, n));
            let value = w.entry("value").map(value_of);
            w.finish(errors);
            let value = match value {
                Some(Ok(value)) => value,
                Some(Err(message)) => {
                    errors.push(write.pos, format!("`value`: {message}"));
                    return None;
                }
                None => {
                    errors.push(write.pos, "a write needs a `value`");
                    return None;
                }
            };
            Input::Write { tag: tag?.0, value }
        }
        None => {
            let topic = f.optional::<String>("topic", errors).unwrap_or_default();
            Input::Message {
                topic,
                payload: payload(&mut f, errors)?,
            }
        }
    };
    let publish = f.node("publish").and_then(|n| {
        let mut p = Fields::of(n, "publish", errors)?;
        let topic = p.required::<String>("topic", errors);
        let payload = payload(&mut p, errors);
        p.finish(errors);
        Some(Published {
            topic: topic?,
            payload: payload?,
            pos: n.pos,
        })
    });
    let refused = f.node("refused").map(|n| {
        let items = n.as_seq().unwrap_or_default();
        let listed = items
            .iter()
            .filter_map(|item| match &item.kind {
                Kind::Str(word) if word == "message" => Some(None),
                _ => tag_of(tags, item)
                    .map(Some)
                    .map_err(|message| errors.push(item.pos, format!("`refused`: {message}")))
                    .ok(),
            })
            .collect();
        (listed, n.pos)
    });
    let expect: Vec<Expected> = f
        .node("expect")
        .and_then(Node::as_seq)
        .map(|items| {
            items
                .iter()
                .filter_map(|n| read_expected(n, tags, errors))
                .collect()
        })
        .unwrap_or_default();
    f.finish(errors);
    Some(Case {
        name,
        pos: node.pos,
        input,
        expect,
        refused,
        publish,
    })
}
