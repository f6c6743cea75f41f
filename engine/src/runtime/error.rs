//! Errors of the component runtime. Each says which component, which limit and how much.

use super::ComponentKind;
use crate::model::{ConfigIssue, ProtocolTaken};

/// A component could not be loaded; the running version (if any) stays in place.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    #[error("component `{name}` is not a valid WebAssembly component: {detail}")]
    Invalid { name: String, detail: String },
    #[error("component `{name}` does not fit the `{kind}` world: {detail}")]
    WrongWorld {
        name: String,
        kind: ComponentKind,
        detail: String,
    },
    #[error(
        "component `{name}` was built against {package}@{found}; this engine needs {package}@{needed}: rebuild it with the WIT files of this release"
    )]
    WitVersion {
        name: String,
        package: &'static str,
        found: String,
        needed: &'static str,
    },
    /// A codec whose declaration of what it speaks cannot be used.
    #[error("codec `{name}` cannot say what it speaks: {detail}")]
    Declaration { name: String, detail: String },
    /// A codec declaring a protocol another codec speaks.
    #[error("codec `{name}` cannot be installed: it declares {taken}")]
    ProtocolTaken { name: String, taken: ProtocolTaken },
    #[error("component runtime setup failed: {0}")]
    Engine(String),
}

/// Which sandbox limit stopped a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The per-call CPU budget, in fuel units.
    Cpu { budget: u64 },
    /// The memory cap of the instance, in bytes.
    Memory { cap: usize, requested: usize },
}

/// A call into a component failed. Only that call fails: the instance is rebuilt
/// for the next one and every other instance carries on. Each names the component,
/// the function and, for a limit, the limit with its amount (COMP-3).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    #[error("component `{component}` stopped in `{function}`: {}", describe_limit(*.limit))]
    LimitExceeded {
        component: String,
        function: &'static str,
        limit: Limit,
    },
    #[error("component `{component}` trapped in `{function}`: {detail}")]
    Trap {
        component: String,
        function: &'static str,
        detail: String,
    },
    #[error("component `{component}` refused its configuration: {}", describe_issues(.issues))]
    Config {
        component: String,
        issues: Vec<ConfigIssue>,
    },
    #[error("component `{component}` returned a malformed batch from `{function}`: {detail}")]
    Malformed {
        component: String,
        function: &'static str,
        detail: String,
    },
    /// The thread a call ran on ended without its result (the call panicked, or
    /// the engine is shutting down).
    #[error("component `{component}` gave no result from `{function}`: {detail}")]
    Lost {
        component: String,
        function: &'static str,
        detail: String,
    },
    #[error("component `{component}` could not be instantiated: {detail}")]
    Instantiate { component: String, detail: String },
    /// The message names the quarantine's length, not the time left, so that a
    /// device's last error stays the same from round to round while it lasts.
    #[error("component `{component}` is quarantined for {} after failing {failures} calls in a row", describe_period(*.period))]
    Quarantined {
        component: String,
        failures: u32,
        period: std::time::Duration,
        remaining: std::time::Duration,
    },
}

/// `60 s`, or `300 ms` for a period that is not whole seconds.
fn describe_period(period: std::time::Duration) -> String {
    if period.subsec_millis() == 0 {
        format!("{} s", period.as_secs())
    } else {
        format!("{} ms", period.as_millis())
    }
}

fn describe_limit(limit: Limit) -> String {
    match limit {
        Limit::Cpu { budget } => format!("ran out of its CPU budget of {budget} fuel units"),
        Limit::Memory { cap, requested } => format!(
            "memory cap of {} reached (it asked for {})",
            human_bytes(cap),
            human_bytes(requested)
        ),
    }
}

fn describe_issues(issues: &[ConfigIssue]) -> String {
    issues
        .iter()
        .map(|issue| match (issue.tag, issue.key.is_empty()) {
            (Some(tag), _) => format!("tag #{tag} `{}`: {}", issue.key, issue.message),
            (None, false) => format!("`{}`: {}", issue.key, issue.message),
            (None, true) => issue.message.clone(),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `65536` -> `64 KiB`, for messages.
pub fn human_bytes(bytes: usize) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}
