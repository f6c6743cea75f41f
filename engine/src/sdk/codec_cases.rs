//! Codec test cases, run by `sluice test`: for each case, the request a codec
//! sends for some tags and what it makes of an answer, framed as a link frames it.
//!
//! ```yaml
//! codec: target/wasm32-wasip2/release/dlt645.wasm  # beside this file, or a built-in name
//! protocol: dlt645              # which of the codec's protocols; its first when left out
//! settings: { meterAddress: "000000000001" }   # checked as a channel's, defaults filled in
//! tags:
//!   - { key: ua, address: '02010100', dataType: FLOAT64 }
//! cases:
//!   - name: phase A voltage after the wake-up bytes
//!     read: [ua]
//!     request: FE FE FE FE 68 01 00 00 00 00 00 68 11 04 33 34 34 35 B2 16   # optional
//!     answer: FE FE FE FE 68 01 00 00 00 00 00 68 91 06 33 34 34 35 CA 55 3F 16
//!     expect: [ { tag: ua, value: 229.7 } ]        # or `raw: "04D2"`, `quality`
//!   - name: the meter refuses
//!     read: [ua]
//!     answer: ...
//!     refused: 1                                    # the device's code
//! ```

use std::path::Path;
use std::sync::Arc;

use super::{load, read_tag};
use crate::config;
use crate::io::{Found, FrameFinder};
use crate::model::{FrameError, TagSpec};
use crate::pipeline::{Expected, check_expected, hex, read_expected};
use crate::runtime::{CodecSession, ComponentKind, Limits, Registry};
use crate::yaml::{Diagnostics, Fields, FromNode, Node, Pos};

/// One entry of `cases`.
struct Case {
    name: String,
    pos: Pos,
    read: Vec<u32>,
    request: Option<(Vec<u8>, Pos)>,
    answer: (Vec<u8>, Pos),
    refused: Option<u32>,
    expect: Vec<Expected>,
}

