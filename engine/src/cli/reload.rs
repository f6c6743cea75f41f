//! `sluice reload --config FILE`: asks the gateway running with that
//! configuration (over its HTTP API, with its admin token) to read its pipeline
//! files and device configuration again now, and prints what it did.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use sluice::config;

/// Longest wait for the gateway's answer (a reload compiles pipelines).
const ANSWER_WITHIN: Duration = Duration::from_secs(120);

pub fn run(config_path: &Path) -> anyhow::Result<ExitCode> {
    let config =
        config::load_file(config_path).map_err(|problems| anyhow::anyhow!("{problems}"))?;
    let Some(http) = &config.collector.http else {
        anyhow::bail!(
            "{}: the gateway has no HTTP API (`collector.http`); it still reloads edited files by itself",
            config_path.display()
        );
    };
    let Some(token) = &http.admin_token else {
        anyhow::bail!(
            "{}: `collector.http.adminToken` is needed to ask for a reload",
            config_path.display()
        );
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
