//! The engine's layers, checked from its sources: which top-level module of
//! `engine/src` names which (`crate::x`, or `sluice::x` in the binary's modules),
//! and, inside every directory module at any depth, which of its parts names
//! which (`super::x`, `crate::module::x`, `child::x` in a module root; a nested
//! directory counts as one part of its parent). Fails on a module naming a module
//! of a higher layer (a lower layer owns the interface a higher one fills in,
//! ARCH-2), on the runtime naming a domain module (ARCH-1), on any cycle between
//! top-level modules, on any cycle between the parts of one directory module (its
//! `mod.rs` declares and re-exports, ARCH-4), and on a module missing from
//! [`LAYERS`].
//!
//! Test code is left out: inline `#[cfg(test)]` items and files declared as
//! `#[cfg(test)] mod name;`. The layers are described in `docs/architecture.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

mod cycles;
pub(crate) mod lexer;
mod scan;
mod tree;

use cycles::cycles;
use tree::Part;

/// The layers, lowest first: a module may name modules of its own layer or below.
pub const LAYERS: &[(&str, &[&str])] = &[
    (
        "foundation",
        &[
            "model",
            "clock",
            "sync",
            "memory",
            "yaml",
            "telemetry",
            "tls",
        ],
    ),
    ("platform", &["config", "runtime", "store", "mqtt"]),
    (
        "mechanisms",
        &["io", "scheduler", "pipeline", "wal", "uplink", "intake"],
    ),
    ("compiler", &["compile"]),
    (
        "domain",
        &[
            "lease",
            "collector",
            "alarm",
            "command",
            "watchdog",
            "deploy",
        ],
    ),
    ("wiring", &["gateway", "api", "console"]),
    ("tools", &["cli", "sdk", "sim", "broker"]),
];

/// Modules the wasm runtime must never name: it knows components, not the domain
/// (ARCH-1).
const RUNTIME_MUST_NOT_NAME: &[&str] = &[
    "alarm",
    "command",
    "collector",
    "lease",
    "uplink",
    "wal",
    "api",
    "deploy",
    "gateway",
    "scheduler",
    "watchdog",
    "compile",
    "pipeline",
    "io",
];

/// What the check found: the import graph of the top-level modules.
#[derive(Debug, Default)]
pub struct Graph {
    pub edges: BTreeMap<String, BTreeSet<String>>,
    /// How many directory modules (at any depth) had their parts checked.
    pub directories: usize,
}

/// Checks the sources under `src`.
///
/// # Errors
/// Every violation found, one line each; or a file that cannot be read.
pub fn check(src: &Path) -> Result<Graph, Vec<String>> {
    let modules = top_level(src).map_err(|e| vec![e])?;
    let mut problems = Vec::new();
    let mut graph = Graph::default();
    for (name, module) in &modules {
        let mut files = Vec::new();
        module.files(std::slice::from_ref(name), &mut files);
        let targets = files
            .iter()
            .flat_map(tree::File::references)
            .filter_map(|path| path.into_iter().next())
            .filter(|first| first != name && modules.contains_key(first))
            .collect();
        graph.edges.insert(name.clone(), targets);
        let mut trees = Vec::new();
        module.trees(&mut trees);
        graph.directories += trees.len();
        for tree in trees {
            for cycle in cycles(&tree.edges()) {
                problems.push(format!(
                    "parts of `{}` import each other in a cycle: {}",
                    tree.path.join("/"),
                    cycle.join(", ")
                ));
            }
        }
    }
    let rank = |module: &str| {
        LAYERS
            .iter()
            .position(|(_, members)| members.contains(&module))
    };
    for (module, targets) in &graph.edges {
        let Some(own) = rank(module) else {
            problems.push(format!(
                "module `{module}` is in no layer: add it to LAYERS and docs/architecture.md"
            ));
            continue;
        };
        for target in targets {
            if rank(target).is_some_and(|theirs| theirs > own) {
                problems.push(format!(
                    "`{module}` ({}) names `{target}` ({}), a higher layer",
                    LAYERS[own].0,
                    rank(target).map_or("?", |r| LAYERS[r].0)
                ));
            }
        }
    }
    if let Some(named) = graph.edges.get("runtime") {
        for target in named.intersection(
            &RUNTIME_MUST_NOT_NAME
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
        ) {
            problems.push(format!(
                "`runtime` names `{target}`: the runtime must know no domain module"
            ));
        }
    }
    for cycle in cycles(&graph.edges) {
        problems.push(format!(
            "top-level modules import each other in a cycle: {}",
            cycle.join(", ")
        ));
    }
    if problems.is_empty() {
        Ok(graph)
    } else {
        Err(problems)
    }
}

/// The top-level modules of `src` (directories and files, `lib.rs`/`main.rs` aside).
fn top_level(src: &Path) -> Result<BTreeMap<String, Part>, String> {
    let mut modules = BTreeMap::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(src)
        .map_err(|e| format!("cannot read {}: {e}", src.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned) else {
            continue;
        };
        let own = vec![stem.clone()];
        if path.is_dir() {
            if path.join("mod.rs").is_file() {
                modules.insert(stem, tree::load(&path.join("mod.rs"), &path, own)?);
            }
        } else if path.extension().is_some_and(|e| e == "rs") && stem != "lib" && stem != "main" {
            let dir = src.join(&stem);
            modules.insert(stem, tree::load(&path, &dir, own)?);
        }
    }
    Ok(modules)
}