/// Runs the cases of the file `root` (read from `file`): how many passed, or
/// every problem and failure at its FILE:LINE:COL.
///
/// # Errors
/// The file's problems, a codec that does not load or refuses the settings and
/// tags, a case that failed.
pub fn run(file: &Path, root: &Node, registry: &Registry) -> Result<usize, Diagnostics> {
    let mut errors = Diagnostics::new(file.display().to_string());
    let Some(mut f) = Fields::of(root, "codec test file", &mut errors) else {
        return Err(errors);
    };
    let codec = f.required::<String>("codec", &mut errors);
    let codec_pos = f.node("codec").map_or(root.pos, |n| n.pos);
    let protocol = f
        .optional::<String>("protocol", &mut errors)
        .zip(f.node("protocol").map(|n| n.pos));
    let settings = f.node("settings");
    let tags: Vec<TagSpec> = match f.node("tags").map(|n| (n, n.as_seq())) {
        Some((_, Some(items))) => items
            .iter()
            .filter_map(|n| read_tag(n, &mut errors))
            .collect(),
        Some((n, None)) => {
            errors.push(n.pos, "`tags`: expected a list of tags");
            Vec::new()
        }
        None => Vec::new(),
    };
    let cases: Vec<Case> = match f.node("cases").map(|n| (n, n.as_seq())) {
        Some((_, Some(items))) => items
            .iter()
            .filter_map(|n| read_case(n, &tags, &mut errors))
            .collect(),
        _ => {
            errors.push(root.pos, "`cases`: expected a list of test cases");
            Vec::new()
        }
    };
    f.finish(&mut errors);
    let Some(codec) = codec else {
        return Err(errors);
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    let component = match load(file, &codec, ComponentKind::Codec, registry) {
        Ok(component) => component,
        Err(problem) => {
            errors.push(codec_pos, problem);
            return Err(errors);
        }
    };
    // Checked against the protocol's declaration, as a gateway checks a channel.
    let declared = match protocol {
        None => component.protocols().first(),
        Some((name, pos)) => {
            let found = component.protocols().iter().find(|p| p.name == name);
            if found.is_none() {
                let names: Vec<&str> = component
                    .protocols()
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect();
                errors.push(
                    pos,
                    format!(
                        "`protocol`: the codec speaks {}, not `{name}`",
                        names.join(", ")
                    ),
                );
            }
            found
        }
    };
    let settings = declared.map_or_else(Vec::new, |declared| {
        config::channel_settings(declared, settings, &mut errors)
    });
    if !errors.is_empty() {
        return Err(errors);
    }
    let pool = match registry.runtime().codec_pool(&component, Limits::default()) {
        Ok(pool) => pool,
        Err(problem) => {
            errors.push(codec_pos, problem.to_string());
            return Err(errors);
        }
    };
    let session = match pool.session(&settings, Arc::from(tags.as_slice())) {
        Ok(session) => session,
        Err(refused) => {
            errors.push(
                codec_pos,
                format!("the codec refuses the settings or tags: {refused}"),
            );
            return Err(errors);
        }
    };
    for case in &cases {
        run_case(&session, case, &tags, &mut errors);
    }
    errors.into_result(cases.len())
}

fn run_case(session: &CodecSession, case: &Case, tags: &[TagSpec], errors: &mut Diagnostics) {
    let label = format!("case `{}`", case.name);
    let fail = |errors: &mut Diagnostics, pos: Pos, message: String| {
        errors.push(pos, format!("{label}: {message}"));
    };
    let plan = match session.plan(&case.read) {
        Ok(plan) if plan.len() == 1 => plan,
        Ok(plan) => {
            return fail(
                errors,
                case.pos,
                format!("the codec plans {} requests; a case sends one", plan.len()),
            );
        }
        Err(failure) => return fail(errors, case.pos, failure.to_string()),
    };
    let id = plan[0].id;
    let sent = match session.encode_read(id) {
        Ok(Ok(sent)) => sent,
        Ok(Err(refused)) => return fail(errors, case.pos, format!("no request: {refused}")),
        Err(failure) => return fail(errors, case.pos, failure.to_string()),
    };
    if let Some((request, pos)) = &case.request
        && *request != sent
    {
        fail(errors, *pos, format!("the codec sends {}", spaced(&sent)));
    }
    let (answer, answer_pos) = &case.answer;
    let frame = match frame_of(session, answer) {
        Ok(frame) => frame,
        Err(problem) => return fail(errors, *answer_pos, problem),
    };
    let outcome = match session.parse_read(id, frame, 0) {
        Ok(outcome) => outcome,
        Err(failure) => return fail(errors, case.pos, failure.to_string()),
    };
    match (outcome, case.refused) {
        (Ok(batch), None) => {
            check_expected(&case.expect, &batch, tags, &label, errors);
        }
        (Err(FrameError::Device(refusal)), Some(code)) if refusal.code == code => {}
        (Ok(_), Some(code)) => fail(
            errors,
            case.pos,
            format!("expected the device's refusal {code}, got samples"),
        ),
        (Err(refused), _) => fail(
            errors,
            case.pos,
            format!("the codec refuses the answer: {refused}"),
        ),
    }
}

/// Where the frame of `answer` lies, found as a link finds it; the whole answer
/// must be that frame, after any bytes the codec skips.
fn frame_of<'a>(session: &CodecSession, answer: &'a [u8]) -> Result<&'a [u8], String> {
    let mut finder = FrameFinder::new(session).map_err(|e| e.to_string())?;
    match finder.step(session, answer).map_err(|e| e.to_string())? {
        Found::Need(len) => Err(format!(
            "the answer ends after {} bytes; the codec needs {len} to size its frame",
            answer.len()
        )),
        Found::Frame(frame) if frame.end > answer.len() => Err(format!(
            "the codec sizes the frame at {} bytes; the answer has {} after what it skipped",
            frame.len(),
            answer.len() - frame.start
        )),
        Found::Frame(frame) if frame.end < answer.len() => Err(format!(
            "{} bytes follow the frame of {} bytes",
            answer.len() - frame.end,
            frame.len()
        )),
        Found::Frame(frame) => Ok(&answer[frame]),
    }
}

fn spaced(bytes: &[u8]) -> String {
    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02X}")).collect();
    hex.join(" ")
}

fn read_case(node: &Node, tags: &[TagSpec], errors: &mut Diagnostics) -> Option<Case> {
    let mut f = Fields::of(node, "case", errors)?;
    let name = f.required::<String>("name", errors).unwrap_or_default();
    let read = f.optional_with("read", errors, |n| {
        let keys = n.as_seq().ok_or("expected a list of tag keys")?;
        keys.iter()
            .map(|k| {
                let key = String::from_node(k)?;
                tags.iter()
                    .position(|t| t.key == key)
                    .map(|i| i as u32)
                    .ok_or_else(|| format!("no tag `{key}` in `tags`"))
            })
            .collect::<Result<Vec<u32>, String>>()
    });
    let bytes = |n: &Node| {
        String::from_node(n)
            .and_then(|s| hex(&s))
            .map(|b| (b, n.pos))
    };
    let request = f.optional_with("request", errors, bytes);
    let answer = f
        .required_with("answer", errors, bytes)
        .map(|(answer, _)| answer);
    let refused = f.optional::<u32>("refused", errors);
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
        read: read.unwrap_or_else(|| (0..tags.len() as u32).collect()),
        request,
        answer: answer?,
        refused,
        expect,
    })
}
