//! `sluice sign --key-file FILE --topic TOPIC [PAYLOAD]`: the downlink message a
//! platform publishes on `TOPIC`, signed with the first key of `FILE` (see
//! `docs/security.md`). `PAYLOAD` is a JSON object (else read from stdin) with
//! a `requestId`; `ts` is set to now unless it has one.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::Value as Json;

use sluice::config::read_keys;
use sluice::mqtt::signature;

pub fn run(key_file: &Path, topic: &str, payload: Option<String>) -> anyhow::Result<ExitCode> {
    let keys = read_keys(key_file).map_err(anyhow::Error::msg)?;
    let Some(key) = keys.first() else {
        bail!("{} holds no key", key_file.display());
    };
    let text = match payload {
        Some(text) => text,
        None => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the payload from stdin")?;
            text
        }
    };
    let mut body: Json = serde_json::from_str(&text).context("the payload is not JSON")?;
    let Some(object) = body.as_object_mut() else {
        bail!("a downlink payload is a JSON object");
    };
    if !object.get("requestId").is_some_and(Json::is_string) {
        bail!("a signed message needs a `requestId` (a string): it is what makes a repeat known");
    }
    object
        .entry("ts")
        .or_insert_with(|| Json::from(sluice::clock::now_ms()));
    let signed = signature::sign(key.expose().as_bytes(), topic, &body.to_string())
        .map_err(anyhow::Error::msg)?;
    #[allow(clippy::print_stdout)]
    {
        println!("{signed}");
    }
    Ok(ExitCode::SUCCESS)
}
