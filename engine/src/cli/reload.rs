//! `sluice reload --config FILE`: asks the gateway running with that
//! configuration (over its HTTP API, with its admin token: the configured one,
//! else the one it made in its data directory) to read its pipeline files and
//! device configuration again now, and prints what it did.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use sluice::config;
use sluice::gateway::ADMIN_TOKEN_FILE;

/// Longest wait for the gateway's answer (a reload compiles pipelines).
const ANSWER_WITHIN: Duration = Duration::from_secs(120);

pub fn run(config_path: &Path) -> anyhow::Result<ExitCode> {
    let collector =
        config::load_collector(config_path).map_err(|problems| anyhow::anyhow!("{problems}"))?;
    let Some(http) = &collector.http else {
        anyhow::bail!(
            "{}: the gateway has no HTTP API (`collector.http`); it still reloads edited files by itself",
            config_path.display()
        );
    };
    // The configured admin token, else the one the gateway made and kept.
    let kept = Path::new(&collector.wal.dir).join(ADMIN_TOKEN_FILE);
    let token = match &http.admin_token {
        Some(token) => token.clone(),
        None => std::fs::read_to_string(&kept)
            .map(|token| token.trim().to_owned())
            .with_context(|| {
                format!(
                    "{}: no `collector.http.adminToken`, and the one the gateway makes cannot be read from {}",
                    config_path.display(),
                    kept.display()
                )
            })?,
    };
    let mut stream = TcpStream::connect_timeout(&http.listen, Duration::from_secs(5))
        .with_context(|| format!("no gateway answers on {}", http.listen))?;
    stream.set_read_timeout(Some(ANSWER_WITHIN))?;
    write!(
        stream,
        "POST /reload HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        http.listen
    )?;
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .with_context(|| format!("the gateway on {} did not answer", http.listen))?;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split(' ').nth(1).unwrap_or("?");
    let pretty = serde_json::from_str::<serde_json::Value>(body)
        .and_then(|json| serde_json::to_string_pretty(&json))
        .unwrap_or_else(|_| body.to_owned());
    #[allow(clippy::print_stdout)]
    {
        println!("{pretty}");
    }
    Ok(if status == "200" {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
